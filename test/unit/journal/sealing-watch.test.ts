/**
 * journal/seal.ts startSealing: a run of failed seals logs one warning and one line when a seal succeeds again;
 * readiness reports the failures as a reason that leaves the service ready, and not ready, naming the stalled
 * seal and its last error, once no seal has succeeded for longer than the bound (three intervals unless set).
 * The store is a stand-in whose horizon fails while switched; the clock is injected.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stalledAfterMs, startSealing, type SealingTsas } from '../../../src/journal/seal.ts';
import type { Store } from '../../../src/store/types.ts';
import type { Logger } from '../../../src/util/logger.ts';

function standIns() {
  const state = { blocked: false, now: 1_000_000 };
  const store = {
    journal: {
      horizon: async () => {
        if (state.blocked) throw new Error('journal: not sealed: 1 transaction(s) still open');
        return 0;
      },
      lastBatch: async () => undefined,
    },
  } as unknown as Store;
  const lines: { level: string; event: string }[] = [];
  const logger = {
    info: (f: { event: string }) => lines.push({ level: 'info', event: f.event }),
    warn: (f: { event: string }) => lines.push({ level: 'warn', event: f.event }),
  } as unknown as Logger;
  return { state, store, lines, logger };
}

const NO_TSA = {} as SealingTsas; // nothing to seal: no time-stamp is asked for

test('the stall bound: three intervals unless set; none when sealing runs only at close', () => {
  assert.equal(stalledAfterMs({ intervalSeconds: 60, stalledAfterSeconds: 0 }), 180_000);
  assert.equal(stalledAfterMs({ intervalSeconds: 60, stalledAfterSeconds: 30 }), 30_000);
  assert.equal(stalledAfterMs({ intervalSeconds: 0, stalledAfterSeconds: 30 }), 0);
});

test('failed seals: one warning, ready with a reason, then not ready past the bound; ready again after a seal', async () => {
  const { state, store, lines, logger } = standIns();
  const job = startSealing(store, NO_TSA, { intervalSeconds: 3600, stalledAfterSeconds: 10 }, logger, () => state.now);
  try {
    await job.sealNow();
    assert.deepEqual(job.readiness(), { ready: true, reasons: [] });
    state.blocked = true;
    for (let tick = 0; tick < 5; tick++) {
      state.now += 1000;
      await job.sealNow();
    }
    const failing = job.readiness();
    assert.equal(failing.ready, true, 'within the bound: ready');
    assert.match(
      failing.reasons.join(),
      /^journal sealing failing: 5 attempt\(s\) failed; last error: journal: not sealed/,
    );
    for (let tick = 0; tick < 10; tick++) {
      state.now += 1000;
      await job.sealNow();
    }
    const stalled = job.readiness();
    assert.equal(stalled.ready, false);
    assert.match(
      stalled.reasons.join(),
      /^journal sealing stalled: no seal succeeded for 15 s, more than 10 s; last error: journal: not sealed: 1 transaction/,
    );
    assert.deepEqual(lines, [{ level: 'warn', event: 'journal.seal_failed' }], 'one warning for 15 failed seals');
    state.blocked = false;
    state.now += 1000;
    await job.sealNow();
    assert.deepEqual(job.readiness(), { ready: true, reasons: [] });
    assert.deepEqual(lines.at(-1), { level: 'info', event: 'journal.seal_resumed' });
    assert.equal(lines.length, 2);
  } finally {
    await job.close();
  }
});

test('a seal under way for longer than the bound is a stall too', async () => {
  const { state, store, logger } = standIns();
  let release = () => {};
  let calls = 0;
  const held = () => new Promise<number>((r) => (release = () => r(0)));
  const slow = {
    ...store,
    journal: { ...store.journal, horizon: () => (calls++ === 0 ? held() : Promise.resolve(0)) },
  } as unknown as Store;
  const job = startSealing(slow, NO_TSA, { intervalSeconds: 3600, stalledAfterSeconds: 10 }, logger, () => state.now);
  const sealing = job.sealNow();
  state.now += 11_000;
  assert.match(job.readiness().reasons.join(), /^journal sealing stalled: .*; a seal is under way$/);
  release();
  await sealing;
  assert.equal(job.readiness().ready, true);
  await job.close();
});
