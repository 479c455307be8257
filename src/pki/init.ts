/**
 * `qtsp pki init`: the QTSP's long-lived material in <dataDir>/pki:
 *   root-ca.pem / .key.pem        root CA (publish it: relying parties verify our signatures against it)
 *   issuing-ca.pem / .key.pem     issuing CA of the per-request signer certificates
 *   qtsp-client.pem / .key.pem    our self-signed TLS client certificate towards the AS (spec 5.8)
 *   tsa.pem / .key.pem            time-stamping unit, issued by the root (RFC 3161 2.3: EKU timeStamping only)
 *   ocsp-responder.pem / .key.pem delegated OCSP responder of the issuing CA (RFC 6960 4.2.2.2)
 * The last two are also created for data directories made before they existed (ensureTrustServiceCertificates).
 * Keys are PKCS#8 PEM files readable by the owner only (software custody, sandbox).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createRootCa, createTlsCertificate, loadKeyed, saveKeyed, type KeyedCertificate } from './authority.ts';
import { defaultHashFor, generateKeyPair, keyAlgorithmOf, type KeyAlgorithm } from './keys.ts';
import { DEFAULT_PUBLIC_BASE_URL, ocspNoCheckExtension, pkiUrls, PKIX_OID, rootCaPointers, type PkiUrls } from './publication.ts';
import { basicConstraintsExtension, buildName, extKeyUsageExtension, issueCertificate, keyIdentifier, keyUsageExtension, OID, spkiOf, type NameAttribute } from './x509.ts';

export interface PkiPaths {
  readonly dir: string;
  readonly rootCert: string;
  readonly rootKey: string;
  readonly issuingCert: string;
  readonly issuingKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
  readonly tsaCert: string;
  readonly tsaKey: string;
  readonly ocspCert: string;
  readonly ocspKey: string;
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
    tsaCert: join(dir, 'tsa.pem'),
    tsaKey: join(dir, 'tsa.key.pem'),
    ocspCert: join(dir, 'ocsp-responder.pem'),
    ocspKey: join(dir, 'ocsp-responder.key.pem'),
  };
}

export interface PkiInitOptions {
  readonly dataDir: string;
  readonly qtspId: string;
  readonly algorithm?: KeyAlgorithm;
  /** replace existing material (never done implicitly) */
  readonly force?: boolean;
  /** base URL of our OCSP, CRL and CA certificate endpoints, for the AIA and CRL DP extensions (server.publicBaseUrl) */
  readonly publicBaseUrl?: string;
}

export function pkiExists(dataDir: string): boolean {
  const p = pkiPaths(dataDir);
  return [p.rootCert, p.rootKey, p.issuingCert, p.issuingKey, p.clientCert, p.clientKey].every((f) => existsSync(f));
}

const ORG = { type: OID.organizationName, value: 'qtsp sandbox trust service' };
const COUNTRY = { type: OID.countryName, value: 'DE' };

/**
 * Creates the material unless it exists; returns whether it created it. Either way, the TSA and OCSP
 * responder certificates are created when missing.
 */
export function pkiInit(options: PkiInitOptions): boolean {
  const urls = pkiUrls(options.publicBaseUrl ?? DEFAULT_PUBLIC_BASE_URL);
  if (pkiExists(options.dataDir) && !options.force) {
    ensureTrustServiceCertificates(options.dataDir, urls);
    return false;
  }
  const p = pkiPaths(options.dataDir);
  const algorithm = options.algorithm ?? 'P-256';
  const root = createRootCa([COUNTRY, ORG, { type: OID.commonName, value: 'qtsp Sandbox Root CA' }], algorithm);
  // as authority.ts createSubCa, plus where its status is published (AIA caIssuers, CRL DP of the root)
  const issuing = issueBy(root, 'qtsp Sandbox Qualified Signing CA', 10, [basicConstraintsExtension(true, 0), keyUsageExtension(['keyCertSign', 'cRLSign']), ...rootCaPointers(urls)]);
  const client = createTlsCertificate(undefined, { commonName: options.qtspId, usage: 'client' });
  saveKeyed(root, p.rootCert, p.rootKey);
  saveKeyed(issuing, p.issuingCert, p.issuingKey);
  saveKeyed(client, p.clientCert, p.clientKey);
  ensureTrustServiceCertificates(options.dataDir, urls, true);
  return true;
}

