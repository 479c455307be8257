/**
 * What `qtsp evidence audit`, `record` and `export` trust (journal/token-trust.ts): our root, from `--root FILE`
 * (the auditor's own copy, as published) or else the data directory's pki/root-ca.pem; our TSA certificate of
 * the CA material (earlier generations come from the store's records, each judged against that root); the
 * external TSA's chain (tsa.chainFile) when one time-stamps in place of ours; the second TSA's chain
 * (journal.secondTsaChainFile).
 */
import { existsSync, readFileSync } from 'node:fs';
import { pkiPaths } from '../ca/material.ts';
import type { Config } from '../config/schema.ts';
import type { TokenTrust } from '../journal/token-trust.ts';
import { externalTsaChain } from '../trust-services.ts';
import { fromPem } from '../util/base64.ts';

/** The first PEM certificate of `file`, or an error naming the file. */
function firstCertificate(file: string): Buffer {
  if (!existsSync(file)) throw new Error(`${file} does not exist`);
  const der = fromPem(readFileSync(file, 'utf8'))[0];
  if (!der) throw new Error(`${file} holds no PEM certificate`);
  return der;
}

export function evidenceTrust(config: Config, rootFile: string | undefined): TokenTrust {
  return trustWithRoot(config, firstCertificate(rootFile ?? pkiPaths(config.dataDir).rootCert));
}

/** The same with `root` (DER) as the anchor, as the export fetches it from our publication server. */
export function trustWithRoot(config: Config, root: Buffer): TokenTrust {
  const p = pkiPaths(config.dataDir);
  const secondFile = config.journal.secondTsaChainFile;
  return {
    ours: {
      root,
      certificates: existsSync(p.tsaCert) ? [firstCertificate(p.tsaCert)] : [],
      keyUsageDays: config.calendar.tsuKeyUsageDays,
    },
    external: config.tsa.url ? externalTsaChain(config, root) : undefined,
    second: secondFile ? fromPem(readFileSync(secondFile, 'utf8')) : undefined,
  };
}
