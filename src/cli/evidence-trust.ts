/**
 * What `qtsp evidence audit`, `record` and `export` trust (journal/token-trust.ts): our root, from `--root FILE`
 * (the auditor's own copy, as published) or else the data directory's pki/root-ca.pem, and the rest as the
 * service's own audit trusts it (trust-services.ts `journalTrust`).
 */
import { pkiPaths } from '../ca/material.ts';
import type { Config } from '../config/schema.ts';
import type { TokenTrust } from '../journal/token-trust.ts';
import { firstCertificate, journalTrust } from '../trust-services.ts';

export function evidenceTrust(config: Config, rootFile: string | undefined): TokenTrust {
  return journalTrust(config, firstCertificate(rootFile ?? pkiPaths(config.dataDir).rootCert));
}
