/**
 * keys.provider pkcs11: a token named by keys.pkcs11Module, keys.tokenLabel and keys.pinFile (custody.ts).
 * `qtsp pki init` makes the long-lived keys in the token. A missing module or token, or a wrong PIN, stops the
 * start with a ConfigError naming the setting.
 */
import { ConfigError } from '../../config/load.ts';
import type { Config } from '../../config/schema.ts';
import type { Logger } from '../../util/logger.ts';
import { requireKeysIn, type CustodyBackend } from '../registry.ts';
import { Pkcs11Custody, type Pkcs11CustodyOptions } from './custody.ts';

function custodyOptions(config: Config, logger: Logger | undefined, forInit: boolean): Pkcs11CustodyOptions {
  const k = config.keys;
  const missing = (['pkcs11Module', 'tokenLabel', 'pinFile'] as const).find((s) => !k[s]);
  if (missing) throw new ConfigError(`setting keys.${missing}: required when keys.provider is ${k.provider}`);
  return {
    module: k.pkcs11Module!,
    tokenLabel: k.tokenLabel!,
    pinFile: k.pinFile!,
    sessions: k.sessions,
    qscd: k.tokenIsQscd,
    rsaPoolSize: config.signer.rsaPoolSize,
    requireLongLivedKeys: !forInit,
    ...(logger ? { logger } : {}),
  };
}

export const backend: CustodyBackend = {
  async open(config, { material, logger }) {
    requireKeysIn(material, 'pkcs11');
    return Pkcs11Custody.open(custodyOptions(config, logger, false));
  },
  openForInit: (config, { logger }) => Pkcs11Custody.open(custodyOptions(config, logger, true)),
};
