/**
 * The key ceremony (`qtsp pki ceremony`, also run by `qtsp pki init` and the sandbox's first start): makes the
 * QTSP's long-lived material in <dataDir>/pki (material.ts lists the files). The root key is used here only:
 * it issues the issuing CA, the TSA, the root's delegated OCSP responder (RFC 6960 4.2.2.2) and the mail CA,
 * and signs the root's CRL with a long validity; it is then kept in the ceremony directory (by default
 * <dataDir>/ceremony), which the running service never reads and an operator moves offline.
 * With key files (pkiInit), every key is a PKCS#8 PEM file readable by the owner only.
 *
 * In a key custody that keeps long-lived keys itself (pkiInitInCustody, e.g. a PKCS#11 token): the issuing CA,
 * TSA and both OCSP responder keys are generated inside it instead, no key file is written for them, and the
 * marker file records the custody and the keys it holds. The root CA stays a software key of the ceremony
 * directory in both cases.
 * A data directory made while the root key was online (pki/root-ca.key.pem) is migrated: the key moves to
 * the ceremony directory and the missing pieces are issued (completeCeremony). One whose custody holds every
 * long-lived key but the root's OCSP responder (made before it did) gets that key made in the custody and
 * certified by the root, and its key file deleted (moveRootResponderIntoCustody).
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { KeyObject } from 'node:crypto';
import { signWith, SoftwareSigningKey } from '../crypto/signature.ts';
import { toPem } from '../util/base64.ts';
import { ensurePrivateDir, writePrivateFile } from '../util/private-files.ts';
import {
  certifiedKey,
  createRootCa,
  createTlsCertificate,
  loadKeyed,
  saveKeyed,
  type KeyedCertificate,
  type SoftwareKeyedCertificate,
} from './authority.ts';
import { ConfigError } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { loadCustodyBackend } from '../custody/registry.ts';
import type { KeyCustody, LongLivedKeyMaker, LongLivedKeyName } from '../custody/types.ts';
import type { Logger } from '../util/logger.ts';
import {
  ceremonyRootKeyFile,
  custodyHolds,
  custodyMarker,
  custodyMarkerFile,
  keysInCustody,
  legacyRootKeyFile,
  longLivedMaterial,
  pkiExists,
  pkiPaths,
  rootCeremonyMaterialExists,
  trustServicesExist,
} from './material.ts';
import { certificateList, crlToBeSigned } from './certificate-list.ts';
import { generateKeyPair, type KeyAlgorithm } from '../crypto/keys.ts';
import {
  DEFAULT_PUBLIC_BASE_URL,
  ocspNoCheckExtension,
  pkiUrls,
  PKIX_OID,
  publicBaseUrl,
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
  /** base URL of our OCSP, CRL and CA certificate endpoints, for the AIA and CRL DP extensions */
  readonly publicBaseUrl?: string;
  /** where the root key is kept; the running service never reads it (default <dataDir>/ceremony) */
  readonly ceremonyDir?: string;
}

const ORG = { type: OID.organizationName, value: 'qtsp sandbox trust service' };
const COUNTRY = { type: OID.countryName, value: 'DE' };

/**
 * Creates the material unless it exists; returns whether it created it. Existing material is completed
 * (completeCeremony): a root key among the service's files moves to the ceremony directory, and missing
 * certificates and the root CRL are issued.
 */
export function pkiInit(options: PkiInitOptions): boolean {
  const urls = pkiUrls(options.publicBaseUrl ?? DEFAULT_PUBLIC_BASE_URL);
  ensurePrivateDir(options.dataDir); // 0700 when we create it: it will hold keys and the evidence store
  if (pkiExists(options.dataDir) && !options.force) {
    completeCeremony(options, urls);
    return false;
  }
  const p = pkiPaths(options.dataDir);
  const algorithm = options.algorithm ?? 'P-256';
  const root = createRootCa(ROOT_SUBJECT, algorithm);
  const issuing = issueBy(root, PROFILES['issuing-ca'](urls));
  const client = createTlsCertificate(undefined, { commonName: options.qtspId, usage: 'client' });
  saveRoot(root, options);
  saveKeyed(issuing, p.issuingCert, p.issuingKey);
  saveKeyed(client, p.clientCert, p.clientKey);
  rmSync(custodyMarkerFile(options.dataDir), { force: true });
  issueTrustServiceCertificates(options.dataDir, urls, () => root, true);
  issueRootServices(options.dataDir, urls, root, { replace: true, responderKeyFile: true });
  return true;
}

