/**
 * Readiness (GET /health/ready on the operations listener): ready exactly when a signDoc
 * could succeed now, i.e. when every step of sign-doc.ts that depends on something outside this process can
 * run:
 * - the evidence store commits a write (step 10 refuses to sign without evidence: a full disk is not ready);
 * - signing keys are usable: a fresh signer key signs, and the issuing CA key signs (steps 7, 8);
 * - the IDP directory has answered at least once and its last answer still serves (step 3, spec 4.6);
 * - the introspection response's key can be resolved: the key archive has a verified state, or, when it has
 *   none, every active AS's jwks_uri answers with RS256 keys (spec 4.7: archive first, then jwks_uri).
 * - nothing a signature depends on has ended (ca/calendar.ts): an expired root CRL, OCSP responder or TSA
 *   certificate makes signatures validators reject; the reason names the object and what renews it.
 * One condition is not a step of signDoc: the journal's sealing has succeeded within its bound (journal/seal.ts).
 * Evidence that stays unsealed is not protected by a time-stamp; signDoc goes on, readiness says so.
 * The body names every reason, also those that do not make the service unready (an archive that fails while
 * the AS key sources serve; a directory failing within its maximum staleness).
 *
 * The HTTP probe must answer at once and never hang on a dead database, so everything that needs I/O runs in
 * the background every `intervalMs` and the probe reports the last outcome. While not ready, the checks run
 * again every RECHECK_MS instead, so readiness follows a dependency that answers again within a second; one
 * round at a time, each a single cheap request per dependency, so a dependency that is down is not hammered.
 */
import type { CalendarWatch } from './ca/calendar-watch.ts';
import { endedReason } from './ca/calendar.ts';
import type { SigningKey } from './crypto/signature.ts';
import type { KeyCustody } from './custody/types.ts';
import type { SealingJob } from './journal/seal.ts';
import type { StoreHealth } from './store/open.ts';
import type { AuthorizationServers } from './trust/authorization-servers.ts';
import type { IdpDirectory } from './trust/idp-directory.ts';
import type { KeyArchive } from './trust/key-archive.ts';
import type { Logger } from './util/logger.ts';

export interface ReadinessReport {
  readonly ready: boolean;
  readonly reasons: string[];
}

export interface Readiness {
  /** the last outcome of every check, without I/O */
  report(): ReadinessReport;
  /** runs the background checks now (tests; the first run at start) */
  refresh(): Promise<void>;
  stop(): void;
}

export interface ReadinessParts {
  readonly store: { readonly driver: string; readonly health: StoreHealth };
  readonly idps: IdpDirectory;
  readonly keyArchive: KeyArchive;
  readonly servers: AuthorizationServers;
  /** the key custody (software or a PKCS#11 token) */
  readonly keys: KeyCustody;
  /** the key that signs signer certificates */
  readonly issuingKey: SigningKey;
  /** the ends of the long-lived material, kept in memory */
  readonly calendar: Pick<CalendarWatch, 'endedForSigning'>;
  /** the journal's sealing (journal/seal.ts): whether a seal succeeded within its bound */
  readonly sealing: Pick<SealingJob, 'readiness'>;
  readonly intervalMs: number;
  readonly logger: Logger;
}

interface Outcome {
  ok: boolean;
  reasons: string[];
}

const PROBE = Buffer.from('qtsp readiness probe');

/** A fresh signer key signs, and the issuing CA key signs: what steps 7 and 8 of signDoc do. */
async function probeSigning(keys: KeyCustody, issuingKey: SigningKey): Promise<Outcome> {
  const reasons: string[] = [...keys.readiness().reasons]; // the custody's own watch (a PKCS#11 token that is gone)
  try {
    // ECDSA P-256: the cheapest key any custody makes; an RSA key here would cost a generation per probe
    const key = await keys.createSignerKey('P-256', 'ecdsa');
    try {
      await key.sign('sha256', PROBE);
    } finally {
      await key.destroy();
    }
  } catch (err) {
    reasons.push(`signing keys: no fresh signer key signs (${(err as Error).message})`);
  }
  try {
    await issuingKey.sign('sha256', PROBE);
  } catch (err) {
    reasons.push(`signing keys: the issuing CA key does not sign (${(err as Error).message})`);
  }
  return { ok: reasons.length === 0, reasons };
}

