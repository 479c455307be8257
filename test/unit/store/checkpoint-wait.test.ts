/**
 * store/sqlite-checkpoint-wait.ts: the checkpoint thread checkpoints often while writes come in and backs off while
 * none do, so an idle store does not wake a thread five times a second for nothing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CHECKPOINT_IDLE_INTERVAL_MS,
  CHECKPOINT_INTERVAL_MS,
  nextCheckpointWait,
} from '../../../src/store/sqlite-checkpoint-wait.ts';

describe('the wait between WAL checkpoints', () => {
  const done = { log: 40, checkpointed: 40 };

  it('stays at the busy interval while other connections commit', () => {
    assert.equal(nextCheckpointWait(CHECKPOINT_INTERVAL_MS, true, done), CHECKPOINT_INTERVAL_MS);
    assert.equal(nextCheckpointWait(CHECKPOINT_IDLE_INTERVAL_MS, true, done), CHECKPOINT_INTERVAL_MS);
  });

  it('doubles while nothing is committed, up to the idle interval', () => {
    const waits = [CHECKPOINT_INTERVAL_MS];
    for (let i = 0; i < 8; i++) waits.push(nextCheckpointWait(waits.at(-1)!, false, done));
    assert.deepEqual(waits.slice(0, 4), [200, 400, 800, 1000]);
    assert.ok(waits.every((w) => w <= CHECKPOINT_IDLE_INTERVAL_MS));
    assert.equal(waits.at(-1), CHECKPOINT_IDLE_INTERVAL_MS);
  });

  it('returns to the busy interval while frames are left to copy, committed or not', () => {
    assert.equal(
      nextCheckpointWait(CHECKPOINT_IDLE_INTERVAL_MS, false, { log: 40, checkpointed: 12 }),
      CHECKPOINT_INTERVAL_MS,
    );
  });

  it('backs off on an empty WAL and outside WAL mode (-1, -1)', () => {
    assert.equal(nextCheckpointWait(200, false, { log: 0, checkpointed: 0 }), 400);
    assert.equal(nextCheckpointWait(200, false, { log: -1, checkpointed: -1 }), 400);
  });
});