const ROOT_SUBJECT: NameAttribute[] = [COUNTRY, ORG, { type: OID.commonName, value: 'qtsp Sandbox Root CA' }];

export interface PkiInitInCustodyOptions extends PkiInitOptions {
  /** the custodian, opened without requiring the long-lived keys */
  readonly custody: LongLivedKeyMaker & Pick<KeyCustody, 'kind' | 'location'>;
}

/**
 * The issuing CA, TSA and both OCSP responder keys generated inside the custody (for a token: sensitive, never
 * extractable token objects), their certificates written as by pkiInit; the root CA and our TLS client
 * certificate stay software (kept when they exist). Returns whether it created anything.
 */
export async function pkiInitInCustody(options: PkiInitInCustodyOptions): Promise<boolean> {
  ensurePrivateDir(options.dataDir);
  const urls = pkiUrls(options.publicBaseUrl ?? DEFAULT_PUBLIC_BASE_URL);
  if (custodyMaterialExists(options.dataDir) && !options.force) {
    completeCeremony(options, urls);
    return false;
  }
  const p = pkiPaths(options.dataDir);
  const algorithm = options.algorithm ?? 'P-256';
  migrateLegacyRoot(options);
  const keepRoot = existsSync(p.rootCert) && existsSync(rootKeyFile(options)) && !options.force;
  const root = keepRoot ? loadCeremonyRoot(options) : createRootCa(ROOT_SUBJECT, algorithm);
  const issued = await issueInCustody(options, root, algorithm);
  if (!keepRoot) saveRoot(root, options);
  issueRootServices(options.dataDir, urls, root, { replace: !keepRoot, responderKeyFile: false });
  if (!existsSync(p.clientCert) || !existsSync(p.clientKey) || options.force)
    saveKeyed(
      createTlsCertificate(undefined, { commonName: options.qtspId, usage: 'client' }),
      p.clientCert,
      p.clientKey,
    );
  for (const [cert, der, keyFile] of [
    [p.issuingCert, issued.issuing.der, p.issuingKey],
    [p.tsaCert, issued.tsa.der, p.tsaKey],
    [p.ocspCert, issued.responder.der, p.ocspKey],
    [p.rootOcspCert, issued.rootResponder.der, p.rootOcspKey],
  ] as const) {
    writeFileSync(cert, toPem(der, 'CERTIFICATE'));
    rmSync(keyFile, { force: true }); // a software key of before must not linger beside the custody's
  }
  writeFileSync(custodyMarkerFile(options.dataDir), custodyMarker(options.custody));
  return true;
}

/** The material is complete with its long-lived keys in a custody: nothing for `qtsp pki init` to do. */
function custodyMaterialExists(dataDir: string): boolean {
  return pkiExists(dataDir) && keysInCustody(dataDir) && trustServicesExist(dataDir);
}

/** A long-lived key made in the custody and certified by `ca`. */
async function makeInCustody(
  options: PkiInitInCustodyOptions,
  name: LongLivedKeyName,
  ca: KeyedCertificate,
  algorithm: KeyAlgorithm,
): Promise<KeyedCertificate> {
  const urls = pkiUrls(options.publicBaseUrl ?? DEFAULT_PUBLIC_BASE_URL);
  const key = await options.custody.generateLongLivedKey(name, algorithm);
  const { der, certificate } = await issueCertificateAsync(requestFor(ca, PROFILES[name](urls), key.publicKey));
  return certifiedKey(der, key, certificate);
}

/** The long-lived keys made in the custody, each certified by its CA. */
async function issueInCustody(
  options: PkiInitInCustodyOptions,
  root: KeyedCertificate,
  algorithm: KeyAlgorithm,
): Promise<Record<'issuing' | 'tsa' | 'responder' | 'rootResponder', KeyedCertificate>> {
  const issuing = await makeInCustody(options, 'issuing-ca', root, algorithm);
  const tsa = await makeInCustody(options, 'tsa', root, algorithm);
  const responder = await makeInCustody(options, 'ocsp-responder', issuing, algorithm);
  const rootResponder = await makeInCustody(options, 'root-ocsp-responder', root, algorithm);
  return { issuing, tsa, responder, rootResponder };
}

/**
 * A data directory whose custody holds every long-lived key but the root's OCSP responder's (made before it
 * did): the key made in the custody, certified by the root (from the ceremony directory), the key file deleted.
 * The marker is rewritten last, so that an interrupted run leaves a directory the start refuses and this
 * completes.
 */
