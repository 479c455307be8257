/**
 * The delivery process under stress: `qtsp worker` killed with SIGKILL while its posts hang at the mediation
 * service (which has already stored them), then restarted: exactly one record per signature. And a Redis
 * that never answers: signDoc is unaffected, the records wait in the outbox, shutdown does not hang.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { HttpAgent } from '../../src/util/http-client.ts';
import { createServer, type Server, type Socket } from 'node:net';
import { rpAgent } from '../../src/rp/http.ts';
import {
  childEnv,
  postSignDoc,
  referenceIdsOf,
  sha256b64,
  spawnQtsp,
  waitFor,
  type QtspChild,
} from '../helpers/delivery.ts';
import { authorize } from '../helpers/signing.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';

describe('the worker process killed with SIGKILL mid-delivery', () => {
  let env: TestEnvironment;
  let agent: HttpAgent;
  const children: QtspChild[] = [];

  before(async () => {
    // deliveries run in `qtsp worker` child processes only
    env = await startEnvironment({ delivery: { inProcessWorker: false, relayIntervalMs: 200 } });
    agent = rpAgent(env.endpoints);
  });
  after(async () => {
    for (const c of children) c.process.kill('SIGKILL');
    agent.destroy();
    await env.close();
  });

  /** lockMs 2000: the jobs of a dead worker run again about 2-3 s after its death */
  const worker = (timeoutMs: number) => {
    const child = spawnQtsp(
      ['worker'],
      childEnv(env, {
        QTSP_DELIVERY_LOCK_MS: '2000',
        QTSP_DELIVERY_TIMEOUT_MS: String(timeoutMs),
        QTSP_DELIVERY_BACKOFF_MS: '200',
      }),
    );
    children.push(child);
    return child;
  };

  it('after a restart, exactly one record per signature', async () => {
    // the service stores each record and then never answers: the worker dies with the posts in flight
    env.sandbox.controls.mediation.mode = 'store-then-stall';
    const first = worker(60_000);
    // 30 documents under one consent, one call each (a consent signs each document once)
    const auth = await authorize(
      env.endpoints,
      Array.from({ length: 30 }, (_, i) => ({ hash: sha256b64(`kill test ${i}`), label: `kill test ${i}` })),
    );
    const txns = new Set<string>();
    for (let i = 0; i < 30; i++) {
      const res = await postSignDoc(env, agent, auth.accessToken, [auth.hashes[i]!]);
      assert.equal(res.status, 200);
      txns.add(res.txn);
    }
    const ids = new Set((await Promise.all([...txns].map((t) => referenceIdsOf(env, t)))).flat());
    assert.equal(ids.size, 30);
    const held = () => env.sandbox.mediation.records().filter((r) => ids.has(r.record.reference_id));
    await waitFor('the first worker to post records', () => held().length >= 5, 30_000);
    first.process.kill('SIGKILL');
    assert.equal(await first.exited, 'SIGKILL');
    const storedBeforeKill = held().length;
    assert.ok(storedBeforeKill < 30, 'every record got through before the kill; nothing was in flight');

    env.sandbox.controls.mediation.mode = 'normal';
    const requestsBefore = env.sandbox.mediation.requests;
    worker(5_000);
    await waitFor(
      'every outbox entry delivered',
      async () => {
        const states = await Promise.all([...ids].map(async (id) => (await env.qtsp.deps.store.getOutbox(id))?.state));
        return states.every((s) => s === 'delivered');
      },
      40_000,
    );
    assert.equal(held().length, 30);
    assert.equal(new Set(held().map((r) => r.record.reference_id)).size, 30, 'a record was stored twice');
    // the records that were in flight at the kill were posted again and refused as duplicates
    assert.ok(env.sandbox.mediation.requests - requestsBefore >= 30 - storedBeforeKill);
  });
});

describe('a Redis that never answers', () => {
  let env: TestEnvironment;
  let agent: HttpAgent;
  let hole: Server;
  const sockets = new Set<Socket>();

  before(async () => {
    // accepts connections and never says a word: the worst kind of Redis, as BullMQ's commands then wait
    // instead of failing (only redis.commandTimeoutMs ends them)
    hole = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => hole.listen(0, '127.0.0.1', () => r()));
    const port = (hole.address() as { port: number }).port;
    env = await startEnvironment({
      redis: { url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 300 },
      delivery: { relayIntervalMs: 100, timeoutMs: 500 },
    });
    agent = rpAgent(env.endpoints);
  });
  after(async () => {
    agent.destroy();
    for (const s of sockets) s.destroy();
    hole.close();
  });

  // the timeout catches a shutdown that hangs on the silent Redis
  it('signDoc answers, the records wait in the outbox, and the service still shuts down', {
    timeout: 30_000,
  }, async () => {
    const auth = await authorize(
      env.endpoints,
      Array.from({ length: 5 }, (_, i) => ({ hash: sha256b64(`never ${i}`), label: `never ${i}` })),
    );
    for (let i = 0; i < 5; i++) {
      const res = await postSignDoc(env, agent, auth.accessToken, [auth.hashes[i]!]);
      assert.equal(res.status, 200);
    }
    await new Promise((r) => setTimeout(r, 500)); // several relay passes
    const counts = await env.qtsp.deps.store.outboxCounts('mediation');
    assert.deepEqual(counts, { pending: 5, queued: 0, delivered: 0, failed: 0 });
    const status = await env.qtsp.delivery.status();
    assert.match(status['mediation']!.queueError ?? '', /Redis/);
    await env.close();
  });
});
