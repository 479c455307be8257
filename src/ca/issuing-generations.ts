/**
 * The generations of the issuing CA after a rollover (ca/rollover.ts). The current CA stays where `qtsp pki
 * init` put it (issuing-ca.pem, ocsp-responder.pem and their keys: files, or the token's current labels); each
 * retired one keeps, in <dataDir>/pki/retired-issuing-ca/<tag>/:
 *   issuing-ca.pem, ocsp-responder.pem   its certificate and its delegated OCSP responder's
 *   issuing-ca.key.pem, ocsp-responder.key.pem   their keys, with key files (in a token: labels qtsp-<role>.<tag>)
 *   final.crl                           its last CRL, signed before its key was destroyed
 *   generation.json                     tag, key identifier, where it is published, when retired and destroyed
 * A generation's tag is the start of its key identifier (SHA-1 of its public key, as OCSP CertIDs name it).
 * Every generation keeps the publication paths its certificates point at (AIA caIssuers, CRL DP): the first
 * CA /ca/issuing.crt and /crl/issuing.crl, a later one /ca/issuing-<tag>.crt and /crl/issuing-<tag>.crl.
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KeyCustody, KeyGenerations } from '../custody/types.ts';
import { keyGenerationsOf } from '../custody/types.ts';
import { fromPem } from '../util/base64.ts';
import { certifiedKey, loadKeyed, type KeyedCertificate } from './authority.ts';
import { caKeyId } from './certificate-list.ts';
import { keysInCustody, pkiPaths } from './material.ts';
import type { PkiUrls } from './publication.ts';

/** What generation.json holds. */
export interface GenerationRecord {
  readonly tag: string;
  /** SHA-1 of the CA's public key, lowercase hex: the store's issuerKeyId of what it issued */
  readonly keyId: string;
  /** '' for the first CA's publication paths, else the tag in them */
  readonly publishedAs: string;
  readonly retiredAt: string;
  /** when its key was destroyed (`qtsp pki ceremony --destroy-issuing-ca`); absent while it exists */
  readonly destroyedAt?: string;
}

/** Reads a generation's first certificate. */
export function firstCertificate(file: string): Buffer {
  const der = fromPem(readFileSync(file, 'utf8'))[0];
  if (!der) throw new Error(`no certificate in ${file}`);
  return der;
}

export interface RetiredFiles {
  readonly dir: string;
  readonly cert: string;
  readonly key: string;
  readonly responderCert: string;
  readonly responderKey: string;
  readonly finalCrl: string;
  readonly record: string;
}

const TAG_LENGTH = 16;

/** The tag of the CA whose certificate (or key identifier, hex) this is. */
export function generationTag(caDerOrKeyId: Buffer | string): string {
  const keyId = typeof caDerOrKeyId === 'string' ? caDerOrKeyId : caKeyId(caDerOrKeyId).toString('hex');
  return keyId.slice(0, TAG_LENGTH);
}

export function retiredRoot(dataDir: string): string {
  return join(pkiPaths(dataDir).dir, 'retired-issuing-ca');
}

export function retiredFiles(dataDir: string, tag: string): RetiredFiles {
  if (!/^[0-9a-f]{16}$/.test(tag)) throw new TypeError(`not an issuing CA generation tag: ${tag}`);
  const dir = join(retiredRoot(dataDir), tag);
  return {
    dir,
    cert: join(dir, 'issuing-ca.pem'),
    key: join(dir, 'issuing-ca.key.pem'),
    responderCert: join(dir, 'ocsp-responder.pem'),
    responderKey: join(dir, 'ocsp-responder.key.pem'),
    finalCrl: join(dir, 'final.crl'),
    record: join(dir, 'generation.json'),
  };
}

/** The retired generations, oldest first. */
export function retiredGenerations(dataDir: string): GenerationRecord[] {
  const root = retiredRoot(dataDir);
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((tag) => /^[0-9a-f]{16}$/.test(tag) && existsSync(retiredFiles(dataDir, tag).record))
    .map((tag) => JSON.parse(readFileSync(retiredFiles(dataDir, tag).record, 'utf8')) as GenerationRecord)
    .sort((a, b) => a.retiredAt.localeCompare(b.retiredAt));
}