/** how soon the checks run again while not ready (ms): readiness follows a recovery within a second */
export const RECHECK_MS = 250;

/** One round of the background checks: the outcomes of the probes, the store's health updated as a side effect. */
async function probeAll(parts: ReadinessParts): Promise<{ signing: Outcome; asKeys: Outcome }> {
  // a directory that never answered (down at a cold start), or whose last answer is too old, is asked again
  // here, also when the periodic list pull is off (trust.idpListPullSeconds 0): ready as soon as it answers
  if (!parts.idps.readiness().ready) await parts.idps.refreshList().catch(() => undefined);
  const [signing, asKeys] = await Promise.all([
    probeSigning(parts.keys, parts.issuingKey),
    // only needed while the archive has no verified state: otherwise keys come from the archive first
    parts.keyArchive.readiness().ready
      ? Promise.resolve({ ok: true, reasons: [] })
      : parts.servers.probeKeySources(parts.idps.activeIssuers()).then((r) => ({ ok: r.usable, reasons: r.reasons })),
    parts.store.health.check(),
  ]);
  return { signing, asKeys };
}

export function watchReadiness(parts: ReadinessParts): Readiness {
  let signing: Outcome = { ok: false, reasons: ['signing keys: not probed yet'] };
  let asKeys: Outcome = { ok: false, reasons: ['AS key sources: not probed yet'] };
  let running: Promise<void> | undefined;
  let last: ReadinessReport | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const run = async () => {
    ({ signing, asKeys } = await probeAll(parts));
  };
  // the next round: soon while not ready (a recovery shows within a second), else after the interval
  const schedule = () => {
    clearTimeout(timer);
    if (stopped) return;
    const ready = currentReport(parts, signing, asKeys).ready;
    timer = setTimeout(() => void tick(), ready ? parts.intervalMs : Math.min(RECHECK_MS, parts.intervalMs));
    timer.unref();
  };
  // the timer joins a probe under way; an explicit refresh waits for it and probes again, so what it reports
  // was probed after the call (a probe started before a change may report the old state)
  const tick = () =>
    (running ??= run().finally(() => {
      running = undefined;
      schedule();
    }));
  const refresh = async () => {
    await running;
    return tick();
  };

  const report = (): ReadinessReport => {
    const now = currentReport(parts, signing, asKeys);
    if (last && last.ready !== now.ready) {
      if (now.ready) parts.logger.info({ event: 'readiness.ready' }, 'ready');
      else parts.logger.warn({ event: 'readiness.not_ready', reasons: now.reasons }, 'not ready');
    }
    last = now;
    return now;
  };

  schedule();
  const stop = () => {
    stopped = true;
    clearTimeout(timer);
  };
  return { report, refresh, stop };
}

const AS_KEYS_SERVE =
  'AS key sources: every active AS serves its keys at jwks_uri; introspection responses are checked with those';
const NO_AS_KEYS = 'no source for AS keys: neither the key archive nor the jwks_uri of every active AS is usable';

/** The report of the last outcomes: ready when every part a signDoc needs is; the reasons of every part */
function currentReport(parts: ReadinessParts, signing: Outcome, asKeys: Outcome): ReadinessReport {
  const reasons: string[] = [];
  const { health, driver } = parts.store;
  if (!health.healthy) reasons.push(`evidence store (${driver}) does not accept a write: ${health.reason}`);
  reasons.push(...signing.reasons);
  const ended = parts.calendar.endedForSigning();
  reasons.push(...ended.map(endedReason));
  const idps = parts.idps.readiness();
  reasons.push(...idps.reasons);
  const sealing = parts.sealing.readiness();
  reasons.push(...sealing.reasons);
  const archive = parts.keyArchive.readiness();
  reasons.push(...archive.reasons);
  let keySources = archive.ready;
  if (!archive.ready) {
    keySources = asKeys.ok;
    reasons.push(asKeys.ok ? AS_KEYS_SERVE : NO_AS_KEYS);
    if (!asKeys.ok) reasons.push(...asKeys.reasons);
  }
  const ready = health.healthy && signing.ok && ended.length === 0 && idps.ready && sealing.ready && keySources;
  return { ready, reasons };
}
