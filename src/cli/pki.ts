/**
 * `qtsp pki ceremony` (= `qtsp pki init`), `qtsp pki root`, `qtsp pki status`,
 * `qtsp pki client-cert --rotate|--retire|--register` (pki-client-cert.ts) and
 * `qtsp pki revoke SERIAL --reason R`.
 */
import { createHash, X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/load.ts';
import { pkiPaths } from '../ca/material.ts';
import {
  daysLeft,
  endedForSigning,
  expired,
  keyArchiveAnchors,
  pkiCalendar,
  renewalOf,
  type CalendarEntry,
} from '../ca/calendar.ts';
import {
  keyCeremony,
  loadCeremonyRoot,
  reissue,
  ROOT_CRL_VALIDITY_SECONDS,
  type CeremonyReissued,
} from '../ca/init.ts';
import { keysInCustody } from '../ca/material.ts';
import { pkiUrls, publicBaseUrl } from '../ca/publication.ts';
import {
  destroyRetiredKeys,
  markRenewed,
  renewalPlan,
  renewKeysInCustody,
  retiredKeys,
  writeRenewed,
  writeRenewedRootCrl,
  type PlannedRenewal,
} from '../ca/renewal.ts';
import { CrlIssuer } from '../revocation/crl.ts';
import { destroyIssuingCa, rollover, withGenerations } from './pki-rollover.ts';
import { clientCert } from './pki-client-cert.ts';
import { certificateFacts } from '../journal/ca-events.ts';
import { openStore } from '../store/open.ts';
import { REVOCATION_REASONS, type RevocationReason } from '../store/types.ts';
import type { Config } from '../config/schema.ts';
import type { CanonicalValue } from '../util/canonical-json.ts';

const USAGE =
  'usage: qtsp pki ceremony|init [--rsa] [--force] [--pkcs11] [--migrate] [--ceremony-dir DIR]\n' +
  '       qtsp pki ceremony --renew [--within DAYS] [--dry-run] [--ceremony-dir DIR]\n' +
  '       qtsp pki ceremony --renew-crl [--ceremony-dir DIR] | qtsp pki root | qtsp pki revoke SERIAL [--reason R]\n' +
  '       qtsp pki ceremony --rollover-issuing-ca [--dry-run] [--ceremony-dir DIR]\n' +
  '       qtsp pki ceremony --destroy-issuing-ca TAG [--dry-run]\n' +
  '       qtsp pki status [--json]\n' +
  '       qtsp pki client-cert --rotate|--retire [--sp-directory URL] [--data-dir DIR]\n' +
  '       qtsp pki client-cert --register [--credential-file FILE] [--sp-directory URL] [--data-dir DIR]\n';

/** A serial as `openssl x509 -serial` prints it (hex, any case, optional colons or 0x): the store's lowercase hex. */
function normaliseSerial(text: string | undefined): string | undefined {
  const hex = text?.trim().replace(/^0x/i, '').replace(/:/g, '').toLowerCase();
  if (!hex || !/^[0-9a-f]+$/.test(hex)) return undefined;
  return hex.length % 2 ? `0${hex}` : hex;
}

/**
 * Marks a certificate revoked in the store: our OCSP responder answers "revoked" at once, the CRL of its CA
 * lists it from its next issue (server.crlRefreshSeconds at the latest).
 */
async function revoke(config: Config, serialText: string | undefined, reasonText: string): Promise<number> {
  const serialHex = normaliseSerial(serialText);
  if (!serialHex) {
    process.stderr.write(`qtsp pki revoke: SERIAL must be the certificate's serial number in hex\n${USAGE}`);
    return 2;
  }
  if (!REVOCATION_REASONS.includes(reasonText as RevocationReason)) {
    process.stderr.write(`qtsp pki revoke: --reason must be one of ${REVOCATION_REASONS.join(', ')}\n`);
    return 2;
  }
  const store = await openStore(config);
  try {
    const revoked = await store.revokeCertificate(serialHex, reasonText as RevocationReason, new Date());
    if (revoked) {
      process.stdout.write(`revoked certificate ${serialHex} (${reasonText})\n`);
      return 0;
    }
    const known = await store.getCertificate(serialHex);
    process.stderr.write(
      known
        ? `certificate ${serialHex} was already revoked\n`
        : `no certificate with serial ${serialHex} in the store\n`,
    );
    return 1;
  } finally {
    await store.close();
  }
}

/**
 * What the ceremony left among the service's files: per certificate its subject, serial, validity and SHA-256
 * (of the DER), and the SHA-256 of the root CRL; the private keys are never read.
 */
function issuedMaterial(dataDir: string, custody: string): { [key: string]: CanonicalValue } {
  const p = pkiPaths(dataDir);
  const files = {
    root: p.rootCert,
    rootOcspResponder: p.rootOcspCert,
    mailCa: p.mailCaCert,
    issuingCa: p.issuingCert,
    qtspClient: p.clientCert,
    tsa: p.tsaCert,
    ocspResponder: p.ocspCert,
  };
  const certificates = Object.entries(files)
    .filter(([, file]) => existsSync(file))
    .map(([name, file]) => {
      const cert = new X509Certificate(readFileSync(file));
      return {
        name,
        subject: cert.subject,
        serialHex: cert.serialNumber.toLowerCase(),
        notBefore: new Date(cert.validFrom).toISOString(),
        notAfter: new Date(cert.validTo).toISOString(),
        sha256: createHash('sha256').update(cert.raw).digest('hex'),
      };
    });
  const crl = existsSync(p.rootCrl) ? createHash('sha256').update(readFileSync(p.rootCrl)).digest('hex') : null;
  return { keyCustody: custody, certificates, rootCrlSha256: crl };
}

/**
 * Journals a CA event (docs/evidence.md). The ceremony may run where the store is out of reach (offline): a
 * failure is a warning naming the event, to be journaled by hand, not a failed ceremony.
 */
async function journalCaEvent(config: Config, kind: string, data: { [key: string]: CanonicalValue }): Promise<void> {
  try {
    const store = await openStore(config);
    try {
      await store.journal.append({ kind, ref: null, at: new Date(), data });
    } finally {
      await store.close();
    }
  } catch (err) {
    process.stderr.write(`warning: ${kind} not journaled, the store is out of reach: ${(err as Error).message}\n`);
  }
}

/** Journals a key ceremony that created CA material (`pki.ceremony`): here, and at `qtsp dev`'s first start. */
export async function journalCeremony(config: Config): Promise<void> {
  await journalCaEvent(config, 'pki.ceremony', issuedMaterial(config.dataDir, config.keys.provider));
}

interface CeremonyFlags {
  readonly rsa: boolean;
  readonly force: boolean;
  readonly pkcs11: boolean;
  readonly 'ceremony-dir'?: string | undefined;
}

/**
 * `qtsp pki ceremony` (or `init`): the key ceremony. It creates the CA material, with the issuing CA, TSA and
 * both OCSP responder keys where keys.provider keeps them (key files, or made in the key custody: `--pkcs11`
 * insists on that), and keeps the root key in the ceremony directory only. On existing material it completes
 * it (`--migrate`, for data directories made before): a root key left among the service's files moves to the
 * ceremony directory and the root's OCSP responder, mail CA and CRL are issued; a key custody without the
 * root's OCSP responder key gets it, and its key file is deleted.
 */
async function ceremony(config: Config, options: CeremonyFlags): Promise<number> {
  const ceremonyDir = options['ceremony-dir'];
  const created = await keyCeremony(config, {
    algorithm: options.rsa ? 'RSA-3072' : 'P-256',
    force: options.force,
    inCustody: options.pkcs11,
    ...(ceremonyDir ? { ceremonyDir } : {}),
  });
  const dir = pkiPaths(config.dataDir).dir;
  if (created) await journalCeremony(config);
  process.stdout.write(
    created ? `created CA material in ${dir}\n` : `CA material exists in ${dir} (use --force to replace it)\n`,
  );
  process.stdout.write(
    `the root CA key is in ${ceremonyDir ?? join(config.dataDir, 'ceremony')}: ` +
      'keep that directory offline; the running service does not read it\n',
  );
  return 0;
}

type CeremonyRoot = ReturnType<typeof loadCeremonyRoot>;

/** The root signs a new CRL (a year's validity) listing its certificates the store has revoked (`qtsp pki revoke`). */
async function signRootCrl(config: Config, root: CeremonyRoot): Promise<Buffer> {
  const store = await openStore(config);
  try {
    const issuer = new CrlIssuer({
      ca: root,
      revoked: store,
      validitySeconds: ROOT_CRL_VALIDITY_SECONDS,
      refreshSeconds: 0,
    });
    const crl = await issuer.current();
    await store.journal.append({
      kind: 'pki.root_crl_renewed',
      ref: null,
      at: new Date(),
      data: {
        sha256: createHash('sha256').update(crl).digest('hex'),
        validitySeconds: ROOT_CRL_VALIDITY_SECONDS,
      },
    });
    return crl;
  } finally {
    await store.close();
  }
}

const PICKED_UP = 'running instances pick it up without a restart (calendar.reloadCheckSeconds)';

/** `qtsp pki ceremony --renew-crl`: a new root CRL, whatever the calendar says. */
async function renewRootCrl(config: Config, ceremonyDir: string | undefined): Promise<number> {
  const root = loadCeremonyRoot({ dataDir: config.dataDir, ...(ceremonyDir ? { ceremonyDir } : {}) });
  writeRenewedRootCrl(config.dataDir, await signRootCrl(config, root));
  markRenewed(config.dataDir, ['root-crl']);
  process.stdout.write(`signed a new root CRL in ${pkiPaths(config.dataDir).rootCrl}; ${PICKED_UP}\n`);
  return 0;
}

const planLine = (r: PlannedRenewal, now: Date) =>
  `  ${r.object}: ${r.what} ${r.due <= now ? 'ended' : 'ends'} ${r.due.toISOString()}\n`;

/**
 * The keys of `names` renewed in the token (ca/renewal.ts renewKeysInCustody, which first completes an
 * interrupted renewal); after the marker, the keys they replace are destroyed once the running instances had
 * time to switch (three reload checks). Also with nothing due: a rerun marks and destroys what an interrupted
 * one left.
 */
async function renewInCustody(
  config: Config,
  names: readonly CeremonyReissued[],
  root: () => CeremonyRoot,
  mark: (renewed: readonly string[]) => Promise<void>,
): Promise<void> {
  await withGenerations(config, async (generations) => {
    if (!generations) return;
    const urls = pkiUrls(publicBaseUrl(config));
    const renewed = await renewKeysInCustody(names, { dataDir: config.dataDir, urls, root, generations });
    const retired = await retiredKeys(generations);
    if (renewed.length === 0 && retired.length === 0) return;
    await mark(renewed);
    const waitSeconds = 3 * config.calendar.reloadCheckSeconds;
    process.stdout.write(`the keys they replace are destroyed in ${waitSeconds} s, once the instances switched\n`);
    await new Promise((resolve) => setTimeout(resolve, waitSeconds * 1000));
    const destroyed = await destroyRetiredKeys(generations);
    process.stdout.write(`destroyed the replaced keys of ${destroyed.join(', ')} in the key custody\n`);
  });
}

/**
 * `qtsp pki ceremony --renew`: what is due within `--within` days (default the largest warning threshold) among
 * the root CRL, the TSA (a fresh TSU key) and both delegated OCSP responders, renewed with the root key of the
 * ceremony directory; `--dry-run` prints the plan only. The renewed files replace the old ones, then the marker
 * file tells running instances to reload.
 */
async function renew(config: Config, flags: RenewFlags): Promise<number> {
  const within = flags.within === undefined ? Math.max(...config.calendar.warnDays) : Number(flags.within);
  if (!Number.isInteger(within) || within < 0) {
    process.stderr.write(`qtsp pki ceremony --renew: --within must be a number of days\n${USAGE}`);
    return 2;
  }
  const now = new Date();
  const due = renewalPlan(materialCalendar(config), within, now);
  process.stdout.write(
    due.length
      ? `due within ${within} days:\n${due.map((r) => planLine(r, now)).join('')}`
      : `nothing due within ${within} days\n`,
  );
  if (flags['dry-run']) return 0;
  const inCustody = keysInCustody(config.dataDir);
  if (due.length === 0 && !inCustody) return 0;
  const ceremonyDir = flags['ceremony-dir'];
  let ceremonyRoot: CeremonyRoot | undefined;
  const root = () =>
    (ceremonyRoot ??= loadCeremonyRoot({ dataDir: config.dataDir, ...(ceremonyDir ? { ceremonyDir } : {}) }));
  const urls = pkiUrls(publicBaseUrl(config));
  const reissued = due.filter((r) => r.object !== 'root-crl').map((r) => r.object as CeremonyReissued);
  const rootCrl = due.some((r) => r.object === 'root-crl');
  if (rootCrl) writeRenewedRootCrl(config.dataDir, await signRootCrl(config, root()));
  let marked = false;
  const mark = async (renewed: readonly string[]) => {
    marked = true;
    // in the plan's order, then what a rerun completed
    const planned = due.map((r) => r.object).filter((o) => o === 'root-crl' || renewed.includes(o));
    const objects = [...planned, ...renewed.filter((o) => !planned.includes(o))];
    markRenewed(config.dataDir, objects);
    await journalCaEvent(config, 'pki.renewed', {
      objects,
      certificates: objects
        .filter((o) => o !== 'root-crl') // journaled by signRootCrl
        .map((o) => certificateFacts(o, certificateDer(reissuedFile(config.dataDir, o)))),
    });
    process.stdout.write(`renewed ${objects.join(', ') || 'what an interrupted ceremony left'}; ${PICKED_UP}\n`);
  };
  if (inCustody) {
    await renewInCustody(config, reissued, root, mark);
    if (rootCrl && !marked) await mark([]);
    return 0;
  }
  for (const name of reissued) writeRenewed(config.dataDir, name, reissue(name, config.dataDir, urls, root()));
  await mark(reissued);
  return 0;
}

/** the certificate file of a certificate a ceremony reissues */
function reissuedFile(dataDir: string, object: string): string {
  const p = pkiPaths(dataDir);
  const files: Record<string, string> = {
    tsa: p.tsaCert,
    'ocsp-responder': p.ocspCert,
    'root-ocsp-responder': p.rootOcspCert,
  };
  const file = files[object];
  if (!file) throw new Error(`no certificate file for ${object}`);
  return file;
}

const certificateDer = (file: string) => new X509Certificate(readFileSync(file)).raw;

interface RenewFlags {
  readonly within?: string | undefined;
  readonly 'dry-run': boolean;
  readonly 'ceremony-dir'?: string | undefined;
}

/** The calendar of the material in the configuration's data directory (ca/calendar.ts). */
export function materialCalendar(config: Config): CalendarEntry[] {
  return pkiCalendar({
    dataDir: config.dataDir,
    clientCertFile: config.client.certFile,
    serverCertFile: config.server.tlsCertFile,
    signerValiditySeconds: config.signer.validitySeconds,
    tsuKeyUsageDays: config.calendar.tsuKeyUsageDays,
  });
}

const day = (d: Date) => d.toISOString().slice(0, 16).replace('T', ' ');

/** An end as a cell: EXPIRED once past, else the whole days left. */
const left = (at: Date, now: Date) => (at <= now ? 'EXPIRED' : `${daysLeft(at, now)} days`);

/**
 * One line per object (end, days left, key usage end, who renews it), then its issuer and how it is renewed
 * (once it has ended, the way back that still works).
 */
function statusText(entries: readonly CalendarEntry[], now: Date): string {
  const rows = entries.map((e) => [
    e.object,
    `${e.endField} ${day(e.endsAt)}`,
    left(e.endsAt, now),
    e.keyUsageEndsAt ? `key usage until ${day(e.keyUsageEndsAt)} (${left(e.keyUsageEndsAt, now)})` : '',
    `renewed by ${e.renewedBy}`,
  ]);
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return entries
    .map((e, n) => {
      const line = rows[n]!.map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd();
      return `${line}\n    ${e.title}; issuer ${e.issuer}\n    renew: ${renewalOf(e, now)}\n`;
    })
    .join('');
}

/**
 * `qtsp pki status`: every long-lived object with its end and days left. Exit 1 when one has ended, or its key's
 * usage period has (the service refuses to sign once one a signature depends on has), else 0; a retired CA's
 * end is expected and does not count.
 */
async function status(config: Config, json: boolean): Promise<number> {
  const now = new Date();
  const anchors = existsSync(config.trust.keyArchiveSignerKeyFile)
    ? await keyArchiveAnchors(config.trust.keyArchiveSignerKeyFile)
    : [];
  const entries = [...materialCalendar(config), ...anchors];
  if (json) process.stdout.write(`${JSON.stringify(entries, null, 2)}\n`);
  else process.stdout.write(statusText(entries, now));
  const ended = endedForSigning(entries, now);
  const others = expired(entries, now).filter((e) => !ended.includes(e));
  if (ended.length && !json) process.stdout.write(`not signing: ${ended.map((e) => e.object).join(', ')} ended\n`);
  if (others.length && !json) process.stdout.write(`expired: ${others.map((e) => e.object).join(', ')}\n`);
  return ended.length || others.length ? 1 : 0;
}

export async function runPki(args: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      rsa: { type: 'boolean', default: false },
      force: { type: 'boolean', default: false },
      pkcs11: { type: 'boolean', default: false },
      migrate: { type: 'boolean', default: false },
      'renew-crl': { type: 'boolean', default: false },
      'rollover-issuing-ca': { type: 'boolean', default: false },
      'destroy-issuing-ca': { type: 'string' },
      renew: { type: 'boolean', default: false },
      'dry-run': { type: 'boolean', default: false },
      within: { type: 'string' },
      'ceremony-dir': { type: 'string' },
      'data-dir': { type: 'string' },
      reason: { type: 'string', default: 'unspecified' },
      json: { type: 'boolean', default: false },
      rotate: { type: 'boolean', default: false },
      retire: { type: 'boolean', default: false },
      register: { type: 'boolean', default: false },
      'sp-directory': { type: 'string' },
      'credential-file': { type: 'string' },
    },
  });
  const config = loadConfig(values['data-dir'] ? { dataDir: values['data-dir'] } : {});
  const paths = pkiPaths(config.dataDir);
  switch (positionals[0]) {
    case 'init':
    case 'ceremony':
      // --migrate names what a ceremony on existing material does anyway: it completes and migrates it
      if (values.renew) return renew(config, values);
      if (values['rollover-issuing-ca']) return rollover(config, values, journalCaEvent);
      if (values['destroy-issuing-ca'] !== undefined)
        return destroyIssuingCa(config, values['destroy-issuing-ca'], values, journalCaEvent);
      return values['renew-crl'] ? renewRootCrl(config, values['ceremony-dir']) : ceremony(config, values);
    case 'root':
      process.stdout.write(readFileSync(paths.rootCert, 'utf8'));
      return 0;
    case 'revoke':
      return revoke(config, positionals[1], values.reason);
    case 'status':
      return status(config, values.json);
    case 'client-cert':
      return clientCert(config, values, journalCaEvent);
    default:
      process.stderr.write(USAGE);
      return 2;
  }
}