/** Writes generation.json whole (beside, then renamed over it). */
export function writeGenerationRecord(dataDir: string, record: GenerationRecord): void {
  const file = retiredFiles(dataDir, record.tag).record;
  writeFileSync(`${file}.writing`, `${JSON.stringify(record, null, 2)}\n`);
  renameSync(`${file}.writing`, file);
}

/** Where the current CA's publication paths are named: pki/issuing-ca.json, absent for the first CA. */
function publicationFile(dataDir: string): string {
  return join(pkiPaths(dataDir).dir, 'issuing-ca.json');
}

/** The current CA's publication tag: '' for the first CA. */
export function currentPublication(dataDir: string): string {
  const file = publicationFile(dataDir);
  if (!existsSync(file)) return '';
  const { publishedAs } = JSON.parse(readFileSync(file, 'utf8')) as { publishedAs?: unknown };
  return typeof publishedAs === 'string' ? publishedAs : '';
}

export function writeCurrentPublication(dataDir: string, publishedAs: string): void {
  const file = publicationFile(dataDir);
  writeFileSync(`${file}.writing`, `${JSON.stringify({ publishedAs }, null, 2)}\n`);
  renameSync(`${file}.writing`, file);
}

/** The paths a generation's certificates point at: the first CA's, or those with its tag. */
export function generationUrls(urls: PkiUrls, publishedAs: string): PkiUrls {
  if (!publishedAs) return urls;
  return {
    ...urls,
    issuingCert: urls.issuingCert.replace(/\.crt$/, `-${publishedAs}.crt`),
    issuingCrl: urls.issuingCrl.replace(/\.crl$/, `-${publishedAs}.crl`),
  };
}

/** A retired generation as the service serves it: OCSP under its responder, its CRL signed or final. */
export interface RetiredGeneration {
  readonly record: GenerationRecord;
  readonly caDer: Buffer;
  /** the CA with its key while it exists; undefined once destroyed */
  readonly ca: KeyedCertificate | undefined;
  readonly responder: KeyedCertificate;
  /** the last CRL, once the key is destroyed */
  readonly finalCrl: Buffer | undefined;
}

/** A key of a retired generation: its key file, or its tagged key in the custody. */
async function retiredKey(
  dataDir: string,
  generations: KeyGenerations | undefined,
  name: 'issuing-ca' | 'ocsp-responder',
  record: GenerationRecord,
): Promise<KeyedCertificate> {
  const files = retiredFiles(dataDir, record.tag);
  const [cert, key] = name === 'issuing-ca' ? [files.cert, files.key] : [files.responderCert, files.responderKey];
  if (!keysInCustody(dataDir)) return loadKeyed(cert, key);
  if (!generations) throw new Error(`the key custody keeps no generations of ${name}`);
  const der = firstCertificate(cert);
  const tokenKey = await generations.taggedKey(name, record.tag);
  const spki = (k: { export(o: object): Buffer | string }) => k.export({ type: 'spki', format: 'der' }) as Buffer;
  if (!spki(new X509Certificate(der).publicKey).equals(spki(tokenKey.publicKey)))
    throw new Error(`the ${name} key tagged ${record.tag} is not the key certified in ${cert}`);
  return certifiedKey(der, tokenKey);
}

/** Every retired generation with the keys it still has (the service loads them at start and on reload). */
export async function loadRetiredGenerations(dataDir: string, custody: object): Promise<RetiredGeneration[]> {
  const generations = keyGenerationsOf(custody as KeyCustody);
  const loaded: RetiredGeneration[] = [];
  for (const record of retiredGenerations(dataDir)) {
    const files = retiredFiles(dataDir, record.tag);
    loaded.push({
      record,
      caDer: firstCertificate(files.cert),
      ca: record.destroyedAt ? undefined : await retiredKey(dataDir, generations, 'issuing-ca', record),
      responder: await retiredKey(dataDir, generations, 'ocsp-responder', record),
      finalCrl: record.destroyedAt ? readFileSync(files.finalCrl) : undefined,
    });
  }
  return loaded;
}
