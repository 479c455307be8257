/**
 * `qtsp pki init`: the QTSP's long-lived material in <dataDir>/pki:
 *   root-ca.pem / .key.pem        root CA (publish it: relying parties verify our signatures against it)
 *   issuing-ca.pem / .key.pem     issuing CA of the per-request signer certificates
 *   qtsp-client.pem / .key.pem    our self-signed TLS client certificate towards the AS (spec 5.8)
 * Keys are PKCS#8 PEM files readable by the owner only (software custody, sandbox).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createRootCa, createSubCa, createTlsCertificate, loadKeyed, saveKeyed, type KeyedCertificate } from './authority.ts';
import type { KeyAlgorithm } from './keys.ts';
import { OID } from './x509.ts';

export interface PkiPaths {
  readonly dir: string;
  readonly rootCert: string;
  readonly rootKey: string;
  readonly issuingCert: string;
  readonly issuingKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
}

export function pkiPaths(dataDir: string): PkiPaths {
  const dir = join(dataDir, 'pki');
  return {
    dir,
    rootCert: join(dir, 'root-ca.pem'),
    rootKey: join(dir, 'root-ca.key.pem'),
    issuingCert: join(dir, 'issuing-ca.pem'),
    issuingKey: join(dir, 'issuing-ca.key.pem'),
    clientCert: join(dir, 'qtsp-client.pem'),
    clientKey: join(dir, 'qtsp-client.key.pem'),
  };
}

export interface PkiInitOptions {
  readonly dataDir: string;
  readonly qtspId: string;
  readonly algorithm?: KeyAlgorithm;
  /** replace existing material (never done implicitly) */
  readonly force?: boolean;
}

export function pkiExists(dataDir: string): boolean {
  const p = pkiPaths(dataDir);
  return [p.rootCert, p.rootKey, p.issuingCert, p.issuingKey, p.clientCert, p.clientKey].every((f) => existsSync(f));
}

/** Creates the material unless it exists; returns whether it created it. */
export function pkiInit(options: PkiInitOptions): boolean {
  if (pkiExists(options.dataDir) && !options.force) return false;
  const p = pkiPaths(options.dataDir);
  const algorithm = options.algorithm ?? 'P-256';
  const org = { type: OID.organizationName, value: 'qtsp sandbox trust service' };
  const country = { type: OID.countryName, value: 'DE' };
  const root = createRootCa([country, org, { type: OID.commonName, value: 'qtsp Sandbox Root CA' }], algorithm);
  const issuing = createSubCa(root, [country, org, { type: OID.commonName, value: 'qtsp Sandbox Qualified Signing CA' }], algorithm);
  const client = createTlsCertificate(undefined, { commonName: options.qtspId, usage: 'client' });
  saveKeyed(root, p.rootCert, p.rootKey);
  saveKeyed(issuing, p.issuingCert, p.issuingKey);
  saveKeyed(client, p.clientCert, p.clientKey);
  return true;
}

export interface CaMaterial {
  readonly root: KeyedCertificate;
  readonly issuing: KeyedCertificate;
}

export function loadCaMaterial(dataDir: string): CaMaterial {
  const p = pkiPaths(dataDir);
  return { root: loadKeyed(p.rootCert, p.rootKey), issuing: loadKeyed(p.issuingCert, p.issuingKey) };
}
