/**
 * The QTSP's long-lived material in <dataDir>/pki, as the key ceremony (init.ts) leaves it:
 *   root-ca.pem                   root CA certificate (publish it: relying parties verify our signatures
 *                                 against it); its key is not here (see below)
 *   root-ca.crl                   the root's CRL, signed at the ceremony with a long validity (DER)
 *   root-ocsp-responder.pem / .key.pem  delegated OCSP responder of the root (RFC 6960 4.2.2.2), for the
 *                                 issuing CA and the TSA
 *   issuing-ca.pem / .key.pem     issuing CA of the per-request signer certificates
 *   mail-ca.pem / .key.pem        CA of our S/MIME mail certificate (notification/mail-certificate.ts)
 *   qtsp-client.pem / .key.pem    our self-signed TLS client certificate towards the AS (spec 5.8)
 *   tsa.pem / .key.pem            time-stamping unit, issued by the root (RFC 3161 2.3: EKU timeStamping only)
 *   ocsp-responder.pem / .key.pem delegated OCSP responder of the issuing CA (RFC 6960 4.2.2.2)
 *   keys-in-token.json            present when the issuing CA, TSA and both OCSP responder keys are in a key
 *                                 custody (then their .key.pem files are not); it lists them
 * The root key signs only in a key ceremony and lives in the ceremony directory (root-ca.key.pem in
 * <dataDir>/ceremony unless the ceremony names another), which nothing of the running service reads.
 * Where each file is, whether the material is complete, and loading it with the keys that sign for it.
 */
import { existsSync, readFileSync } from 'node:fs';
import * as pkijs from 'pkijs';
import { X509Certificate, type KeyObject } from 'node:crypto';
import { join } from 'node:path';
import { ConfigError } from '../config/load.ts';
import type { LongLivedMaterial } from '../custody/registry.ts';
import { describeLocation, LONG_LIVED_KEYS, type KeyCustody, type LongLivedKeyName } from '../custody/types.ts';
import { fromPem } from '../util/base64.ts';
import { certifiedKey, loadKeyed, type KeyedCertificate, type SoftwareKeyedCertificate } from './authority.ts';

export interface PkiPaths {
  readonly dir: string;
  readonly rootCert: string;
  readonly rootCrl: string;
  readonly rootOcspCert: string;
  readonly rootOcspKey: string;
  readonly mailCaCert: string;
  readonly mailCaKey: string;
  /** our S/MIME mail certificate, made by the service from the mail CA (notification/mail-certificate.ts) */
  readonly mailCert: string;
  readonly mailKey: string;
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
    rootCrl: join(dir, 'root-ca.crl'),
    rootOcspCert: join(dir, 'root-ocsp-responder.pem'),
    rootOcspKey: join(dir, 'root-ocsp-responder.key.pem'),
    mailCaCert: join(dir, 'mail-ca.pem'),
    mailCaKey: join(dir, 'mail-ca.key.pem'),
    mailCert: join(dir, 'qtsp-mail.pem'),
    mailKey: join(dir, 'qtsp-mail.key.pem'),
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

/** The ceremony directory's root key; `ceremonyDir` defaults to <dataDir>/ceremony. */
export function ceremonyRootKeyFile(dataDir: string, ceremonyDir = join(dataDir, 'ceremony')): string {
  return join(ceremonyDir, 'root-ca.key.pem');
}

/** Where data directories made before the root went offline kept the root key, beside the service's files. */
export function legacyRootKeyFile(dataDir: string): string {
  return join(pkiPaths(dataDir).dir, 'root-ca.key.pem');
}

/**
 * The pieces the root signs at the ceremony for the running service: its responder (the key as a file unless a
 * key custody holds it), CRL and the mail CA.
 */
export function rootCeremonyMaterialExists(dataDir: string): boolean {
  const p = pkiPaths(dataDir);
  const responderKey = custodyHolds(dataDir, 'root-ocsp-responder') ? [] : [p.rootOcspKey];
  return [p.rootCrl, p.rootOcspCert, ...responderKey, p.mailCaCert, p.mailCaKey].every((f) => existsSync(f));
}

/**
 * Refuses material the running service must not use: a root key among the service's files (a data directory
 * made before the root went offline) or a ceremony that did not issue the root's responder, CRL and mail CA.
 */
export function assertRootOffline(dataDir: string): void {
  const legacy = existsSync(legacyRootKeyFile(dataDir));
  if (!legacy && rootCeremonyMaterialExists(dataDir)) return;
  throw new ConfigError(
    `setting dataDir: ${
      legacy
        ? `the root CA key is in ${legacyRootKeyFile(dataDir)}, where the running service reads`
        : `the root's OCSP responder, CRL or mail CA is missing in ${pkiPaths(dataDir).dir}`
    }; run \`qtsp pki ceremony --migrate\` (it moves the root key to ${join(dataDir, 'ceremony')} and ` +
      'issues them), then keep that directory offline',
  );
}