async function moveRootResponderIntoCustody(options: PkiInitInCustodyOptions): Promise<void> {
  const p = pkiPaths(options.dataDir);
  migrateLegacyRoot(options);
  const root = loadCeremonyRoot(options);
  const responder = await makeInCustody(options, 'root-ocsp-responder', root, root.key.algorithm);
  writeFileSync(p.rootOcspCert, toPem(responder.der, 'CERTIFICATE'));
  rmSync(p.rootOcspKey, { force: true });
  writeFileSync(custodyMarkerFile(options.dataDir), custodyMarker(options.custody));
}

export interface KeyCeremonyOptions {
  readonly algorithm?: KeyAlgorithm;
  /** where the root key is kept (default <dataDir>/ceremony) */
  readonly ceremonyDir?: string;
  /** replace existing material (never done implicitly) */
  readonly force?: boolean;
  /** the keys must go into a custody (`qtsp pki init --pkcs11`): refuse a backend that keeps key files */
  readonly inCustody?: boolean;
  readonly logger?: Logger;
}

/**
 * `qtsp pki init` for a configuration: the long-lived keys where keys.provider keeps them, as key files
 * (pkiInit) or made in the custody (pkiInitInCustody). Returns whether it created anything.
 */
export async function keyCeremony(config: Config, options: KeyCeremonyOptions = {}): Promise<boolean> {
  const { logger, inCustody, ...chosen } = options;
  const init: PkiInitOptions = {
    dataDir: config.dataDir,
    qtspId: config.qtspId,
    publicBaseUrl: publicBaseUrl(config),
    ...chosen,
  };
  const backend = await loadCustodyBackend(config.keys.provider);
  const openForInit = backend.openForInit;
  if (!openForInit) {
    if (inCustody)
      throw new ConfigError(
        `setting keys.provider: ${config.keys.provider} keeps the CA keys as files; \`qtsp pki init --pkcs11\` ` +
          'makes them in the key custody keys.provider names (e.g. pkcs11 with keys.pkcs11Module, ' +
          'keys.tokenLabel, keys.pinFile)',
      );
    return pkiInit(init);
  }
  const context = { material: longLivedMaterial(config.dataDir), ...(logger ? { logger } : {}) };
  const inOpenedCustody = async <T>(work: (options: PkiInitInCustodyOptions) => Promise<T>): Promise<T> => {
    const custody = await openForInit(config, context);
    try {
      return await work({ ...init, custody });
    } finally {
      await custody.close();
    }
  };
  if (custodyMaterialExists(config.dataDir) && !options.force) {
    const move =
      !custodyHolds(config.dataDir, 'root-ocsp-responder') || !existsSync(pkiPaths(config.dataDir).rootOcspCert);
    if (move) await inOpenedCustody(moveRootResponderIntoCustody);
    completeCeremony(init, pkiUrls(init.publicBaseUrl ?? DEFAULT_PUBLIC_BASE_URL));
    return move;
  }
  return inOpenedCustody(pkiInitInCustody);
}

const YEAR_MS = 365 * 24 * 3600 * 1000;

/** What each long-lived certificate is: subject, lifetime (years), extensions. */
interface Profile {
  readonly commonName: string;
  readonly years: number;
  readonly extensions: CertificateRequest['extensions'];
}

/** A delegated OCSP responder (RFC 6960 4.2.2.2): id-kp-OCSPSigning, and id-pkix-ocsp-nocheck (4.2.2.2.1). */
function ocspResponderProfile(commonName: string): Profile {
  return {
    commonName,
    years: 2,
    extensions: [
      basicConstraintsExtension(false),
      keyUsageExtension(['digitalSignature']),
      extKeyUsageExtension([PKIX_OID.ocspSigning]),
      ocspNoCheckExtension(),
    ],
  };
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
  'ocsp-responder': () => ocspResponderProfile('qtsp Sandbox OCSP Responder'),
  // the root's, issued by the root at the ceremony: status of the issuing CA and the TSA while the root is offline
  'root-ocsp-responder': () => ocspResponderProfile('qtsp Sandbox Root OCSP Responder'),
} satisfies Record<LongLivedKeyName, (urls: PkiUrls) => Profile>;

/** What else the root certifies at the ceremony for the running service (its OCSP responder is in PROFILES). */
const ROOT_ISSUED = {
  // the CA of our S/MIME mail certificate (RFC 8550): online, since the root is not
  mailCa: (urls: PkiUrls): Profile => ({
    commonName: 'qtsp Sandbox Notification Mail CA',
    years: 10,
    extensions: [
      basicConstraintsExtension(true, 0),
      keyUsageExtension(['keyCertSign', 'cRLSign']),
      ...rootCaPointers(urls),
    ],
  }),
};

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
 * The root is loaded (rootOf) only when the TSA certificate must be issued.
 */
