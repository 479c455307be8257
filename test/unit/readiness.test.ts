/**
 * readiness.ts: the background checks follow a recovery promptly (while not ready they run again every
 * RECHECK_MS, not only every intervalMs), one round at a time, and no more often than that while a dependency
 * is down. The dependencies are stand-ins whose answers the tests switch; waits are bounded by deadlines.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { RECHECK_MS, watchReadiness, type ReadinessParts } from '../../src/readiness.ts';
import type { Logger } from '../../src/util/logger.ts';

/** far longer than any test here: a recovery seen in time was not seen by the interval */
const INTERVAL_MS = 60_000;
/** from a dependency answering again to readiness saying so: RECHECK_MS and a round, with room for a busy machine */
const RECOVERY_BOUND_MS = 2000;

interface Switches {
  storeUp: boolean;
  tokenUp: boolean;
  /** how long a store check takes (ms) */
  storeDelayMs: number;
  storeChecks: number;
  maxConcurrentChecks: number;
}

function standIns(switches: Switches): { parts: ReadinessParts; events: string[] } {
  let healthy = true;
  let concurrent = 0;
  const events: string[] = [];
  const health = {
    get healthy() {
      return healthy;
    },
    get reason() {
      return healthy ? undefined : 'database or disk is full';
    },
    async check() {
      switches.storeChecks++;
      switches.maxConcurrentChecks = Math.max(switches.maxConcurrentChecks, ++concurrent);
      await sleep(switches.storeDelayMs);
      concurrent--;
      healthy = switches.storeUp;
      return healthy;
    },
    stop() {},
  };
  const sign = async () => {
    if (!switches.tokenUp) throw new Error('CKR_TOKEN_NOT_PRESENT');
    return Buffer.alloc(64);
  };
  const keys = {
    readiness: () => (switches.tokenUp ? { ready: true, reasons: [] } : { ready: false, reasons: ['token away'] }),
    createSignerKey: async () => ({ sign, destroy: async () => undefined }),
  };
  const logger = {
    info: (fields: { event: string }) => events.push(fields.event),
    warn: (fields: { event: string }) => events.push(fields.event),
  };
  const parts = {
    store: { driver: 'sqlite', health },
    idps: { readiness: () => ({ ready: true, reasons: [] }), refreshList: async () => 1, activeIssuers: () => [] },
    keyArchive: { readiness: () => ({ ready: true, reasons: [] }) },
    servers: { probeKeySources: async () => ({ usable: true, reasons: [] }) },
    keys,
    issuingKey: { sign },
    calendar: { endedForSigning: () => [] },
    sealing: { readiness: () => ({ ready: true, reasons: [] }) },
    intervalMs: INTERVAL_MS,
    logger: logger as unknown as Logger,
  } as unknown as ReadinessParts;
  return { parts, events };
}

/** ms until readiness reports ready, polling its report (no I/O) as the HTTP probe does; fails after `boundMs` */
async function msUntilReady(report: () => { ready: boolean }, boundMs: number): Promise<number> {
  const started = performance.now();
  const deadline = started + boundMs * 5;
  while (!report().ready) {
    assert.ok(performance.now() < deadline, `not ready ${boundMs * 5} ms after the recovery`);
    await sleep(10);
  }
  return performance.now() - started;
}

function switches(overrides: Partial<Switches> = {}): Switches {
  return { storeUp: true, tokenUp: true, storeDelayMs: 0, storeChecks: 0, maxConcurrentChecks: 0, ...overrides };
}

test('a store that accepts writes again (disk freed): ready within about a second, without a refresh', async () => {
  const s = switches({ storeUp: false });
  const { parts, events } = standIns(s);
  const readiness = watchReadiness(parts);
  try {
    await readiness.refresh();
    assert.equal(readiness.report().ready, false);
    assert.match(readiness.report().reasons.join('\n'), /evidence store \(sqlite\) does not accept a write/);
    s.storeUp = true;
    const ms = await msUntilReady(() => readiness.report(), RECOVERY_BOUND_MS);
    assert.ok(ms < RECOVERY_BOUND_MS, `ready ${Math.round(ms)} ms after the store recovered`);
    assert.deepEqual(readiness.report(), { ready: true, reasons: [] });
    assert.deepEqual(events, ['readiness.ready']);
  } finally {
    readiness.stop();
  }
});

test('a token that answers again: ready within about a second, without a refresh', async () => {
  const s = switches({ tokenUp: false });
  const { parts } = standIns(s);
  const readiness = watchReadiness(parts);
  try {
    await readiness.refresh();
    const down = readiness.report();
    assert.equal(down.ready, false);
    assert.match(down.reasons.join('\n'), /token away/);
    assert.match(down.reasons.join('\n'), /the issuing CA key does not sign \(CKR_TOKEN_NOT_PRESENT\)/);
    s.tokenUp = true;
    const ms = await msUntilReady(() => readiness.report(), RECOVERY_BOUND_MS);
    assert.ok(ms < RECOVERY_BOUND_MS, `ready ${Math.round(ms)} ms after the token answered`);
  } finally {
    readiness.stop();
  }
});

test('while down: checked again about every RECHECK_MS, one round at a time; once ready, only every interval', async () => {
  // each store check takes longer than RECHECK_MS: rounds must not pile up behind one another
  const s = switches({ storeUp: false, storeDelayMs: RECHECK_MS * 2 });
  const { parts } = standIns(s);
  const readiness = watchReadiness(parts);
  try {
    await readiness.refresh();
    const before = s.storeChecks;
    const started = performance.now();
    await sleep(RECHECK_MS * 8);
    const elapsed = performance.now() - started;
    const checks = s.storeChecks - before;
    assert.ok(checks >= 1, 'checked again while down');
    // at most one round per (RECHECK_MS + the round itself), plus the one under way
    assert.ok(checks <= Math.ceil(elapsed / (RECHECK_MS * 3)) + 1, `${checks} checks in ${Math.round(elapsed)} ms`);
    assert.equal(s.maxConcurrentChecks, 1, 'one round at a time');
    s.storeUp = true;
    s.storeDelayMs = 0;
    await msUntilReady(() => readiness.report(), RECOVERY_BOUND_MS);
    const whenReady = s.storeChecks;
    await sleep(RECHECK_MS * 4);
    assert.equal(s.storeChecks, whenReady, 'no check before the interval once ready');
  } finally {
    readiness.stop();
  }
});

test('stop() ends the checks', async () => {
  const s = switches({ storeUp: false });
  const { parts } = standIns(s);
  const readiness = watchReadiness(parts);
  await readiness.refresh();
  readiness.stop();
  const stopped = s.storeChecks;
  await sleep(RECHECK_MS * 4);
  assert.equal(s.storeChecks, stopped);
});
