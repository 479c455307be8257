/**
 * cli/serve-cluster.ts coalescedWake: a cluster worker announces new outbox entries to the primary's relay at
 * most once per window, and never leaves a wake unannounced (the last wake of a window is sent at its end).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { coalescedWake } from '../../../src/cli/serve-cluster.ts';

const WINDOW_MS = 40;

test('the first wake is sent at once, the wakes within the window become one send at its end', async () => {
  let sent = 0;
  const wake = coalescedWake(() => sent++, WINDOW_MS);
  wake();
  assert.equal(sent, 1, 'at once');
  wake();
  wake();
  wake();
  assert.equal(sent, 1, 'held while the window is open');
  await sleep(WINDOW_MS * 1.5);
  assert.equal(sent, 2, 'one send for the three held wakes, at the window end');
  await sleep(WINDOW_MS * 2.5);
  assert.equal(sent, 2, 'no wake since: nothing more is sent');
  wake();
  assert.equal(sent, 3, 'after a quiet window, at once again');
});

test('a lone wake is sent once', async () => {
  let sent = 0;
  const wake = coalescedWake(() => sent++, WINDOW_MS);
  wake();
  await sleep(WINDOW_MS * 3);
  assert.equal(sent, 1);
});

test('steady wakes are sent about once per window, and none is left unannounced', async () => {
  const sends: number[] = [];
  const wake = coalescedWake(() => sends.push(performance.now()), WINDOW_MS);
  const t0 = performance.now();
  // wakes every few ms until six sends (five windows): counted in sends, not in wall time, as a busy machine
  // stretches the loop; bounded
  while (sends.length < 6 && performance.now() - t0 < 10_000) {
    wake();
    await sleep(2);
  }
  assert.equal(sends.length, 6, `steady wakes gave ${sends.length} sends in ${Math.round(performance.now() - t0)} ms`);
  // at most one send per window: consecutive sends at least a window apart (timers may fire a ms early)
  for (let i = 1; i < sends.length; i++)
    assert.ok(sends[i]! - sends[i - 1]! >= WINDOW_MS - 2, `sends ${i - 1} and ${i} within one window`);
  const lastWake = performance.now();
  wake();
  await sleep(WINDOW_MS * 1.5);
  assert.ok(sends.at(-1)! >= lastWake, 'a send after the last wake');
});
