/**
 * Renewal at a key ceremony (`qtsp pki ceremony --renew`): the plan of what the calendar (calendar.ts) says is
 * due within N days among what a ceremony renews (the root CRL, the TSA with a fresh TSU key and both delegated
 * OCSP responders with fresh keys, as key files or made in the key custody), and the writing of the renewed
 * files so that running instances pick them up without a restart: each file replaced whole (written beside it,
 * then renamed over it), then the marker file last, which the instances watch (service.ts) and reload the
 * material on. In a token the fresh key is a key generation (custody/types.ts KeyGenerations, as in an issuing
 * CA rollover): made tagged renewing, it takes the current place as its certificate replaces the old one; the
 * key it replaces, tagged retired, is destroyed once the running instances had time to reload.
 */
import { createPublicKey, X509Certificate, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KeyGenerations } from '../custody/types.ts';
import { fromPem, toPem } from '../util/base64.ts';
import { certifiedKey, saveKeyed, type SoftwareKeyedCertificate } from './authority.ts';
import { deadlineOf, type CalendarEntry } from './calendar.ts';
import { certifyRenewedKey, type CeremonyReissued } from './init.ts';
import type { PkiUrls } from './publication.ts';
import { pkiPaths } from './material.ts';

const DAY_MS = 24 * 3600 * 1000;

export interface PlannedRenewal {
  readonly object: string;
  readonly title: string;
  /** when it ends (or its key's usage period does) */
  readonly due: Date;
  readonly what: string;
}

const RENEWED_AT_CEREMONY = new Set(['root-crl', 'tsa', 'root-ocsp-responder', 'ocsp-responder']);

/** What is due within `withinDays` of `now`. */
export function renewalPlan(entries: readonly CalendarEntry[], withinDays: number, now: Date): PlannedRenewal[] {
  return entries
    .filter((e) => RENEWED_AT_CEREMONY.has(e.object))
    .map((e) => ({ entry: e, ...deadlineOf(e) }))
    .filter(({ at }) => at.getTime() - now.getTime() <= withinDays * DAY_MS)
    .map(({ entry, at, what }) => ({ object: entry.object, title: entry.title, due: at, what }));
}

/** The files of a renewed certificate and its key. */
function filesOf(dataDir: string, name: CeremonyReissued): { cert: string; key: string } {
  const p = pkiPaths(dataDir);
  if (name === 'tsa') return { cert: p.tsaCert, key: p.tsaKey };
  if (name === 'root-ocsp-responder') return { cert: p.rootOcspCert, key: p.rootOcspKey };
  return { cert: p.ocspCert, key: p.ocspKey };
}

/** Replaces a certificate and its key file, each written beside and renamed over the old one. */
export function writeRenewed(dataDir: string, name: CeremonyReissued, renewed: SoftwareKeyedCertificate): void {
  const files = filesOf(dataDir, name);
  const beside = { cert: `${files.cert}.renewing`, key: `${files.key}.renewing` };
  saveKeyed(renewed, beside.cert, beside.key);
  renameSync(beside.key, files.key);
  renameSync(beside.cert, files.cert);
}

/** Replaces a certificate file alone (a new certificate for the same key), written beside and renamed over it. */
export function writeRenewedCertificate(dataDir: string, name: CeremonyReissued, der: Buffer): void {
  const { cert } = filesOf(dataDir, name);
  writeFileSync(`${cert}.renewing`, toPem(der, 'CERTIFICATE'));
  renameSync(`${cert}.renewing`, cert);
}

/** The tags of a renewal's keys in a custody (KeyGenerations): the fresh pair until installed, the one it replaced. */
export const RENEWING_TAG = 'renewing';
export const RETIRED_TAG = 'retired';

const spki = (key: KeyObject) => key.export({ type: 'spki', format: 'der' });
/** Whether the certificate certifies the key (a public key, or the public half of a private one). */
export const certifies = (certDer: Buffer, key: KeyObject) =>
  spki(new X509Certificate(certDer).publicKey).equals(spki(key.type === 'public' ? key : createPublicKey(key)));

export interface CustodyRenewal {
  readonly dataDir: string;
  readonly urls: PkiUrls;
  /** the root with its key, loaded when a certificate is due (a rerun that only completes needs none) */
  readonly root: () => SoftwareKeyedCertificate;
  /** the custody's key generations (the issuing CA's current key certifies its responder) */
  readonly generations: KeyGenerations;
}

const CEREMONY_REISSUED: readonly CeremonyReissued[] = ['tsa', 'ocsp-responder', 'root-ocsp-responder'];

/**
 * The fresh key tagged renewing takes the current place; the one it replaces is kept tagged retired (instances
 * not yet reloaded sign with it), where an earlier renewal's retired key, long unused, is destroyed. A rerun
 * after an interruption between the two steps finds the current place empty and does the second alone.
 */
