/**
 * `qtsp pki init`, the key ceremony: makes the QTSP's long-lived material in <dataDir>/pki (material.ts lists
 * the files). With key files (pkiInit), every key is a PKCS#8 PEM file readable by the owner only. The TSA and
 * OCSP responder certificates are also created for data directories made before they existed
 * (ensureTrustServiceCertificates).
 *
 * In a key custody that keeps long-lived keys itself (pkiInitInToken, e.g. a PKCS#11 token): the issuing CA,
 * TSA and OCSP responder keys are generated inside it instead, no key file is written for them, and the marker
 * file records the custody. The root CA stays a software key in both cases: it signs only at init (and its
 * CRL); a real operator's root lives offline, apart from the online HSM.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import type { KeyObject } from 'node:crypto';
import { SoftwareSigningKey } from '../crypto/signature.ts';
import { toPem } from '../util/base64.ts';
import { ensurePrivateDir } from '../util/private-files.ts';
import {
  certifiedKey,
  createRootCa,
  createTlsCertificate,
  loadKeyed,
  saveKeyed,
  type KeyedCertificate,
  type SoftwareKeyedCertificate,
} from './authority.ts';
import { describeLocation, type KeyCustody, type LongLivedKeyMaker, type LongLivedKeyName } from '../custody/types.ts';
import {
  custodyMarkerFile,
  keysInCustody,
  loadCaMaterial,
  pkiExists,
  pkiPaths,
  trustServicesExist,
} from './material.ts';
import { generateKeyPair, type KeyAlgorithm } from '../crypto/keys.ts';
import {
  DEFAULT_PUBLIC_BASE_URL,
  ocspNoCheckExtension,
  pkiUrls,
  PKIX_OID,
  rootCaPointers,
  type PkiUrls,
} from './publication.ts';
import {
  basicConstraintsExtension,
  buildName,
  extKeyUsageExtension,
  issueCertificate,
  issueCertificateAsync,
  keyUsageExtension,
  OID,
  spkiOf,
  type CertificateRequest,
  type NameAttribute,
} from './x509.ts';

export interface PkiInitOptions {
  readonly dataDir: string;
  readonly qtspId: string;
  readonly algorithm?: KeyAlgorithm;
  /** replace existing material (never done implicitly) */
  readonly force?: boolean;
  /** base URL of our OCSP, CRL and CA certificate endpoints, for the AIA and CRL DP extensions (server.publicBaseUrl) */
  readonly publicBaseUrl?: string;
}

const ORG = { type: OID.organizationName, value: 'qtsp sandbox trust service' };
const COUNTRY = { type: OID.countryName, value: 'DE' };

/**
 * Creates the material unless it exists; returns whether it created it. Either way, the TSA and OCSP
 * responder certificates are created when missing.
 */
export function pkiInit(options: PkiInitOptions): boolean {
  const urls = pkiUrls(options.publicBaseUrl ?? DEFAULT_PUBLIC_BASE_URL);
  ensurePrivateDir(options.dataDir); // 0700 when we create it: it will hold keys and the evidence store
  if (pkiExists(options.dataDir) && !options.force) {
    ensureTrustServiceCertificates(options.dataDir, urls);
    return false;
  }
  const p = pkiPaths(options.dataDir);
  const algorithm = options.algorithm ?? 'P-256';
  const root = createRootCa(ROOT_SUBJECT, algorithm);
  const issuing = issueBy(root, PROFILES['issuing-ca'](urls));
  const client = createTlsCertificate(undefined, { commonName: options.qtspId, usage: 'client' });
  saveKeyed(root, p.rootCert, p.rootKey);
  saveKeyed(issuing, p.issuingCert, p.issuingKey);
  saveKeyed(client, p.clientCert, p.clientKey);
  rmSync(custodyMarkerFile(options.dataDir), { force: true });
  ensureTrustServiceCertificates(options.dataDir, urls, true);
  return true;
}

const ROOT_SUBJECT: NameAttribute[] = [COUNTRY, ORG, { type: OID.commonName, value: 'qtsp Sandbox Root CA' }];

export interface PkiInitInTokenOptions extends PkiInitOptions {
  /** the token custodian (custody/pkcs11.ts), opened without requiring the long-lived keys */
  readonly token: LongLivedKeyMaker & Pick<KeyCustody, 'location'>;
}

/**
 * `qtsp pki init --pkcs11`: the issuing CA, TSA and OCSP responder keys generated inside the token (sensitive,
 * never extractable token objects), their certificates written as by pkiInit; the root CA and our TLS client
 * certificate stay software (kept when they exist). Returns whether it created anything.
 */
