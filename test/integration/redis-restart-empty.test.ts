/**
 * A Redis that restarts empty while records are queued: its jobs are gone, the outbox still
 * says queued. The relay notices the restart by Redis's run_id and hands the entries over again, so they are
 * delivered at once instead of after delivery.requeueAfterMs (15 minutes), and none is delivered twice.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import type { HttpAgent } from '../../src/util/http-client.ts';
import { join } from 'node:path';
import { rpAgent } from '../../src/rp/http.ts';
import { idsInDelayedJobs, postSignDoc, referenceIdsOf, sha256b64, waitFor } from '../helpers/delivery.ts';
import { authorize } from '../helpers/signing.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';

const RECORDS = 20;

describe('Redis restarted empty while records are queued', () => {
  let env: TestEnvironment;
  let agent: HttpAgent;

  before(async () => {
    // a failed post is retried only after 60-180 s (backoff 2 min, jitter 0.5); requeueAfterMs stays 15 min:
    // a record delivered within the test's minute was handed over again because the restart was noticed
    env = await startEnvironment({
      delivery: { attempts: 15, backoffMs: 120_000, relayIntervalMs: 200, timeoutMs: 3000 },
      redis: { commandTimeoutMs: 500 },
    });
    agent = rpAgent(env.endpoints);
  });
  after(async () => {
    agent.destroy();
    await env.close();
  });

  it('every queued record is delivered within a minute, none twice', async (t) => {
    const local = env.redis.local;
    if (!local) return t.skip('REDIS_URL is shared: this test empties its own redis-server only');
    const store = env.qtsp.deps.store;

    // each record's first post fails (HTTP 500): its job waits in Redis for a retry minutes away
    env.sandbox.controls.mediation.mode = 'http500';
    const auths = await Promise.all(
      Array.from({ length: RECORDS }, (_, i) =>
        authorize(env.endpoints, [{ hash: sha256b64(`queued document ${i}`), label: `document ${i}` }]),
      ),
    );
    const txns: string[] = [];
    for (const auth of auths) {
      const res = await postSignDoc(env, agent, auth.accessToken, auth.hashes);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      txns.push(res.txn);
    }
    const ids = (await Promise.all(txns.map((txn) => referenceIdsOf(env, txn)))).flat();
    assert.equal(ids.length, RECORDS);
    await waitFor('every record tried once and queued for a retry', async () => {
      const entries = await Promise.all(ids.map((id) => store.getOutbox(id)));
      return entries.every((e) => e?.state === 'queued' && e.attempts === 1);
    });
    // the jobs (one per hand-over, each carrying the ids of its records) wait in Redis for their retry
    await waitFor('the retries waiting in Redis', async () => {
      const waiting = new Set(await idsInDelayedJobs(env.redis.url, env.config.redis.prefix, 'mediation'));
      return ids.every((id) => waiting.has(id));
    });

    // Redis restarts without its data (as without persistence): the jobs are gone
    await local.stop();
    rmSync(join(local.dir, 'appendonlydir'), { recursive: true, force: true });
    rmSync(join(local.dir, 'dump.rdb'), { force: true });
    env.sandbox.controls.mediation.mode = 'normal';
    const requestsBefore = env.sandbox.mediation.requests;
    await local.restart();
    const restartedAt = Date.now();

    await waitFor(
      'every record delivered',
      async () => {
        const entries = await Promise.all(ids.map((id) => store.getOutbox(id)));
        return entries.every((e) => e?.state === 'delivered');
      },
      60_000,
    );
    t.diagnostic(`all ${RECORDS} records delivered ${Date.now() - restartedAt} ms after Redis came back empty`);
    const held = env.sandbox.mediation.records().filter((r) => ids.includes(r.record.reference_id));
    assert.equal(held.length, RECORDS);
    assert.equal(new Set(held.map((r) => r.record.reference_id)).size, RECORDS, 'a record was stored twice');
    assert.equal(
      env.sandbox.mediation.requests - requestsBefore,
      RECORDS,
      'one post per record after the restart, no duplicate',
    );
    const counts = await store.outboxCounts('mediation');
    assert.equal(counts.queued + counts.pending + counts.failed, 0);
  });
});