async function install(g: KeyGenerations, name: CeremonyReissued): Promise<void> {
  if (await g.taggedKey(name, undefined).catch(() => undefined)) {
    await g.destroyTaggedKey(name, RETIRED_TAG);
    await g.retagKey(name, undefined, RETIRED_TAG);
  }
  await g.retagKey(name, RENEWING_TAG, undefined);
}

/**
 * What an interrupted renewal left is completed: a certificate written beside its file whose key is current
 * already (only its rename was left) replaces the file; one whose key is still tagged renewing is installed
 * first; one whose key is gone was never used and is removed. The names completed.
 */
async function completeInterrupted(r: CustodyRenewal): Promise<CeremonyReissued[]> {
  const completed: CeremonyReissued[] = [];
  for (const name of CEREMONY_REISSUED) {
    const { cert } = filesOf(r.dataDir, name);
    if (!existsSync(`${cert}.renewing`)) continue;
    const der = fromPem(readFileSync(`${cert}.renewing`, 'utf8'))[0]!;
    const current = await r.generations.taggedKey(name, undefined).catch(() => undefined);
    const fresh = await r.generations.taggedKey(name, RENEWING_TAG).catch(() => undefined);
    if (fresh && certifies(der, fresh.publicKey)) await install(r.generations, name);
    else if (!current || !certifies(der, current.publicKey)) {
      rmSync(`${cert}.renewing`);
      continue;
    }
    renameSync(`${cert}.renewing`, cert);
    completed.push(name);
  }
  return completed;
}

/**
 * Fresh keys made in the custody for `names` (tagged renewing, of the algorithm of the key each replaces), each
 * certified under today's profile (by the root, or by the issuing CA's key in the custody for its responder);
 * every certificate written beside its file first, then each fresh key takes the current place and its
 * certificate replaces the old one. A rerun completes an interrupted renewal first. The names renewed; the
 * replaced keys stay tagged retired until destroyRetiredKeys.
 */
export async function renewKeysInCustody(
  names: readonly CeremonyReissued[],
  r: CustodyRenewal,
): Promise<CeremonyReissued[]> {
  const g = r.generations;
  const completed = await completeInterrupted(r);
  const p = pkiPaths(r.dataDir);
  const issuing = async () =>
    certifiedKey(fromPem(readFileSync(p.issuingCert, 'utf8'))[0]!, await g.taggedKey('issuing-ca', undefined));
  const prepared = [];
  for (const name of names.filter((n) => !completed.includes(n))) {
    const ca = name === 'ocsp-responder' ? await issuing() : r.root();
    const fresh = await g.generateTaggedKey(name, RENEWING_TAG, (await g.taggedKey(name, undefined)).algorithm);
    const der = await certifyRenewedKey(name, ca, fresh.publicKey, r.urls);
    const { cert } = filesOf(r.dataDir, name);
    writeFileSync(`${cert}.renewing`, toPem(der, 'CERTIFICATE'));
    prepared.push({ name, cert });
  }
  // a start in between finds a key its certificate does not certify, and refuses: never the wrong pair
  for (const { name, cert } of prepared) {
    await install(g, name);
    renameSync(`${cert}.renewing`, cert);
  }
  return [...completed, ...prepared.map((x) => x.name)];
}

/** The names whose replaced key is still in the custody (tagged retired). */
export async function retiredKeys(g: KeyGenerations): Promise<CeremonyReissued[]> {
  const kept: CeremonyReissued[] = [];
  for (const name of CEREMONY_REISSUED)
    if (await g.taggedKey(name, RETIRED_TAG).catch(() => undefined)) kept.push(name);
  return kept;
}

/** The keys renewals replaced, destroyed (once every running instance reloaded); the names destroyed. */
export async function destroyRetiredKeys(g: KeyGenerations): Promise<CeremonyReissued[]> {
  const destroyed: CeremonyReissued[] = [];
  for (const name of CEREMONY_REISSUED) if (await g.destroyTaggedKey(name, RETIRED_TAG)) destroyed.push(name);
  return destroyed;
}

/** Replaces the root CRL (DER) whole. */
export function writeRenewedRootCrl(dataDir: string, der: Buffer): void {
  const file = pkiPaths(dataDir).rootCrl;
  writeFileSync(`${file}.renewing`, der);
  renameSync(`${file}.renewing`, file);
}

/** The file a ceremony writes last; running instances reload the material when it changes. */
export function renewalMarkerFile(dataDir: string): string {
  return join(pkiPaths(dataDir).dir, 'renewed.json');
}

export function markRenewed(dataDir: string, objects: readonly string[]): void {
  const file = renewalMarkerFile(dataDir);
  writeFileSync(`${file}.renewing`, `${JSON.stringify({ renewedAt: new Date().toISOString(), objects }, null, 2)}\n`);
  renameSync(`${file}.renewing`, file);
}