function issueTrustServiceCertificates(
  dataDir: string,
  urls: PkiUrls,
  rootOf: () => SoftwareKeyedCertificate,
  replace: boolean,
): void {
  const p = pkiPaths(dataDir);
  if (keysInCustody(dataDir)) return; // the key ceremony made them in the custody
  const missing = (cert: string, key: string) => replace || !existsSync(cert) || !existsSync(key);
  if (missing(p.tsaCert, p.tsaKey)) saveKeyed(issueBy(rootOf(), PROFILES.tsa(urls)), p.tsaCert, p.tsaKey);
  if (missing(p.ocspCert, p.ocspKey)) {
    const issuing = loadKeyed(p.issuingCert, p.issuingKey);
    saveKeyed(issueBy(issuing, PROFILES['ocsp-responder']()), p.ocspCert, p.ocspKey);
  }
}

/** The TSA and OCSP responder certificates, created when missing (with the root key of the ceremony directory). */
export function ensureTrustServiceCertificates(dataDir: string, urls: PkiUrls, ceremonyDir?: string): void {
  const options = { dataDir, ...(ceremonyDir ? { ceremonyDir } : {}) };
  issueTrustServiceCertificates(dataDir, urls, () => loadCeremonyRoot(options), false);
}

/** How long the root CRL signed at a ceremony is valid: until the next ceremony, at the latest a year on. */
export const ROOT_CRL_VALIDITY_SECONDS = 365 * 24 * 3600;

/**
 * What the root signs for the running service, each when missing or `replace` is set: its delegated OCSP
 * responder with a key file unless `responderKeyFile` is false (a custody holds that key: pkiInitInCustody
 * makes it), the mail CA (our S/MIME certificate comes from it, online) and its CRL (RFC 5280 5, nextUpdate a
 * year on).
 */
function issueRootServices(
  dataDir: string,
  urls: PkiUrls,
  root: SoftwareKeyedCertificate,
  { replace, responderKeyFile }: { replace: boolean; responderKeyFile: boolean },
): void {
  const p = pkiPaths(dataDir);
  const missing = (...files: string[]) => replace || files.some((f) => !existsSync(f));
  if (responderKeyFile && missing(p.rootOcspCert, p.rootOcspKey))
    saveKeyed(issueBy(root, PROFILES['root-ocsp-responder']()), p.rootOcspCert, p.rootOcspKey);
  if (missing(p.mailCaCert, p.mailCaKey)) saveKeyed(issueBy(root, ROOT_ISSUED.mailCa(urls)), p.mailCaCert, p.mailCaKey);
  if (missing(p.rootCrl)) writeRootCrl(dataDir, signRootCrl(root));
}

/** An empty root CRL signed now by the root (the ceremony's; `qtsp pki ceremony --renew-crl` lists revocations). */
function signRootCrl(root: SoftwareKeyedCertificate): Buffer {
  const content = {
    ca: root,
    entries: [],
    revokedCount: 0,
    now: new Date(),
    validitySeconds: ROOT_CRL_VALIDITY_SECONDS,
  };
  const { tbs, alg } = crlToBeSigned(content);
  return certificateList(tbs, alg, signWith(root.privateKey, alg.hash, tbs));
}

/** Writes the root CRL the running service serves (DER); instances read it when they start. */
export function writeRootCrl(dataDir: string, der: Buffer): void {
  writeFileSync(pkiPaths(dataDir).rootCrl, der);
}

/** Existing material completed: the root key moved out of the service's files, missing pieces issued. */
function completeCeremony(options: PkiInitOptions, urls: PkiUrls): void {
  migrateLegacyRoot(options);
  const rootOf = () => loadCeremonyRoot(options);
  issueTrustServiceCertificates(options.dataDir, urls, rootOf, false);
  if (!rootCeremonyMaterialExists(options.dataDir))
    issueRootServices(options.dataDir, urls, rootOf(), {
      replace: false,
      responderKeyFile: !custodyHolds(options.dataDir, 'root-ocsp-responder'),
    });
}

const rootKeyFile = (options: Pick<PkiInitOptions, 'dataDir' | 'ceremonyDir'>) =>
  ceremonyRootKeyFile(options.dataDir, options.ceremonyDir);

/** The root certificate with its key from the ceremony directory: at a key ceremony only. */
export function loadCeremonyRoot(options: Pick<PkiInitOptions, 'dataDir' | 'ceremonyDir'>): SoftwareKeyedCertificate {
  const keyFile = rootKeyFile(options);
  if (!existsSync(keyFile))
    throw new ConfigError(
      `the root CA key is not in ${keyFile}: run the key ceremony with the ceremony directory that holds it ` +
        '(`qtsp pki ceremony --ceremony-dir DIR`)',
    );
  return loadKeyed(pkiPaths(options.dataDir).rootCert, keyFile);
}

