/**
 * Issuing CA rollover at a key ceremony (`qtsp pki ceremony --rollover-issuing-ca`): a new issuing CA key
 * (a key file, or made in the token) certified by the root, and its delegated OCSP responder (RFC 6960
 * 4.2.2.2: certified by the CA whose certificates it answers for). The current CA retires beside it
 * (issuing-generations.ts) with its responder, and keeps answering OCSP and signing CRLs for the certificates it
 * issued; the new one takes the current files (and token labels) and issues every signer certificate from the
 * reload on. Running instances reload on the renewal marker (renewal.ts), no restart.
 *
 * Its key is destroyed later (`--destroy-issuing-ca TAG`, destroyRetiredKey), when nothing needs it: every
 * certificate it issued has expired, so no status of them can change any more. Before the key goes, the CA
 * signs its last CRL (nextUpdate its own notAfter) and certifies its responder's key until its own notAfter:
 * status stays available for as long as the CA certificate is valid, with no CA key left (docs/operations.md,
 * "The calendar").
 */
import { createPrivateKey, randomBytes, X509Certificate, type KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { generateKeyPair } from '../crypto/keys.ts';
import { SoftwareSigningKey } from '../crypto/signature.ts';
import type { KeyGenerations, LongLivedSigningKey } from '../custody/types.ts';
import type { IssuedCertificate, Store } from '../store/types.ts';
import { toPem } from '../util/base64.ts';
import { writePrivateFile } from '../util/private-files.ts';
import {
  certifiedKey,
  loadKeyed as loadKeyedFile,
  type KeyedCertificate,
  type SoftwareKeyedCertificate,
} from './authority.ts';
import { caKeyId } from './certificate-list.ts';
import { certifyNextIssuingCa, certifyOcspResponder, ISSUING_CA_NAME, recertifyOcspResponder } from './init.ts';
import {
  currentPublication,
  generationTag,
  retiredFiles,
  retiredGenerations,
  writeCurrentPublication,
  writeGenerationRecord,
  type GenerationRecord,
} from './issuing-generations.ts';
import { keysInCustody, loadCertificate, pkiPaths } from './material.ts';
import type { PkiUrls } from './publication.ts';
import { keyIdentifier } from './x509.ts';
import { certifies, markRenewed } from './renewal.ts';

export interface RolloverOptions {
  readonly dataDir: string;
  readonly urls: PkiUrls;
  /** the root with its key, from the ceremony directory */
  readonly root: SoftwareKeyedCertificate;
  /** the custody's key generations when the long-lived keys are in a token; undefined with key files */
  readonly generations: KeyGenerations | undefined;
  readonly now?: Date;
}

export interface RolloverOutcome {
  readonly retired: GenerationRecord;
  /** the new current CA and its responder, DER */
  readonly issuingDer: Buffer;
  readonly responderDer: Buffer;
  readonly tag: string;
}

/** A refusal of a rollover step, said to the operator as it is. */
export class RolloverRefused extends Error {
  override name = 'RolloverRefused';
}

type Role = 'issuing-ca' | 'ocsp-responder';

/** A fresh key in the current place: a software key pair, or one made in the token under the role's label. */
async function newKey(
  generations: KeyGenerations | undefined,
  name: Role,
  algorithm: SoftwareKeyedCertificate['key']['algorithm'],
): Promise<{ key: LongLivedSigningKey; privateKey?: KeyObject }> {
  if (generations) return { key: await generations.generateTaggedKey(name, undefined, algorithm) };
  const pair = generateKeyPair(algorithm);
  const key = Object.assign(new SoftwareSigningKey(pair.privateKey, algorithm), { publicKey: pair.publicKey });
  return { key, privateKey: pair.privateKey };
}

/** Writes a file beside its place, then renames it over the old one (instances never read half a file). */
function replace(file: string, content: string, privateFile = false): void {
  const beside = `${file}.rollover`;
  if (privateFile) writePrivateFile(beside, content);
  else writeFileSync(beside, content);
  renameSync(beside, file);
}

const pem = (key: KeyObject) => key.export({ type: 'pkcs8', format: 'pem' }) as string;

/**
 * Keeps the key `certDer` certifies under the retired generation `tag`: the token's key retagged, or a copy of
 * the key file. A rerun after an interruption finds it kept already; a key that is not the certified one is
 * refused, never kept or overwritten.
 */
async function keepRetired(
  generations: KeyGenerations | undefined,
  role: Role,
  certDer: Buffer,
  files: { current: string; retired: string },
  tag: string,
): Promise<void> {
  const refuse = (where: string) =>
    new RolloverRefused(`${where} is not the ${role} key its certificate certifies; the rollover stops`);
  if (generations) {
    const kept = await generations.taggedKey(role, tag).catch(() => undefined);
    if (kept) {
      if (!certifies(certDer, kept.publicKey)) throw refuse(`the token's ${role} key tagged ${tag}`);
      return;
    }
    if (!certifies(certDer, (await generations.taggedKey(role, undefined)).publicKey))
      throw refuse(`the token's current ${role} key`);
    await generations.retagKey(role, undefined, tag);
    return;
  }
  if (existsSync(files.retired)) {
    if (!certifies(certDer, createPrivateKey(readFileSync(files.retired, 'utf8')))) throw refuse(files.retired);
    return;
  }
  const key = readFileSync(files.current, 'utf8');
  if (!certifies(certDer, createPrivateKey(key))) throw refuse(files.current);
  writePrivateFile(files.retired, key);
}

/**
 * The rollover: the current CA and responder are kept as the retired generation first (resumable: a rerun
 * after an interruption finds them kept), then new keys take the current place and are certified, the new
 * certificates replace the current ones, and the marker is written last.
 */
export async function rolloverIssuingCa(options: RolloverOptions): Promise<RolloverOutcome> {
  const { dataDir, generations } = options;
  if (keysInCustody(dataDir) !== (generations !== undefined))
    throw new RolloverRefused('the key custody of the configuration is not where this data directory keeps its keys');
  const p = pkiPaths(dataDir);
  const current = loadCertificate(p.issuingCert);
  const currentResponder = loadCertificate(p.ocspCert);
  const oldTag = generationTag(current.der);
  const files = retiredFiles(dataDir, oldTag);
  const interrupted = retiredGenerations(dataDir).find((r) => r.tag === oldTag);
  const retired: GenerationRecord = interrupted ?? {
    tag: oldTag,
    keyId: caKeyId(current.der).toString('hex'),
    publishedAs: currentPublication(dataDir),
    retiredAt: (options.now ?? new Date()).toISOString(),
  };
  mkdirSync(files.dir, { recursive: true, mode: 0o700 });
  writeFileSync(files.cert, toPem(current.der, 'CERTIFICATE'));
  writeFileSync(files.responderCert, toPem(currentResponder.der, 'CERTIFICATE'));
  await keepRetired(generations, 'issuing-ca', current.der, { current: p.issuingKey, retired: files.key }, oldTag);
  await keepRetired(
    generations,
    'ocsp-responder',
    currentResponder.der,
    { current: p.ocspKey, retired: files.responderKey },
    oldTag,
  );
  writeGenerationRecord(dataDir, retired);

  const algorithm = options.root.key.algorithm;
  const ca = await newKey(generations, 'issuing-ca', algorithm);
  const tag = generationTag(caKeyIdOfKey(ca.key.publicKey));
  const name = `${ISSUING_CA_NAME} ${tag.slice(0, 8)}`;
  const issuingDer = (await certifyNextIssuingCa(options.root, ca.key.publicKey, options.urls, name)).der;
  const responder = await newKey(generations, 'ocsp-responder', algorithm);
  const responderDer = (await certifyOcspResponder(certifiedKey(issuingDer, ca.key), responder.key.publicKey)).der;
  if (!generations) {
    replace(p.issuingKey, pem(ca.privateKey!), true);
    replace(p.ocspKey, pem(responder.privateKey!), true);
  }
  replace(p.issuingCert, toPem(issuingDer, 'CERTIFICATE'));
  replace(p.ocspCert, toPem(responderDer, 'CERTIFICATE'));
  writeCurrentPublication(dataDir, tag);
  markRenewed(dataDir, ['issuing-ca', 'ocsp-responder']);
  return { retired, issuingDer, responderDer, tag };
}

/** SHA-1 of a public key's bits (RFC 5280 4.2.1.2 method 1), as caKeyId computes it from a certificate. */
function caKeyIdOfKey(publicKey: KeyObject): string {
  return keyIdentifier(publicKey.export({ type: 'spki', format: 'der' })).toString('hex');
}

export interface DestroyOptions {
  readonly dataDir: string;
  readonly tag: string;
  readonly store: Pick<Store, 'signingsBetween' | 'getCertificate' | 'addCertificate'>;
  readonly generations: KeyGenerations | undefined;
  /** signer.validitySeconds: how long a certificate the CA issued may outlive the rollover */
  readonly signerValiditySeconds: number;
  /** the CA's last CRL: every revocation of its certificates, valid for `validitySeconds` (revocation/crl.ts) */
  readonly signLastCrl: (ca: KeyedCertificate, validitySeconds: number, now: Date) => Promise<Buffer>;
  /** only say whether it would be destroyed */
  readonly dryRun?: boolean;
  readonly now?: Date;
}

export interface DestroyOutcome {
  readonly record: GenerationRecord;
  /** the responder certificate and last CRL signed before the key went, DER */
  readonly responderDer?: Buffer;
  readonly finalCrl?: Buffer;
}

const PAGE = 500;

/**
 * The latest notAfter among certificates `keyId` issued to signers that are still valid at `now`: every one of
 * them was issued within signer.validitySeconds before `now`, so the signings of that window are looked at.
 */
async function lastValidCertificate(
  store: DestroyOptions['store'],
  keyId: string,
  now: Date,
  validitySeconds: number,
): Promise<Date | undefined> {
  let latest: Date | undefined;
  const from = new Date(now.getTime() - validitySeconds * 1000 - 3600_000);
  let after: Parameters<DestroyOptions['store']['signingsBetween']>[3];
  for (;;) {
    const page = await store.signingsBetween(from, new Date(now.getTime() + 3600_000), PAGE, after);
    for (const signing of page) {
      const cert = await store.getCertificate(signing.certificateSerialHex);
      if (cert?.issuerKeyId === keyId && cert.notAfter > now && (!latest || cert.notAfter > latest))
        latest = cert.notAfter;
    }
    if (page.length < PAGE) return latest;
    const last = page[page.length - 1]!;
    after = { createdAt: last.createdAt, certificateSerialHex: last.certificateSerialHex };
  }
}

/** Why the retired CA's key is still needed at `now`, or undefined when it is not. */
async function stillNeeded(options: DestroyOptions, record: GenerationRecord, now: Date): Promise<string | undefined> {
  // an instance picks the rollover up within seconds; a certificate it issued just before lives this long
  const settled = new Date(Date.parse(record.retiredAt) + options.signerValiditySeconds * 1000);
  if (now < settled) return `certificates it issued until the rollover may be valid until ${settled.toISOString()}`;
  const last = await lastValidCertificate(options.store, record.keyId, now, options.signerValiditySeconds);
  if (last) return `a certificate it issued is valid until ${last.toISOString()}`;
  return undefined;
}

/**
 * Destroys a retired issuing CA's key once nothing needs it (refused with the reason otherwise): its last CRL
 * (every revocation of its certificates; nextUpdate its own notAfter) and a certificate for its responder's key
 * until its own notAfter are signed first, then the key file is deleted or the token's key destroyed, and the
 * instances reload: OCSP and the CRL for its certificates go on, without the key.
 */
export async function destroyRetiredKey(options: DestroyOptions): Promise<DestroyOutcome> {
  const { dataDir, generations } = options;
  const now = options.now ?? new Date();
  const record = retiredGenerations(dataDir).find((r) => r.tag === options.tag);
  if (!record) throw new RolloverRefused(`no retired issuing CA ${options.tag} in ${pkiPaths(dataDir).dir}`);
  if (record.destroyedAt)
    throw new RolloverRefused(`the key of issuing CA ${record.tag} was destroyed at ${record.destroyedAt}`);
  const why = await stillNeeded(options, record, now);
  if (why) throw new RolloverRefused(`the key of issuing CA ${record.tag} is still needed: ${why}`);
  if (options.dryRun) return { record };
  const files = retiredFiles(dataDir, record.tag);
  const ca = await retiredCa(dataDir, generations, record);
  const caEnd = new Date(new X509Certificate(ca.der).validTo);
  const responderDer = await lastResponderCertificate(ca, files.responderCert, now, caEnd, options.store);
  // thisUpdate is whole seconds (RFC 5280 5.1.2.4): nextUpdate lands on the CA's notAfter exactly
  const validitySeconds = Math.max(1, Math.floor((caEnd.getTime() - Math.floor(now.getTime() / 1000) * 1000) / 1000));
  const finalCrl = await options.signLastCrl(ca, validitySeconds, now);
  writeFileSync(files.finalCrl, finalCrl);
  replace(files.responderCert, toPem(responderDer, 'CERTIFICATE'));
  const destroyed = { ...record, destroyedAt: now.toISOString() };
  writeGenerationRecord(dataDir, destroyed);
  if (generations) await generations.destroyTaggedKey('issuing-ca', record.tag);
  else rmSync(files.key);
  markRenewed(dataDir, [`issuing-ca-${record.tag}`]);
  return { record: destroyed, responderDer, finalCrl };
}

/** The retired CA with its key: its key file, or its tagged key in the token. */
async function retiredCa(
  dataDir: string,
  generations: KeyGenerations | undefined,
  record: GenerationRecord,
): Promise<KeyedCertificate> {
  const files = retiredFiles(dataDir, record.tag);
  if (!generations) return loadKeyedFile(files.cert, files.key);
  return certifiedKey(loadCertificate(files.cert).der, await generations.taggedKey('issuing-ca', record.tag));
}

/** The responder's key certified by the retired CA until the CA's own end, recorded in the store. */
async function lastResponderCertificate(
  ca: KeyedCertificate,
  responderCertFile: string,
  now: Date,
  until: Date,
  store: DestroyOptions['store'],
): Promise<Buffer> {
  const current = new X509Certificate(loadCertificate(responderCertFile).der);
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x40;
  const validity = { notBefore: new Date(now.getTime() - 3600_000), notAfter: until };
  const { der } = await recertifyOcspResponder(ca, current.publicKey, validity, serial);
  const record: IssuedCertificate = {
    serialHex: serial.toString('hex'),
    issuerKeyId: caKeyId(ca.der).toString('hex'),
    subject: current.subject.split('\n').join(', '),
    notBefore: validity.notBefore,
    notAfter: until,
    issuedAt: now,
    txn: null,
    der,
  };
  await store.addCertificate(record);
  return der;
}
