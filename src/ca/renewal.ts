/**
 * Renewal at a key ceremony (`qtsp pki ceremony --renew`): the plan of what the calendar (calendar.ts) says is
 * due within N days among what a ceremony renews (the root CRL; with key files also the TSA with a fresh TSU
 * key and both delegated OCSP responders), and the writing of the renewed files so that running instances pick
 * them up without a restart: each file replaced whole (written beside it, then renamed over it), then the
 * marker file last, which the instances watch (service.ts) and reload the material on.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { toPem } from '../util/base64.ts';
import { saveKeyed, type SoftwareKeyedCertificate } from './authority.ts';
import { deadlineOf, type CalendarEntry } from './calendar.ts';
import type { CeremonyReissued } from './init.ts';
import { pkiPaths } from './material.ts';

const DAY_MS = 24 * 3600 * 1000;

export interface PlannedRenewal {
  readonly object: string;
  readonly title: string;
  /** when it ends (or its key's usage period does) */
  readonly due: Date;
  readonly what: string;
  /** why a due object is not renewed by this ceremony */
  readonly skipped?: string;
}

const RENEWED_AT_CEREMONY = new Set(['root-crl', 'tsa', 'root-ocsp-responder', 'ocsp-responder']);

/**
 * What is due within `withinDays` of `now`. With the long-lived keys in a key custody only the root CRL is
 * renewed here: a fresh TSU or responder key is made in the custody, not as a file.
 */
export function renewalPlan(
  entries: readonly CalendarEntry[],
  withinDays: number,
  now: Date,
  keysInCustody: boolean,
): PlannedRenewal[] {
  return entries
    .filter((e) => RENEWED_AT_CEREMONY.has(e.object))
    .map((e) => ({ entry: e, ...deadlineOf(e) }))
    .filter(({ at }) => at.getTime() - now.getTime() <= withinDays * DAY_MS)
    .map(({ entry, at, what }) => ({
      object: entry.object,
      title: entry.title,
      due: at,
      what,
      ...(keysInCustody && entry.object !== 'root-crl'
        ? { skipped: 'its key is kept in the key custody; --renew makes keys as files only' }
        : {}),
    }));
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