/** The root certificate in the service's files, its key in the ceremony directory only. */
function saveRoot(root: SoftwareKeyedCertificate, options: Pick<PkiInitOptions, 'dataDir' | 'ceremonyDir'>): void {
  saveKeyed(root, pkiPaths(options.dataDir).rootCert, rootKeyFile(options));
  rmSync(legacyRootKeyFile(options.dataDir), { force: true });
}

/** A root key left among the service's files (made before the root went offline) moves to the ceremony directory. */
function migrateLegacyRoot(options: Pick<PkiInitOptions, 'dataDir' | 'ceremonyDir'>): void {
  const legacy = legacyRootKeyFile(options.dataDir);
  if (!existsSync(legacy)) return;
  const target = rootKeyFile(options);
  const key = readFileSync(legacy);
  if (existsSync(target) && !readFileSync(target).equals(key))
    throw new ConfigError(`${legacy} and ${target} hold different root keys; keep the one root-ca.pem certifies`);
  ensurePrivateDir(dirname(target));
  writePrivateFile(target, key);
  rmSync(legacy);
}

/** What a ceremony renews with a fresh key (ca/renewal.ts): the TSA, and both delegated OCSP responders. */
export type CeremonyReissued = 'tsa' | 'root-ocsp-responder' | 'ocsp-responder';

/**
 * A fresh key and certificate for `name` under today's profile: the TSA and the root's responder from the
 * root, the issuing CA's responder from the issuing CA's key file. Nothing is written here.
 */
export function reissue(
  name: CeremonyReissued,
  dataDir: string,
  urls: PkiUrls,
  root: SoftwareKeyedCertificate,
): SoftwareKeyedCertificate {
  if (name === 'tsa') return issueBy(root, PROFILES.tsa(urls));
  if (name === 'root-ocsp-responder') return issueBy(root, PROFILES['root-ocsp-responder']());
  const p = pkiPaths(dataDir);
  return issueBy(loadKeyed(p.issuingCert, p.issuingKey), PROFILES['ocsp-responder']());
}

/**
 * A certificate for a fresh key a custody made for `name` (renewal at a ceremony, ca/renewal.ts), under today's
 * profile: the TSA and the root's responder by the root, the issuing CA's responder by the issuing CA.
 */
export async function certifyRenewedKey(
  name: CeremonyReissued,
  ca: KeyedCertificate,
  publicKey: KeyObject,
  urls: PkiUrls,
): Promise<Buffer> {
  return (await issueCertificateAsync(requestFor(ca, PROFILES[name](urls), publicKey))).der;
}

/**
 * A new certificate for the existing key of the issuing CA's delegated OCSP responder, by the issuing CA, under
 * today's profile with the given validity and serial (renewal by the service: ca/responder-renewal.ts).
 */
export function recertifyOcspResponder(
  issuing: KeyedCertificate,
  publicKey: KeyObject,
  validity: { readonly notBefore: Date; readonly notAfter: Date },
  serial: Buffer,
): Promise<{ der: Buffer }> {
  return issueCertificateAsync({
    ...requestFor(issuing, PROFILES['ocsp-responder'](), publicKey),
    ...validity,
    serial,
  });
}

/**
 * An issuing CA rollover (ca/rollover.ts): the root certifies the next issuing CA's key under today's profile,
 * with the common name given (each generation its own, so that people and validators tell them apart).
 */
export function certifyNextIssuingCa(
  root: KeyedCertificate,
  publicKey: KeyObject,
  urls: PkiUrls,
  commonName: string,
): Promise<{ der: Buffer }> {
  return issueCertificateAsync(requestFor(root, { ...PROFILES['issuing-ca'](urls), commonName }, publicKey));
}

/** The delegated OCSP responder certificate (today's profile) of an issuing CA for `publicKey`. */
export function certifyOcspResponder(issuing: KeyedCertificate, publicKey: KeyObject): Promise<{ der: Buffer }> {
  return issueCertificateAsync(requestFor(issuing, PROFILES['ocsp-responder'](), publicKey));
}

/** The common name of the issuing CA `qtsp pki init` makes; a rollover's next CA adds its generation to it. */
export const ISSUING_CA_NAME = PROFILES['issuing-ca'](pkiUrls(DEFAULT_PUBLIC_BASE_URL)).commonName;