/**
 * The marker `qtsp pki init` writes when it made the long-lived keys (all but the root) in a key custody. Its
 * name predates custodies other than a PKCS#11 token; data directories made since keep it.
 */
export function custodyMarkerFile(dataDir: string): string {
  return join(pkiPaths(dataDir).dir, 'keys-in-token.json');
}

/** Whether the long-lived keys other than the root are in a key custody rather than key files. */
export function keysInCustody(dataDir: string): boolean {
  return existsSync(custodyMarkerFile(dataDir));
}

/** What the key custody needs to know of the material: the long-lived key files, and where the keys are. */
export function longLivedMaterial(dataDir: string): LongLivedMaterial {
  const p = pkiPaths(dataDir);
  return {
    dir: p.dir,
    keyFiles: {
      'issuing-ca': p.issuingKey,
      tsa: p.tsaKey,
      'ocsp-responder': p.ocspKey,
      'root-ocsp-responder': p.rootOcspKey,
    },
    heldBy: keysInCustody(dataDir) ? custodyInMarker(dataDir) : undefined,
  };
}

/** The marker's content, as init.ts writes it; one that cannot be read is empty. */
interface CustodyMarker {
  readonly keys?: unknown;
  readonly longLivedKeys?: unknown;
}

function readMarker(dataDir: string): CustodyMarker {
  try {
    return JSON.parse(readFileSync(custodyMarkerFile(dataDir), 'utf8')) as CustodyMarker;
  } catch {
    return {};
  }
}

/** The custody the marker names; one that cannot be read names none that exists. */
function custodyInMarker(dataDir: string): string {
  const { keys } = readMarker(dataDir);
  return typeof keys === 'string' ? keys : 'unknown';
}

/**
 * The marker written when the long-lived keys were made in a key custody: which custody holds them, where in it,
 * and which keys (init.ts).
 */
export function custodyMarker(custody: Pick<KeyCustody, 'kind' | 'location'>): string {
  const marker = {
    keys: custody.kind,
    token: describeLocation(custody.location),
    longLivedKeys: LONG_LIVED_KEYS,
    createdAt: new Date().toISOString(),
  };
  return `${JSON.stringify(marker, null, 2)}\n`;
}

/**
 * Whether the key custody holds this long-lived key. Markers without a list are from before the root's
 * responder key joined the custody: they held the issuing CA, TSA and OCSP responder keys.
 */
export function custodyHolds(dataDir: string, name: LongLivedKeyName): boolean {
  if (!keysInCustody(dataDir)) return false;
  const { longLivedKeys } = readMarker(dataDir);
  const held = Array.isArray(longLivedKeys) ? longLivedKeys : ['issuing-ca', 'tsa', 'ocsp-responder'];
  return held.includes(name);
}

/**
 * Refuses a data directory whose long-lived keys are in a key custody but for the root's OCSP responder key,
 * still a key file (made before the custody held it): anyone who copies that file answers "good" for the
 * issuing CA until the responder certificate expires. The key ceremony moves it into the custody.
 */
export function assertRootResponderInCustody(dataDir: string): void {
  if (!keysInCustody(dataDir) || custodyHolds(dataDir, 'root-ocsp-responder')) return;
  const p = pkiPaths(dataDir);
  const where = existsSync(p.rootOcspKey) ? `it is the file ${p.rootOcspKey}` : 'it is missing';
  throw new ConfigError(
    `setting dataDir: the root's OCSP responder key is not in the key custody ${custodyInMarker(dataDir)} ` +
      `that holds the other CA keys of ${p.dir} (${where}); ` +
      'run `qtsp pki ceremony --migrate` with the ceremony directory that holds the root key ' +
      '(`--ceremony-dir DIR`): it makes the key in the custody, the root certifies it, and the file is deleted',
  );
}

