/**
 * The pool of never-used keys (src/custody/key-pool.ts), generic over how a key is made and destroyed, with a
 * maker whose keys are numbered and whose generations the test finishes by hand: a take from an empty pool
 * waits; each key is handed out once; repeated failures fail the waiting requests; pause() and discard() (a
 * PKCS#11 token that went away and came back); close() destroys the keys nobody took, also those still being
 * made. The software pool with real RSA generation: software/signer-keys.test.ts.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { KeyPool, KeyPoolClosedError, type KeyMaker } from '../../../src/custody/key-pool.ts';
import { untilHolds } from '../../helpers/key-pool.ts';

/** A maker whose generations stay pending until finish() or fail() settles the oldest one. */
class ManualMaker implements KeyMaker<number> {
  readonly destroyed: number[] = [];
  readonly awaitedCalls: boolean[] = [];
  readonly #pending: { resolve(key: number): void; reject(err: Error): void }[] = [];
  #next = 0;

  get pending(): number {
    return this.#pending.length;
  }

  make(): Promise<number> {
    return new Promise((resolve, reject) => this.#pending.push({ resolve, reject }));
  }

  async destroy(key: number): Promise<void> {
    this.destroyed.push(key);
  }

  awaited(awaited: boolean): void {
    this.awaitedCalls.push(awaited);
  }

  /** settles the oldest generation with the next key number, and lets the pool react */
  async finish(): Promise<number> {
    const key = ++this.#next;
    this.#pending.shift()!.resolve(key);
    await new Promise((resolve) => setImmediate(resolve));
    return key;
  }

  async fail(message = 'generation failed'): Promise<void> {
    this.#pending.shift()!.reject(new Error(message));
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** close() waits for the generations under way: the test settles them */
async function closeAll(pool: KeyPool<number>, maker: ManualMaker): Promise<void> {
  const closed = pool.close();
  while (maker.pending > 0) await maker.finish();
  await closed;
}

function manualPool(size: number, concurrency = 1): { pool: KeyPool<number>; maker: ManualMaker } {
  const maker = new ManualMaker();
  const pool = new KeyPool({ maker, size, concurrency, what: 'test' });
  return { pool, maker };
}

describe('KeyPool', () => {
  test('fills at fill(), up to `concurrency` generations at a time, and hands each key out once', async () => {
    const { pool, maker } = manualPool(3, 2);
    assert.equal(maker.pending, 0, 'nothing is made before fill()');
    pool.fill();
    assert.equal(maker.pending, 2);
    await maker.finish();
    await maker.finish();
    await maker.finish();
    await untilHolds(pool);
    assert.equal(maker.pending, 0, 'a full pool makes nothing');
    const taken = [await pool.take(), await pool.take(), await pool.take()];
    assert.deepEqual(taken, [1, 2, 3]);
    assert.equal(pool.stats().waited, 0);
    assert.equal(maker.pending, 2, 'the refill starts at once');
    await closeAll(pool, maker);
    assert.deepEqual(maker.destroyed.sort(), [4, 5], 'made while closing: destroyed');
  });

  test('an empty pool makes the request wait, and the waiting request keeps the process alive', async () => {
    const { pool, maker } = manualPool(0);
    const waiting = pool.take();
    assert.equal(pool.stats().waiting, 1);
    assert.equal(maker.awaitedCalls.at(-1), true);
    const key = await maker.finish();
    assert.equal(await waiting, key);
    assert.equal(maker.awaitedCalls.at(-1), false);
    assert.deepEqual(pool.stats(), { ready: 0, generating: 0, waiting: 0, generated: 1, handedOut: 1, waited: 1 });
    await pool.close();
  });

  test('three failures in a row fail the waiting requests; the next request tries again', async () => {
    const { pool, maker } = manualPool(0);
    const waiting = assert.rejects(pool.take(), /the third/);
    await maker.fail();
    await maker.fail();
    assert.equal(pool.stats().waiting, 1, 'retried after one and two failures');
    await maker.fail('the third');
    await waiting;
    assert.equal(maker.pending, 0, 'no refill after repeated failures while nobody waits');
    const again = pool.take();
    assert.equal(maker.pending, 1, 'a request asks again');
    const key = await maker.finish();
    assert.equal(await again, key);
    await closeAll(pool, maker);
  });

  test('pause() fails waiting and later requests; discard() voids the keys made so far; fill() goes on', async () => {
    const { pool, maker } = manualPool(2);
    pool.fill();
    await maker.finish();
    const waitingBefore = pool.stats().ready;
    assert.equal(waitingBefore, 1);
    pool.pause(new Error('token gone'));
    await assert.rejects(pool.take(), /token gone/);
    pool.discard();
    assert.equal(pool.stats().ready, 0, 'the keys of before are dropped');
    await maker.finish(); // was under way at discard(): void too
    assert.equal(pool.stats().ready, 0);
    assert.deepEqual(maker.destroyed, [], 'void keys are dropped, not destroyed');
    pool.fill();
    await maker.finish();
    assert.equal(await pool.take(), 3);
    await closeAll(pool, maker);
  });

  test('close() fails waiting requests and destroys the keys nobody took, also those still being made', async () => {
    const { pool, maker } = manualPool(2, 2);
    pool.fill();
    await maker.finish(); // 1 ready, one still being made
    const closed = pool.close();
    await maker.finish(); // 2 arrives after close
    await closed;
    assert.deepEqual(maker.destroyed.sort(), [1, 2]);
    await assert.rejects(pool.take(), KeyPoolClosedError);
    await pool.close(); // idempotent
  });

  test('a waiting request fails at close()', async () => {
    const { pool, maker } = manualPool(0);
    const waiting = pool.take();
    const closed = pool.close();
    await assert.rejects(waiting, KeyPoolClosedError);
    await maker.fail('abandoned'); // the generation under way settles: close() waits for it
    await closed;
    assert.equal(pool.stats().generating, 0);
  });

  test('rejects a negative size', () => {
    assert.throws(() => manualPool(-1), RangeError);
  });
});