export async function pkiInitInToken(options: PkiInitInTokenOptions): Promise<boolean> {
  const urls = pkiUrls(options.publicBaseUrl ?? DEFAULT_PUBLIC_BASE_URL);
  ensurePrivateDir(options.dataDir);
  if (
    pkiExists(options.dataDir) &&
    keysInCustody(options.dataDir) &&
    trustServicesExist(options.dataDir) &&
    !options.force
  )
    return false;
  const p = pkiPaths(options.dataDir);
  const algorithm = options.algorithm ?? 'P-256';
  const keepRoot = existsSync(p.rootCert) && existsSync(p.rootKey) && !options.force;
  const root = keepRoot ? loadKeyed(p.rootCert, p.rootKey) : createRootCa(ROOT_SUBJECT, algorithm);
  const inToken = async (name: LongLivedKeyName, ca: KeyedCertificate): Promise<KeyedCertificate> => {
    const key = await options.token.generateLongLivedKey(name, algorithm);
    const { der, certificate } = await issueCertificateAsync(requestFor(ca, PROFILES[name](urls), key.publicKey));
    return certifiedKey(der, key, certificate);
  };
  const issuing = await inToken('issuing-ca', root);
  const tsa = await inToken('tsa', root);
  const responder = await inToken('ocsp-responder', issuing);
  if (!keepRoot) saveKeyed(root, p.rootCert, p.rootKey);
  if (!existsSync(p.clientCert) || !existsSync(p.clientKey) || options.force)
    saveKeyed(
      createTlsCertificate(undefined, { commonName: options.qtspId, usage: 'client' }),
      p.clientCert,
      p.clientKey,
    );
  for (const [cert, der, keyFile] of [
    [p.issuingCert, issuing.der, p.issuingKey],
    [p.tsaCert, tsa.der, p.tsaKey],
    [p.ocspCert, responder.der, p.ocspKey],
  ] as const) {
    writeFileSync(cert, toPem(der, 'CERTIFICATE'));
    rmSync(keyFile, { force: true }); // a software key of before must not linger beside the token's
  }
  writeFileSync(
    custodyMarkerFile(options.dataDir),
    `${JSON.stringify({ keys: 'pkcs11', token: describeLocation(options.token.location), createdAt: new Date().toISOString() }, null, 2)}\n`,
  );
  return true;
}

const YEAR_MS = 365 * 24 * 3600 * 1000;

/** What each long-lived certificate is: subject, lifetime (years), extensions. */
interface Profile {
  readonly commonName: string;
  readonly years: number;
  readonly extensions: CertificateRequest['extensions'];
}

const PROFILES = {
  // as authority.ts createSubCa, plus where its status is published (AIA caIssuers, CRL DP of the root)
  'issuing-ca': (urls: PkiUrls): Profile => ({
    commonName: 'qtsp Sandbox Qualified Signing CA',
    years: 10,
    extensions: [
      basicConstraintsExtension(true, 0),
      keyUsageExtension(['keyCertSign', 'cRLSign']),
      ...rootCaPointers(urls),
    ],
  }),
  tsa: (urls: PkiUrls): Profile => ({
    commonName: 'qtsp Sandbox Time-Stamping Unit',
    years: 10,
    extensions: [
      basicConstraintsExtension(false),
      keyUsageExtension(['digitalSignature']),
      extKeyUsageExtension([PKIX_OID.timeStamping], true),
      ...rootCaPointers(urls),
    ],
  }),
  'ocsp-responder': (): Profile => ({
    commonName: 'qtsp Sandbox OCSP Responder',
    years: 2,
    extensions: [
      basicConstraintsExtension(false),
      keyUsageExtension(['digitalSignature']),
      extKeyUsageExtension([PKIX_OID.ocspSigning]),
      ocspNoCheckExtension(),
    ],
  }),
} satisfies Record<LongLivedKeyName, (urls: PkiUrls) => Profile>;

function requestFor(ca: KeyedCertificate, profile: Profile, publicKey: KeyObject): CertificateRequest {
  const now = Date.now();
  return {
    subject: buildName([COUNTRY, ORG, { type: OID.commonName, value: profile.commonName }] satisfies NameAttribute[]),
    publicKey: spkiOf(publicKey),
    issuer: ca.issuer,
    notBefore: new Date(now - 3600_000),
    notAfter: new Date(now + profile.years * YEAR_MS),
    extensions: profile.extensions,
    keyIdentifiers: true,
  };
}

/** A certificate issued by a software `ca` for a fresh software key of the CA's algorithm. */
function issueBy(ca: SoftwareKeyedCertificate, profile: Profile): SoftwareKeyedCertificate {
  const keys = generateKeyPair(ca.key.algorithm);
  const { der, certificate } = issueCertificate(requestFor(ca, profile, keys.publicKey));
  return {
    ...certifiedKey(der, new SoftwareSigningKey(keys.privateKey, keys.algorithm), certificate),
    privateKey: keys.privateKey,
  };
}

/**
 * The TSA certificate (issued by the root: RFC 3161 2.3 EKU timeStamping alone and critical, key usage
 * digitalSignature) and the delegated OCSP responder (issued by the issuing CA: id-kp-OCSPSigning and
 * id-pkix-ocsp-nocheck, RFC 6960 4.2.2.2), each created when its files are missing or `replace` is set.
 * The responder certificate carries no revocation pointers: ocsp-nocheck says it is not checked.
 */
export function ensureTrustServiceCertificates(dataDir: string, urls: PkiUrls, replace = false): void {
  const p = pkiPaths(dataDir);
  if (keysInCustody(dataDir)) return; // `qtsp pki init --pkcs11` made them
  const missing = (cert: string, key: string) => replace || !existsSync(cert) || !existsSync(key);
  if (!missing(p.tsaCert, p.tsaKey) && !missing(p.ocspCert, p.ocspKey)) return;
  const { root, issuing } = loadCaMaterial(dataDir);
  if (missing(p.tsaCert, p.tsaKey)) saveKeyed(issueBy(root, PROFILES.tsa(urls)), p.tsaCert, p.tsaKey);
  if (missing(p.ocspCert, p.ocspKey)) saveKeyed(issueBy(issuing, PROFILES['ocsp-responder']()), p.ocspCert, p.ocspKey);
}
