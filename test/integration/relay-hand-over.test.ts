/**
 * The outbox relay hands the entries a signDoc names in wake(entries) to Redis without reading the outbox back,
 * and still reads the outbox where only a read finds the entries: on its timer, on a wake that
 * names none, and after a pass that failed. Real redis-server, real SQLite store; the store is the real one,
 * with its outbox reads counted (and, in one case, one write made to fail).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { loadConfig } from '../../src/config/load.ts';
import { DeliveryQueues, redisConnection } from '../../src/delivery/queue.ts';
import { OutboxRelay } from '../../src/delivery/relay.ts';
import { openSqliteStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/types.ts';
import { startRedisServer, type LocalRedis } from '../../src/util/redis-server.ts';
import { pino } from 'pino';
import { jobsCarrying, waitFor } from '../helpers/delivery.ts';

const TOPIC = 'mediation';

describe('outbox relay: entries handed over as they are committed', () => {
  let dir: string;
  let redis: LocalRedis;
  let store: Store;
  let reads = 0;
  let counted: Store;
  let connection: Redis;
  let queues: DeliveryQueues;
  let relay: OutboxRelay;
  const config = loadConfig(
    { redis: { prefix: `qtsp-relay-${randomUUID().slice(0, 8)}`, commandTimeoutMs: 1000 } },
    {},
  );

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'qtsp-relay-'));
    redis = await startRedisServer({ dir: join(dir, 'redis') });
    store = await openSqliteStore(join(dir, 'qtsp.sqlite'));
    counted = {
      ...store,
      outboxPending: (...args) => {
        reads++;
        return store.outboxPending(...args);
      },
    };
    connection = redisConnection(redis.url, { blocking: false, onError: () => undefined });
    queues = new DeliveryQueues(connection, [TOPIC], config, () => undefined);
    // a timer that never fires within the test: every read below is one the test caused
    relay = new OutboxRelay({
      store: counted,
      queues,
      topics: [TOPIC],
      intervalMs: 3_600_000,
      requeueAfterMs: 3_600_000,
      logger: pino({ level: 'silent' }),
    });
    await waitFor('Redis connected', async () => (queues.ready ? true : undefined));
    relay.start(); // the first pass reads (the outbox may hold entries from before)
    await relay.idle();
  });
  after(async () => {
    await relay.stop();
    await queues.close();
    connection.disconnect();
    await store.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const add = async () => {
    const id = randomUUID();
    await store.addOutbox([{ id, topic: TOPIC, payload: { reference_id: id } }]);
    return id;
  };
  const state = async (id: string) => (await store.getOutbox(id))!.state;
  const jobExists = async (id: string) => (await jobsCarrying(redis.url, config.redis.prefix, TOPIC, id)).length > 0;

  it('named entries go to Redis and are marked queued without an outbox read', async () => {
    const ids = [await add(), await add(), await add()];
    const before = reads;
    relay.wake([{ id: ids[0]!, topic: TOPIC }]);
    relay.wake(ids.slice(1).map((id) => ({ id, topic: TOPIC }))); // joins the same pass
    await relay.idle();
    assert.equal(reads, before, 'no outbox read');
    for (const id of ids) {
      assert.equal(await state(id), 'queued');
      assert.ok(await jobExists(id), `job ${id} in Redis`);
    }
  });

  it('an entry nobody names waits for a read: a wake without entries reads the outbox', async () => {
    const unnamed = await add();
    const named = await add();
    relay.wake([{ id: named, topic: TOPIC }]);
    await relay.idle();
    assert.equal(await state(named), 'queued');
    assert.equal(await state(unnamed), 'pending', 'a hand-over touches only the entries it was given');
    const before = reads;
    relay.wake();
    await relay.idle();
    assert.ok(reads > before, 'the outbox was read');
    assert.equal(await state(unnamed), 'queued');
  });

  it('a pass that fails leaves its entries pending, and the next pass reads them', async () => {
    await redis.stop();
    await waitFor('Redis gone', async () => (queues.ready ? undefined : true));
    const id = await add();
    relay.wake([{ id, topic: TOPIC }]);
    await relay.idle();
    assert.equal(await state(id), 'pending');
    await redis.restart();
    await waitFor('Redis back', async () => (queues.ready ? true : undefined), 10_000);
    // the reconnect wakes the relay, and that pass reads: the entry goes to Redis with no one naming it again
    await waitFor(
      'the entry queued after the restart',
      async () => ((await state(id)) === 'queued' ? true : undefined),
      10_000,
    );
    assert.ok(await jobExists(id));
  });

  it('many named entries go over in batches of batchSize, still without a read', async () => {
    const small = new OutboxRelay({
      store: counted,
      queues,
      topics: [TOPIC],
      intervalMs: 3_600_000,
      requeueAfterMs: 3_600_000,
      batchSize: 2,
      logger: pino({ level: 'silent' }),
    });
    small.start();
    await small.idle(); // its first pass reads
    try {
      const ids = [await add(), await add(), await add(), await add(), await add()];
      const before = reads;
      small.wake(ids.map((id) => ({ id, topic: TOPIC })));
      await small.idle();
      assert.equal(reads, before, 'no outbox read');
      for (const id of ids) assert.equal(await state(id), 'queued');
    } finally {
      await small.stop();
    }
  });

  it('a hand-over whose mark fails (the store, not Redis) is read again by the next pass: nothing stays pending', async () => {
    let failMark = false;
    const failing: Store = {
      ...counted,
      markOutboxQueued: (ids) => {
        if (failMark) {
          failMark = false;
          return Promise.reject(new Error('disk I/O error (injected)'));
        }
        return store.markOutboxQueued(ids);
      },
    };
    const r = new OutboxRelay({
      store: failing,
      queues,
      topics: [TOPIC],
      intervalMs: 3_600_000,
      requeueAfterMs: 3_600_000,
      logger: pino({ level: 'silent' }),
    });
    r.start();
    await r.idle(); // its first pass reads (and hands the queued entries over again: a first connection counts as a restart)
    try {
      const lost = await add();
      failMark = true;
      r.wake([{ id: lost, topic: TOPIC }]);
      await r.idle();
      assert.equal(await state(lost), 'pending', 'the failed mark left it pending');
      // the next wake names only another entry; the pass reads, so the first one goes over too
      const next = await add();
      const before = reads;
      r.wake([{ id: next, topic: TOPIC }]);
      await r.idle();
      assert.ok(reads > before, 'the pass after the failure read the outbox');
      assert.equal(await state(lost), 'queued');
      assert.equal(await state(next), 'queued');
    } finally {
      await r.stop();
    }
  });

  it('entries of a topic without a queue make the pass read instead of failing it', async () => {
    const id = await add();
    const before = reads;
    relay.wake([{ id, topic: 'no-such-topic' }]);
    await relay.idle();
    assert.ok(reads > before, 'the outbox was read');
    assert.equal(await state(id), 'queued');
  });
});