const YEAR_MS = 365 * 24 * 3600 * 1000;

/** A certificate issued by `ca` for a fresh key of the CA's algorithm (a sub-CA or one of our trust services). */
function issueBy(ca: KeyedCertificate, commonName: string, years: number, extensions: Parameters<typeof issueCertificate>[0]['extensions']): KeyedCertificate {
  const keys = generateKeyPair(keyAlgorithmOf(ca.privateKey));
  const subject: NameAttribute[] = [COUNTRY, ORG, { type: OID.commonName, value: commonName }];
  const now = Date.now();
  const { der, certificate } = issueCertificate({
    subject: buildName(subject),
    publicKey: spkiOf(keys.publicKey),
    issuer: ca.issuer,
    notBefore: new Date(now - 3600_000),
    notAfter: new Date(now + years * YEAR_MS),
    extensions,
    keyIdentifiers: true,
  });
  const issuer = { name: certificate.subject, keyId: keyIdentifier(certificate.subjectPublicKeyInfo), privateKey: keys.privateKey, hash: defaultHashFor(keys.algorithm) };
  return { der, certificate, privateKey: keys.privateKey, issuer };
}

/**
 * The TSA certificate (issued by the root: RFC 3161 2.3 EKU timeStamping alone and critical, key usage
 * digitalSignature) and the delegated OCSP responder (issued by the issuing CA: id-kp-OCSPSigning and
 * id-pkix-ocsp-nocheck, RFC 6960 4.2.2.2), each created when its files are missing or `replace` is set.
 * The responder certificate carries no revocation pointers: ocsp-nocheck says it is not checked.
 */
export function ensureTrustServiceCertificates(dataDir: string, urls: PkiUrls, replace = false): void {
  const p = pkiPaths(dataDir);
  const missing = (cert: string, key: string) => replace || !existsSync(cert) || !existsSync(key);
  if (!missing(p.tsaCert, p.tsaKey) && !missing(p.ocspCert, p.ocspKey)) return;
  const { root, issuing } = loadCaMaterial(dataDir);
  if (missing(p.tsaCert, p.tsaKey)) {
    const tsa = issueBy(root, 'qtsp Sandbox Time-Stamping Unit', 10, [
      basicConstraintsExtension(false),
      keyUsageExtension(['digitalSignature']),
      extKeyUsageExtension([PKIX_OID.timeStamping], true),
      ...rootCaPointers(urls),
    ]);
    saveKeyed(tsa, p.tsaCert, p.tsaKey);
  }
  if (missing(p.ocspCert, p.ocspKey)) {
    const responder = issueBy(issuing, 'qtsp Sandbox OCSP Responder', 2, [
      basicConstraintsExtension(false),
      keyUsageExtension(['digitalSignature']),
      extKeyUsageExtension([PKIX_OID.ocspSigning]),
      ocspNoCheckExtension(),
    ]);
    saveKeyed(responder, p.ocspCert, p.ocspKey);
  }
}

export function trustServicesExist(dataDir: string): boolean {
  const p = pkiPaths(dataDir);
  return [p.tsaCert, p.tsaKey, p.ocspCert, p.ocspKey].every((f) => existsSync(f));
}

export interface CaMaterial {
  readonly root: KeyedCertificate;
  readonly issuing: KeyedCertificate;
}

export function loadCaMaterial(dataDir: string): CaMaterial {
  const p = pkiPaths(dataDir);
  return { root: loadKeyed(p.rootCert, p.rootKey), issuing: loadKeyed(p.issuingCert, p.issuingKey) };
}

export interface TrustServiceMaterial {
  readonly tsa: KeyedCertificate;
  readonly ocspResponder: KeyedCertificate;
}

export function loadTrustServiceMaterial(dataDir: string): TrustServiceMaterial {
  const p = pkiPaths(dataDir);
  return { tsa: loadKeyed(p.tsaCert, p.tsaKey), ocspResponder: loadKeyed(p.ocspCert, p.ocspKey) };
}
