/**
 * keys.provider softhsm, the sandbox switch of `qtsp dev` (e.g. QTSP_KEYS_PROVIDER=softhsm npm start): a
 * SoftHSM2 token under <dataDir>/softhsm (created on first start, its own softhsm2.conf, a random PIN in a 0600
 * file), and the pkcs11 backend running on it. `qtsp serve` and `qtsp pki init` refuse it: there the pkcs11
 * settings name a token.
 */
import { join } from 'node:path';
import { ConfigError } from '../../config/load.ts';
import type { CustodyBackend } from '../registry.ts';
import { createSoftHsmToken } from './token.ts';

function refused(): never {
  throw new ConfigError(
    'setting keys.provider: softhsm is the sandbox switch of `qtsp dev` (a SoftHSM2 token under the data dir); ' +
      '`qtsp serve` takes pkcs11 with keys.pkcs11Module, keys.tokenLabel and keys.pinFile',
  );
}

export const backend: CustodyBackend = {
  open: async () => refused(),
  openForInit: async () => refused(),
  /** SOFTHSM2_CONF is set for this process: the PKCS#11 module reads it when it is initialised. */
  sandbox(config) {
    const token = createSoftHsmToken(join(config.dataDir, 'softhsm'), 'qtsp-sandbox');
    process.env['SOFTHSM2_CONF'] = token.conf;
    return { provider: 'pkcs11', pkcs11Module: token.module, tokenLabel: token.label, pinFile: token.pinFile };
  },
};
