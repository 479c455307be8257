/**
 * The key custodian the configuration asks for (keys.provider): software (default), pkcs11 (a token named by
 * keys.pkcs11Module, keys.tokenLabel, keys.pinFile), or softhsm (the pkcs11 custodian on a SoftHSM2 token that
 * `qtsp dev` creates under the data dir: cli/ecosystem.ts fills in the pkcs11 settings). A token that is missing,
 * a wrong PIN or a missing module stops the start with a ConfigError naming the setting.
 */
import type { Config } from '../config/schema.ts';
import { ConfigError } from '../config/load.ts';
import type { Logger } from '../util/logger.ts';
import { keysInCustody, pkiPaths } from '../ca/material.ts';
import { Pkcs11Custody } from './pkcs11/custody.ts';
import { SoftwareCustody } from './software/custody.ts';
import type { KeyCustody } from './types.ts';

export function pkcs11Settings(config: Config): { module: string; tokenLabel: string; pinFile: string } {
  const k = config.keys;
  const missing = (['pkcs11Module', 'tokenLabel', 'pinFile'] as const).find((s) => !k[s]);
  if (missing) throw new ConfigError(`setting keys.${missing}: required when keys.provider is ${k.provider}`);
  return { module: k.pkcs11Module!, tokenLabel: k.tokenLabel!, pinFile: k.pinFile! };
}

/** Opens the custodian; `forInit`: the long-lived keys need not exist yet (`qtsp pki init --pkcs11`). */
export async function openKeyCustody(
  config: Config,
  options: { logger?: Logger; forInit?: boolean } = {},
): Promise<KeyCustody> {
  const logger = options.logger;
  if (config.keys.provider === 'software') {
    if (keysInCustody(config.dataDir) && !options.forInit) {
      throw new ConfigError(
        `setting keys.provider: the CA keys of ${config.dataDir}/pki are in a PKCS#11 token (\`qtsp pki init --pkcs11\`); set keys.provider to pkcs11, or run \`qtsp pki init --force\``,
      );
    }
    const p = pkiPaths(config.dataDir);
    return new SoftwareCustody({
      keyFiles: { 'issuing-ca': p.issuingKey, tsa: p.tsaKey, 'ocsp-responder': p.ocspKey },
      rsaPoolSize: config.signer.rsaPoolSize,
      ...(logger ? { logger } : {}),
    });
  }
  if (config.keys.provider === 'softhsm') {
    throw new ConfigError(
      'setting keys.provider: softhsm is the sandbox switch of `qtsp dev` (a SoftHSM2 token under the data dir); `qtsp serve` takes pkcs11 with keys.pkcs11Module, keys.tokenLabel and keys.pinFile',
    );
  }
  if (!keysInCustody(config.dataDir) && !options.forInit) {
    throw new ConfigError(
      `setting keys.provider: ${config.dataDir}/pki holds software CA keys; run \`qtsp pki init --pkcs11 --force\` to make them in the token`,
    );
  }
  return Pkcs11Custody.open({
    ...pkcs11Settings(config),
    sessions: config.keys.sessions,
    qscd: config.keys.tokenIsQscd,
    rsaPoolSize: config.signer.rsaPoolSize,
    requireLongLivedKeys: !options.forInit,
    ...(logger ? { logger } : {}),
  });
}
