/**
 * One delivery job per hand-over: the relay hands the entries of a pass over as one job carrying their ids, and
 * the worker keeps each entry's retries and final state in the outbox as a job of its own did. Real
 * redis-server, real bullmq, real SQLite store, the real mediation deliverer posting to a real HTTP receiver that
 * behaves as the mediation service does (stores a record once, refuses a duplicate reference_id with 409) and
 * answers some records as the test tells it: a permanent refusal (400), a transient failure (503) once.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/load.ts';
import { DeliveryQueues, handOverJobId, redisConnection } from '../../src/delivery/queue.ts';
import { OutboxRelay } from '../../src/delivery/relay.ts';
import { DeliveryWorkers } from '../../src/delivery/worker.ts';
import { mediationDeliverer } from '../../src/mediation/deliver.ts';
import { openSqliteStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/types.ts';
import { tlsAgent } from '../../src/util/http-client.ts';
import { startRedisServer, type LocalRedis } from '../../src/util/redis-server.ts';
import { jobsCarrying, waitFor } from '../helpers/delivery.ts';

const TOPIC = 'mediation';
const silent = pino({ level: 'silent' });

/** A receiver as the mediation service: stores each reference_id once, 409 for a duplicate; scripted answers. */
class Receiver {
  readonly posts = new Map<string, number>();
  readonly stored = new Map<string, number>();
  /** reference_ids answered 400 (a permanent refusal) */
  readonly refuse = new Set<string>();
  /** reference_ids answered 503 this many more times */
  readonly failTimes = new Map<string, number>();
  /** every answer this much later: deliveries of two jobs overlap */
  delayMs = 0;
  private server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const id = (JSON.parse(body) as { reference_id: string }).reference_id;
        this.posts.set(id, (this.posts.get(id) ?? 0) + 1);
        const [status, answer] = this.answer(id);
        setTimeout(
          () => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(answer)),
          this.delayMs,
        );
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}/records`;
  }

  private answer(id: string): [number, unknown] {
    if (this.refuse.has(id)) return [400, { error: 'invalid_record', error_description: 'refused by the test' }];
    const fails = this.failTimes.get(id) ?? 0;
    if (fails > 0) {
      this.failTimes.set(id, fails - 1);
      return [503, { error: 'temporarily_unavailable' }];
    }
    if (this.stored.has(id)) return [409, { error: 'duplicate_reference_id' }];
    this.stored.set(id, 1);
    return [201, {}];
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((r) => this.server?.close(r));
  }
}

describe('delivery jobs that carry several outbox entries', () => {
  let dir: string;
  let redis: LocalRedis;
  let store: Store;
  const receiver = new Receiver();
  const agent = tlsAgent();
  const connections: Redis[] = [];
  const prefix = `qtsp-jobs-${randomUUID().slice(0, 8)}`;
  const settings = (backoffMs: number) =>
    loadConfig(
      {
        redis: { prefix, commandTimeoutMs: 2000 },
        delivery: { attempts: 4, backoffMs, timeoutMs: 3000, lockMs: 5000, concurrency: 8 },
      },
      {},
    );
  const config = settings(100);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'qtsp-jobs-'));
    redis = await startRedisServer({ dir: join(dir, 'redis') });
    store = await openSqliteStore(join(dir, 'qtsp.sqlite'));
    await receiver.start();
  });
  after(async () => {
    for (const c of connections) c.disconnect();
    await agent.close();
    await receiver.stop();
    await store.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const connect = (blocking: boolean) => {
    const c = redisConnection(redis.url, { blocking, onError: () => undefined });
    connections.push(c);
    return c;
  };
  /** a relay on a store of its own choosing (one whose marks fail, say); a timer that never fires in the test */
  const startRelay = async (on: Store, settings = config) => {
    const queues = new DeliveryQueues(connect(false), [TOPIC], settings, () => undefined);
    await waitFor('Redis connected', async () => (queues.ready ? true : undefined));
    const relay = new OutboxRelay({
      store: on,
      queues,
      topics: [TOPIC],
      intervalMs: 3_600_000,
      requeueAfterMs: 3_600_000,
      logger: silent,
    });
    relay.start();
    await relay.idle(); // its first pass reads the outbox
    return { relay, queues };
  };
  const startWorkers = (settings = config) =>
    new DeliveryWorkers({
      connection: connect(true),
      store,
      handlers: { [TOPIC]: mediationDeliverer({ url: receiver.url, agent, timeoutMs: 3000, logger: silent }) },
      config: settings,
      logger: silent,
    });
  const add = async (n: number) => {
    const ids = Array.from({ length: n }, () => randomUUID());
    await store.addOutbox(ids.map((id) => ({ id, topic: TOPIC, payload: { reference_id: id } })));
    return ids;
  };
  const entries = (ids: readonly string[]) => Promise.all(ids.map(async (id) => (await store.getOutbox(id))!));
  const settled = (ids: readonly string[]) =>
    waitFor(
      'every entry delivered or failed',
      async () => {
        const all = await entries(ids);
        return all.every((e) => e.state === 'delivered' || e.state === 'failed') ? all : undefined;
      },
      30_000,
    );

  it('a refusal fails its entry for good, a transient failure is retried, the others are delivered once', async () => {
    const { relay, queues } = await startRelay(store);
    const workers = startWorkers();
    try {
      const ids = await add(6);
      const [refused, flaky] = ids as [string, string];
      receiver.refuse.add(refused);
      receiver.failTimes.set(flaky, 1);
      relay.wake(ids.map((id) => ({ id, topic: TOPIC }))); // one pass: one hand-over
      await relay.idle();
      // one job carries them all
      const jobIds = await Promise.all(ids.map((id) => jobsCarrying(redis.url, prefix, TOPIC, id)));
      assert.equal(new Set(jobIds.flat()).size, 1, 'one job for the hand-over');
      assert.ok(jobIds.every((j) => j.length === 1));

      const byId = new Map((await settled(ids)).map((e) => [e.id, e]));
      assert.equal(byId.get(refused)!.state, 'failed');
      assert.equal(byId.get(refused)!.attempts, 1, 'a permanent refusal counts one attempt, no retry');
      assert.match(byId.get(refused)!.lastError ?? '', /HTTP 400/);
      assert.equal(byId.get(flaky)!.state, 'delivered');
      assert.equal(byId.get(flaky)!.attempts, 1, 'one failed attempt, then delivered on the retry');
      assert.match(byId.get(flaky)!.lastError ?? '', /HTTP 503/);
      for (const id of ids.slice(2)) {
        assert.equal(byId.get(id)!.state, 'delivered');
        assert.equal(byId.get(id)!.attempts, 0);
      }
      // the job's retry posted only the entry still queued
      assert.equal(receiver.posts.get(refused), 1, 'the refused record posted once');
      assert.equal(receiver.posts.get(flaky), 2);
      for (const id of ids.slice(2)) assert.equal(receiver.posts.get(id), 1, 'a delivered record posted again');
      for (const id of ids.slice(1)) assert.equal(receiver.stored.get(id), 1);

      // the job ran twice and, one entry given up, stays in bullmq's failed set for inspection
      const queue = new Queue(TOPIC, { connection: connect(false), prefix: prefix });
      try {
        const job = await waitFor('the job in the failed set', async () => {
          const j = await queue.getJob(jobIds[0]![0]!);
          return j && (await j.getState()) === 'failed' ? j : undefined;
        });
        assert.equal(job.attemptsMade, 2);
      } finally {
        await queue.close();
      }
      assert.equal((await queues.depth(TOPIC)).failed, 1);
    } finally {
      await relay.stop();
      await workers.close();
      await queues.close();
    }
  });

  for (const variant of ['the same entries', 'those entries among others'] as const) {
    it(`a relay whose mark fails after the add, then ${variant} handed over again: each record stored once`, async () => {
      // the store refuses the relay's mark, as a relay killed between the Redis add and the mark never makes it
      const broken: Store = { ...store, markOutboxQueued: () => Promise.reject(new Error('killed (injected)')) };
      const first = await startRelay(broken);
      const ids = await add(5);
      first.relay.wake(ids.map((id) => ({ id, topic: TOPIC })));
      await first.relay.idle();
      await first.relay.stop();
      await first.queues.close();
      assert.ok(
        (await entries(ids)).every((e) => e.state === 'pending'),
        'the mark failed: still pending',
      );
      assert.ok((await jobsCarrying(redis.url, prefix, TOPIC, ids[0]!)).length === 1);

      // a new relay (the restarted process) reads the pending entries and hands them over again
      const more = variant === 'the same entries' ? [] : await add(3);
      const all = [...ids, ...more];
      const postsBefore = all.map((id) => receiver.posts.get(id) ?? 0);
      receiver.delayMs = 300; // the two jobs run at once
      const second = await startRelay(store);
      const workers = startWorkers();
      try {
        assert.ok(
          (await entries(all)).every((e) => e.state !== 'pending'),
          'handed over again',
        );
        const jobs = new Set((await Promise.all(all.map((id) => jobsCarrying(redis.url, prefix, TOPIC, id)))).flat());
        // the same entries give the same job id, which bullmq dropped; among others, a second job
        assert.equal(jobs.size, more.length === 0 ? 1 : 2);
        for (const e of await settled(all)) {
          assert.equal(e.state, 'delivered');
          assert.equal(e.attempts, 0);
        }
        for (const id of all) assert.equal(receiver.stored.get(id), 1, 'stored once');
        // eight deliveries at a time, two jobs carrying five records, and still no record posted twice
        const posts = all.map((id, i) => (receiver.posts.get(id) ?? 0) - postsBefore[i]!);
        assert.deepEqual(
          posts,
          all.map(() => 1),
          'each record posted once',
        );
      } finally {
        receiver.delayMs = 0;
        await second.relay.stop();
        await workers.close();
        await second.queues.close();
      }
    });
  }

  it('entries waiting for a retry, handed over again by a relay that starts, wait for the retry of their job', async () => {
    // a retry 30-60 s away: a second job that delivered them meanwhile would be seen
    const slow = settings(60_000);
    const workers = startWorkers(slow);
    const first = await startRelay(store, slow);
    let second: Awaited<ReturnType<typeof startRelay>> | undefined;
    const queue = new Queue(TOPIC, { connection: connect(false), prefix });
    try {
      const ids = await add(4);
      for (const id of ids) receiver.failTimes.set(id, 1);
      // two hand-overs of two: a read of the four hands them over as one batch
      for (const two of [ids.slice(0, 2), ids.slice(2)]) {
        first.relay.wake(two.map((id) => ({ id, topic: TOPIC })));
        await first.relay.idle();
      }
      await waitFor('each tried once, its job waiting for the retry', async () =>
        (await entries(ids)).every((e) => e.state === 'queued' && e.attempts === 1),
      );
      await first.relay.stop();

      // a new relay: its first connection counts as a Redis restart, so it hands every queued entry over again
      second = await startRelay(store, slow);
      const again = await waitFor('the job of the four', () => queue.getJob(handOverJobId(ids)));
      await waitFor('that job done', async () => ((await again.getState()) === 'completed' ? true : undefined));
      const now = await entries(ids);
      assert.ok(
        now.every((e) => e.state === 'queued' && e.attempts === 1),
        'left to the jobs that wait for their retry',
      );
      assert.deepEqual(
        ids.map((id) => receiver.posts.get(id)),
        ids.map(() => 1),
        'not posted again before the retry',
      );
    } finally {
      await queue.close();
      await second?.relay.stop();
      await workers.close();
      await first.queues.close();
      await second?.queues.close();
    }
  });
});
