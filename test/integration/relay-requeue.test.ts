/**
 * The relay's backstop for jobs that Redis lost without restarting (a FLUSHALL, an eviction): an entry that
 * stays queued for delivery.requeueAfterMs is handed over again. The relay looks for such entries at most once
 * per relayIntervalMs, not on every wake, so this checks that the look still happens, and that an
 * entry is not handed over again before it is requeueAfterMs old. Real Redis, real SQLite store, no worker.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { HttpAgent } from '../../src/util/http-client.ts';
import { Redis } from 'ioredis';
import { rpAgent } from '../../src/rp/http.ts';
import { jobsCarrying, postSignDoc, referenceIdsOf, sha256b64, waitFor } from '../helpers/delivery.ts';
import { authorize } from '../helpers/signing.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';

const REQUEUE_AFTER_MS = 1500;

describe('queued entries whose job Redis lost', () => {
  let env: TestEnvironment;
  let agent: HttpAgent;

  before(async () => {
    env = await startEnvironment({
      delivery: { inProcessWorker: false, relayIntervalMs: 200, requeueAfterMs: REQUEUE_AFTER_MS },
    });
    agent = rpAgent(env.endpoints);
  });
  after(async () => {
    agent.destroy();
    await env.close();
  });

  const signOne = async (label: string) => {
    const auth = await authorize(env.endpoints, [{ hash: sha256b64(label), label }]);
    const res = await postSignDoc(env, agent, auth.accessToken, auth.hashes);
    assert.equal(res.status, 200);
    return (await referenceIdsOf(env, res.txn))[0]!;
  };
  const outbox = async (id: string) => (await env.qtsp.deps.store.getOutbox(id))!;

  it('are handed over again once requeueAfterMs old, not before, while signatures keep waking the relay', async () => {
    const id = await signOne('requeue 0');
    await waitFor('the entry queued', async () => (await outbox(id)).state === 'queued');
    // a read pass and the hand-over of the entry signDoc named may both mark it, each touching it: what counts
    // is the entry as it is once the relay has nothing left in hand
    await env.qtsp.delivery.idle();
    const queued = await outbox(id);
    assert.equal(queued.state, 'queued');
    // Redis loses every job and keeps its run_id: only the requeue backstop can bring the entry back
    const redis = new Redis(env.redis.url, { maxRetriesPerRequest: 1 });
    try {
      await redis.flushall();
    } finally {
      redis.disconnect();
    }
    // signatures wake the relay meanwhile: none of those passes touches the entry before it is old enough. On a
    // busy machine a signature may take long enough for the entry to come of age while it runs: a touch is then
    // right, provided it came requeueAfterMs after the last one or later (the store's clock is ours)
    const t0 = Date.now();
    for (let i = 1; Date.now() - queued.updatedAt.getTime() < REQUEUE_AFTER_MS - 300; i++) {
      await signOne(`requeue ${i}`);
      const touched = (await outbox(id)).updatedAt.getTime();
      assert.ok(
        touched === queued.updatedAt.getTime() || touched - queued.updatedAt.getTime() >= REQUEUE_AFTER_MS,
        `handed over again after ${touched - queued.updatedAt.getTime()} ms (${Date.now() - t0} ms in)`,
      );
    }
    // then a pass within about relayIntervalMs hands it over again: touched anew, and a job in Redis once more
    const again = await waitFor(
      'the entry handed over again',
      async () => {
        const e = await outbox(id);
        return e.updatedAt.getTime() > queued.updatedAt.getTime() ? e : undefined;
      },
      5000,
    );
    assert.equal(again.state, 'queued');
    assert.ok(again.updatedAt.getTime() - queued.updatedAt.getTime() >= REQUEUE_AFTER_MS, 'not before requeueAfterMs');
    const jobs = await jobsCarrying(env.redis.url, env.config.redis.prefix, 'mediation', id);
    assert.ok(jobs.length > 0, 'a job carrying the entry is in Redis again');
  });
});
