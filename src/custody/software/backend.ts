/**
 * keys.provider software: node:crypto keys in this process (custody.ts); the long-lived keys are the PKCS#8
 * files `qtsp pki init` writes. Needs no settings of its own.
 */
import { requireKeyFiles, type CustodyBackend } from '../registry.ts';
import { SoftwareCustody } from './custody.ts';

export const backend: CustodyBackend = {
  async open(config, { material, logger }) {
    requireKeyFiles(material, 'software');
    return new SoftwareCustody({
      keyFiles: material.keyFiles,
      rsaPoolSize: config.signer.rsaPoolSize,
      ...(logger ? { logger } : {}),
    });
  },
};