/**
 * The root certificate, the issuing CA and our TLS client identity exist (the issuing CA key as a file, or in a
 * custody). The root key is not looked for: it is offline.
 */
export function pkiExists(dataDir: string): boolean {
  const p = pkiPaths(dataDir);
  const keyFiles = keysInCustody(dataDir) ? [] : [p.issuingKey];
  return [p.rootCert, p.issuingCert, p.clientCert, p.clientKey, ...keyFiles].every((f) => existsSync(f));
}

/** The TSA and OCSP responder certificates exist, with their key files unless their keys are in a custody. */
export function trustServicesExist(dataDir: string): boolean {
  const p = pkiPaths(dataDir);
  const keyFiles = keysInCustody(dataDir) ? [] : [p.tsaKey, p.ocspKey];
  return [p.tsaCert, p.ocspCert, ...keyFiles].every((f) => existsSync(f));
}

/** A certificate without its key: the root's, whose key is offline. */
export interface PublishedCertificate {
  readonly der: Buffer;
  readonly certificate: pkijs.Certificate;
}

/** The first certificate of a PEM file. */
export function loadCertificate(file: string): PublishedCertificate {
  const der = fromPem(readFileSync(file, 'utf8'))[0];
  if (!der) throw new Error(`no certificate in ${file}`);
  return { der, certificate: pkijs.Certificate.fromBER(new Uint8Array(der)) };
}

export interface CaMaterial {
  readonly root: PublishedCertificate;
  readonly issuing: SoftwareKeyedCertificate;
}

/** The root certificate and the issuing CA with its key file; the root key is never read here. */
export function loadCaMaterial(dataDir: string): CaMaterial {
  const p = pkiPaths(dataDir);
  return { root: loadCertificate(p.rootCert), issuing: loadKeyed(p.issuingCert, p.issuingKey) };
}

export interface TrustServiceMaterial {
  readonly tsa: SoftwareKeyedCertificate;
  readonly ocspResponder: SoftwareKeyedCertificate;
}

export function loadTrustServiceMaterial(dataDir: string): TrustServiceMaterial {
  const p = pkiPaths(dataDir);
  return { tsa: loadKeyed(p.tsaCert, p.tsaKey), ocspResponder: loadKeyed(p.ocspCert, p.ocspKey) };
}

export interface CustodyMaterial {
  readonly root: PublishedCertificate;
  /** the root's CRL from the ceremony, DER */
  readonly rootCrl: Buffer;
  /** the root's delegated OCSP responder, its key where the other long-lived keys are */
  readonly rootOcspResponder: KeyedCertificate;
  readonly issuing: KeyedCertificate;
  readonly tsa: KeyedCertificate;
  readonly ocspResponder: KeyedCertificate;
}

const spkiDer = (key: KeyObject) => key.export({ type: 'spki', format: 'der' });

/**
 * The long-lived certificates with their keys from the custodian: each certificate must certify the key the
 * custodian holds under its name (a token initialised for another data directory is refused at start).
 */
export function loadCustodyMaterial(
  dataDir: string,
  custody: Pick<KeyCustody, 'longLivedKey' | 'location'>,
): CustodyMaterial {
  assertRootOffline(dataDir);
  const p = pkiPaths(dataDir);
  const withKey = (file: string, name: LongLivedKeyName): KeyedCertificate => {
    const der = fromPem(readFileSync(file, 'utf8'))[0];
    if (!der) throw new Error(`no certificate in ${file}`);
    const key = custody.longLivedKey(name);
    if (!spkiDer(new X509Certificate(der).publicKey).equals(spkiDer(key.publicKey))) {
      throw new ConfigError(
        `setting keys.provider: the ${name} key of the key custody (${describeLocation(custody.location)}) ` +
          `is not the key certified in ${file}; run \`qtsp pki init\` for this custody`,
      );
    }
    return certifiedKey(der, key);
  };
  return {
    root: loadCertificate(p.rootCert),
    rootCrl: readFileSync(p.rootCrl),
    rootOcspResponder: withKey(p.rootOcspCert, 'root-ocsp-responder'),
    issuing: withKey(p.issuingCert, 'issuing-ca'),
    tsa: withKey(p.tsaCert, 'tsa'),
    ocspResponder: withKey(p.ocspCert, 'ocsp-responder'),
  };
}
