/**
 * Redis under Sentinel (redis.sentinels, redis.sentinelName): a setting that is malformed, that no sentinel
 * answers or that names no monitored master stops the start with a message naming it; and when the master is
 * killed under signing, the queues follow the sentinels to the promoted replica and every returned
 * signature's mediation record is delivered exactly once (what died with the old master comes again from the
 * outbox).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rpAgent } from '../../src/rp/http.ts';
import type { HttpAgent } from '../../src/util/http-client.ts';
import { loadConfig, ConfigError } from '../../src/config/load.ts';
import { checkSentinels } from '../../src/delivery/queue.ts';
import { freePort } from '../../src/util/free-port.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { childEnv, postSignDoc, referenceIdsOf, sha256b64, spawnQtsp, waitFor } from '../helpers/delivery.ts';
import { authorize } from '../helpers/signing.ts';
import { startSentinelRedis, type SentinelRedis } from '../helpers/redis-sentinel.ts';

describe('Redis under Sentinel', () => {
  let redis: SentinelRedis;

  before(async () => {
    redis = await startSentinelRedis();
  });
  after(async () => {
    await redis?.close();
  });

  it('refuses a malformed or half-given setting, naming it', () => {
    const bad = (env: Record<string, string>) => () => loadConfig({}, env);
    assert.throws(bad({ QTSP_REDIS_SENTINELS: '127.0.0.1:99999', QTSP_REDIS_SENTINEL_NAME: 'm' }), (err) => {
      return err instanceof ConfigError && /QTSP_REDIS_SENTINELS/.test(err.message) && /port/.test(err.message);
    });
    assert.throws(bad({ QTSP_REDIS_SENTINELS: '127.0.0.1:26379' }), /QTSP_REDIS_SENTINEL_NAME/);
    assert.throws(bad({ QTSP_REDIS_SENTINEL_NAME: 'm' }), /QTSP_REDIS_SENTINELS/);
    assert.throws(
      bad({ QTSP_REDIS_SENTINELS: '127.0.0.1', QTSP_REDIS_SENTINEL_NAME: 'm', QTSP_REDIS_URL: 'redis://127.0.0.1' }),
      /QTSP_REDIS_URL/,
    );
    const ok = loadConfig({}, { QTSP_REDIS_SENTINELS: '127.0.0.1:1, [::1]', QTSP_REDIS_SENTINEL_NAME: 'm' });
    assert.equal(ok.redis.url, 'redis-sentinel://127.0.0.1:1,[::1]:26379/m');
  });

  it('refuses sentinels that do not answer, and a master name they do not monitor', async () => {
    const nobody = `127.0.0.1:${await freePort()}`;
    const url = (sentinels: string, name: string) =>
      loadConfig({}, { QTSP_REDIS_SENTINELS: sentinels, QTSP_REDIS_SENTINEL_NAME: name }).redis.url!;
    await assert.rejects(checkSentinels(url(nobody, redis.name), 1000), (err: Error) => {
      return err instanceof ConfigError && err.message.includes('QTSP_REDIS_SENTINELS') && err.message.includes(nobody);
    });
    await assert.rejects(checkSentinels(url(redis.sentinels.join(','), 'other'), 1000), /QTSP_REDIS_SENTINEL_NAME/);
    // one sentinel down among them is no reason to refuse
    await checkSentinels(url([nobody, ...redis.sentinels].join(','), redis.name), 1000);
  });

  describe('the master killed under signing', () => {
    let env: TestEnvironment;
    let agent: HttpAgent;

    before(async () => {
      env = await startEnvironment({
        redis: { sentinels: redis.sentinels.join(','), sentinelName: redis.name, commandTimeoutMs: 500 },
        delivery: { relayIntervalMs: 200, timeoutMs: 3000 },
      });
      agent = rpAgent(env.endpoints);
    });
    after(async () => {
      agent?.destroy();
      await env?.close();
    });

    it('`qtsp worker` refuses an unreachable sentinel at start, naming the setting', async () => {
      const nobody = `127.0.0.1:${await freePort()}`;
      const child = spawnQtsp(
        ['worker'],
        childEnv(env, { QTSP_REDIS_URL: '', QTSP_REDIS_SENTINELS: nobody, QTSP_REDIS_SENTINEL_NAME: redis.name }),
      );
      const code = await child.exited;
      assert.notEqual(code, 0);
      assert.match(child.output(), /QTSP_REDIS_SENTINELS/);
      assert.match(child.output(), new RegExp(nobody.replace(/\./g, '\\.')));
      assert.doesNotMatch(child.output(), /\n\s+at /, 'no stack trace');
    });

    it('delivers every record once after the failover', async (t) => {
      const sign = async (i: number) => {
        const auth = await authorize(env.endpoints, [{ hash: sha256b64(`sentinel document ${i}`), label: `d${i}` }]);
        return postSignDoc(env, agent, auth.accessToken, auth.hashes);
      };
      const txns: string[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await sign(i);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        txns.push(res.txn);
      }
      const oldPort = await redis.killMaster();
      const killedAt = Date.now();
      // signing does not wait for Redis: the records wait in the outbox while no master is known
      for (let i = 5; i < 10; i++) {
        const res = await sign(i);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        txns.push(res.txn);
      }
      const promotedMs = await redis.waitForNewMaster(oldPort);
      const ids = (await Promise.all(txns.map((txn) => referenceIdsOf(env, txn)))).flat();
      assert.equal(ids.length, 10);
      const store = env.qtsp.deps.store;
      await waitFor(
        'every record delivered',
        async () => (await Promise.all(ids.map((id) => store.getOutbox(id)))).every((e) => e?.state === 'delivered'),
        60_000,
        200,
      );
      t.diagnostic(`promotion ${promotedMs} ms after the kill; all delivered ${Date.now() - killedAt} ms after it`);
      const held = env.sandbox.mediation.records().filter((r) => ids.includes(r.record.reference_id));
      assert.equal(held.length, 10);
      assert.equal(new Set(held.map((r) => r.record.reference_id)).size, 10, 'a record was stored twice');
      await redis.restartKilled();
    });
  });
});
