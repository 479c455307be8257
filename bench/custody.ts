/**
 * Key custody variants of the benchmark: what `npm run bench` needs to run the same QTSP with its
 * keys elsewhere. `software`: node:crypto keys in the QTSP process (the default). `softhsm`: every key in a
 * SoftHSM2 token over PKCS#11: a copy of the benchmark's data directory whose issuing CA, TSA and OCSP
 * responder keys `qtsp pki init` made in a fresh token (the root and the sandbox files stay the
 * same, so the sandbox needs no change), and the QTSP_* settings that select it.
 */
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../src/config/load.ts';
import type { ConfigInput } from '../src/config/schema.ts';
import { createSoftHsmToken } from '../src/custody/softhsm/token.ts';
import { keyCeremony } from '../src/ca/init.ts';

export interface CustodyVariant {
  /** QTSP_* (and SOFTHSM2_CONF) settings for the QTSP process */
  readonly env: Record<string, string>;
  /** the same as configuration, for the in-process step costs */
  readonly config: ConfigInput;
}

/** The variant `keys` over the benchmark's data directory, or why it cannot run. */
export async function custodyVariant(
  keys: string,
  dataDir: string,
  base: ConfigInput,
): Promise<CustodyVariant | string> {
  if (keys === 'software') return { env: {}, config: {} };
  if (keys !== 'softhsm') return `unknown key custody ${keys}`;
  const dir = `${dataDir}-softhsm`;
  // everything but the store and Redis's own files: the same root, sandbox TLS and key archive material
  cpSync(dataDir, dir, { recursive: true, filter: (src) => !/\/(redis|qtsp\.sqlite[^/]*|instance\.lock)$/.test(src) });
  const token = createSoftHsmToken(join(dir, 'softhsm'), 'qtsp-bench');
  process.env['SOFTHSM2_CONF'] = token.conf; // this process initialises the module for the init below
  const keysConfig = {
    provider: 'pkcs11' as const,
    pkcs11Module: token.module,
    tokenLabel: token.label,
    pinFile: token.pinFile,
  };
  await keyCeremony(loadConfig({ ...base, dataDir: dir, keys: keysConfig }, {}));
  return {
    env: {
      QTSP_DATA_DIR: dir,
      QTSP_KEYS_PROVIDER: 'pkcs11',
      QTSP_KEYS_PKCS11_MODULE: token.module,
      QTSP_KEYS_TOKEN_LABEL: token.label,
      QTSP_KEYS_PIN_FILE: token.pinFile,
      SOFTHSM2_CONF: token.conf,
    },
    config: { dataDir: dir, keys: keysConfig },
  };
}
