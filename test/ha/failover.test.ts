/**
 * The QTSP highly available (docs/operations.md: Running it highly available), run by `npm run test:ha`:
 * etcd, two PostgreSQL nodes under Patroni with synchronous replication (docker/ha/patroni.yml) behind HAProxy
 * (docker/ha/haproxy-postgres.cfg), Redis with one replica and three sentinels, two `qtsp serve` instances
 * behind HAProxy (docker/haproxy.cfg), a `qtsp worker`, the sandbox, and two relying parties signing in a loop.
 *
 * Scenarios, each under load: (a) the PostgreSQL leader killed (Patroni and postmaster); (b) a planned
 * switchover; (c) the old leader back as a replica (pg_rewind); (d) the Redis master killed; (e) (a) and (d)
 * at once. After each, counted over everything signed so far: every returned signature has its evidence row,
 * its sealed `signing.returned` journal entry and exactly one delivered mediation record; nothing is kept,
 * journaled or billed for a consent whose signature was never returned; no 5xx but 503 (each with
 * Retry-After); `qtsp evidence audit` clean (one chain). Times: kill to promotion, kill to the first 200.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import pg from 'pg';
import { referenceId } from '../../src/mediation/record.ts';
import { openStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/types.ts';
import { httpRequest } from '../../src/util/http-client.ts';
import { waitFor } from '../helpers/delivery.ts';
import { backendStatus, choosePorts, startHaproxy, type Ports } from '../helpers/haproxy.ts';
import { spawnServe, startSharedParts, type ServeProcess, type SharedParts } from '../helpers/instances.ts';
import { startPatroniCluster, type PatroniCluster } from '../helpers/patroni.ts';
import { qtsp, QTSP_BIN } from '../helpers/qtsp-cli.ts';
import { startSentinelRedis, type SentinelRedis } from '../helpers/redis-sentinel.ts';
import { startLoad, type Call } from './load.ts';

const RPS = 2;
const BEFORE_FAULT_MS = 3000;
const AFTER_RECOVERY_MS = 5000;

interface Outcome {
  readonly promotedMs?: number;
}

describe('highly available: Patroni, Sentinel, two instances, under load', { timeout: 1_800_000 }, () => {
  let cluster: PatroniCluster;
  let redis: SentinelRedis;
  let ports: Ports;
  let shared: SharedParts;
  let haproxy: ReturnType<typeof startHaproxy>;
  let worker: ChildProcess;
  let store: Store;
  const instances: ServeProcess[] = [];
  const envs: Record<string, string>[] = [];
  const allCalls: Call[] = [];
  const table: string[] = [];
  let workerOutput = () => '';
  let workerRestarts = 0;
  let stopping = false;

  before(async () => {
    cluster = await startPatroniCluster();
    redis = await startSentinelRedis();
    ports = await choosePorts();
    shared = await startSharedParts({
      signDocUrl: `https://127.0.0.1:${ports.lb}/signDoc`,
      publicBaseUrl: `http://127.0.0.1:${ports.lbPublication}`,
    });
    const common = {
      QTSP_REDIS_URL: '',
      QTSP_REDIS_SENTINELS: redis.sentinels.join(','),
      QTSP_REDIS_SENTINEL_NAME: redis.name,
      QTSP_REDIS_COMMAND_TIMEOUT_MS: '500',
      QTSP_DELIVERY_IN_PROCESS_WORKER: 'false',
      QTSP_DELIVERY_RELAY_INTERVAL_MS: '200',
      QTSP_JOURNAL_SEAL_INTERVAL_SECONDS: '2',
      QTSP_STORE_PING_INTERVAL_MS: '1000',
      QTSP_LOG_LEVEL: 'info',
    };
    const store_ = { driver: 'postgres' as const, url: cluster.url };
    for (const i of [0, 1]) {
      envs.push(
        shared.instanceEnv(`qtsp${i + 1}`, {
          port: ports.signDoc[i]!,
          publicationPort: ports.publication[i]!,
          opsPort: ports.ops[i]!,
          store: store_,
          extra: { ...common, QTSP_INSTANCE_ID: `qtsp${i + 1}` },
        }),
      );
    }
    instances.push(await spawnServe(envs[0]!));
    instances.push(await spawnServe(envs[1]!));
    const workerEnv = shared.instanceEnv('worker', {
      port: 0,
      publicationPort: 0,
      store: store_,
      extra: { ...common, QTSP_DELIVERY_BACKOFF_MS: '200' },
    });
    // run as an operator runs it, under a supervisor that starts it again when it exits (systemd Restart=,
    // compose restart: unless-stopped): a worker that meets the store failing over at its start exits with
    // the error, as `qtsp serve` does, and is started again
    let out = '';
    const collect = (d: Buffer) => (out = (out + d.toString()).slice(-50_000));
    const startWorker = () => {
      worker = spawn(process.execPath, [QTSP_BIN, 'worker'], {
        env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', QTSP_LOG_LEVEL: 'info', ...workerEnv },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      worker.stdout!.on('data', collect);
      worker.stderr!.on('data', collect);
      worker.once('exit', (code, signal) => {
        if (stopping) return;
        workerRestarts++;
        collect(Buffer.from(`[supervisor] qtsp worker exited (${code ?? signal}); starting it again\n`));
        setTimeout(startWorker, 1000);
      });
    };
    startWorker();
    workerOutput = () => out;
    haproxy = startHaproxy(ports);
    await waitFor(
      'HAProxy to see both instances ready',
      async () => {
        const s = await backendStatus(ports, 'qtsp_signdoc');
        return s.get('qtsp1') === 'UP' && s.get('qtsp2') === 'UP';
      },
      60_000,
      200,
    );
    store = await openStore({
      dataDir: shared.root,
      store: { driver: 'postgres', url: cluster.url, pingIntervalMs: 5000 },
    });
  });

  after(async () => {
    if (table.length) console.log(['scenario results:', ...table].join('\n'));
    for (const i of instances) if (i.child.exitCode === null) i.child.kill('SIGTERM');
    await Promise.all(instances.map((i) => i.exited));
    stopping = true;
    worker?.kill('SIGTERM');
    haproxy?.child.kill('SIGTERM');
    await store?.close();
    await shared?.close();
    await redis?.close();
    await cluster?.close();
  });

  /** the store's rows, read straight from the current primary */
  async function query<T extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<T[]> {
    const client = new pg.Client({ connectionString: cluster.url });
    client.on('error', () => undefined);
    await client.connect();
    try {
      return (await client.query<T>(sql, params)).rows;
    } finally {
      await client.end();
    }
  }

  async function readiness(): Promise<number | undefined> {
    try {
      return (await httpRequest(`${instances[0]!.opsUrl}/health/ready`, { timeoutMs: 3000 })).status;
    } catch {
      return undefined;
    }
  }

  /** the load, a fault, the load until signing is back and a little longer; then every count */
  async function scenario(name: string, fault: () => Promise<Outcome>, expectNotReady: boolean) {
    const load = startLoad(shared.endpoints, `https://127.0.0.1:${ports.lb}/signDoc`, RPS, name);
    await new Promise((r) => setTimeout(r, BEFORE_FAULT_MS));
    let notReady = false;
    let watching = true;
    const watch = (async () => {
      while (watching) {
        if ((await readiness()) !== 200) notReady = true;
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    const faultAt = Date.now();
    const outcome = await fault();
    const firstOk = await waitFor(
      'a 200 for a call started after the fault',
      () => load.calls.find((c) => c.status === 200 && c.startedAt >= faultAt),
      120_000,
      100,
    );
    await new Promise((r) => setTimeout(r, AFTER_RECOVERY_MS));
    await load.stop();
    watching = false;
    await watch;
    allCalls.push(...load.calls);
    const counts = await checkEverything();
    const statuses = new Map<number, number>();
    for (const c of load.calls) statuses.set(c.status, (statuses.get(c.status) ?? 0) + 1);
    const row =
      `${name}: ${load.calls.length} calls, ${statuses.get(200) ?? 0} x 200, ${statuses.get(503) ?? 0} x 503, ` +
      `other ${
        [...statuses]
          .filter(([s]) => s !== 200 && s !== 503)
          .map(([s, n]) => `${n} x ${s}`)
          .join(', ') || 'none'
      }; ` +
      `promotion ${outcome.promotedMs ?? '-'} ms, first 200 ${firstOk.endedAt - faultAt} ms after the fault; ` +
      `readiness ${notReady ? 'went not ready' : 'stayed ready'}; worker restarts so far ${workerRestarts}; ` +
      `totals: ${counts}`;
    table.push(row);
    const odd = load.calls.filter((c) => c.status !== 200 && c.status !== 503);
    assert.deepEqual(odd, [], `no answer but 200 or 503 (and no connection cut)`);
    for (const c of load.calls.filter((x) => x.status === 503)) assert.ok(c.retryAfter, 'a 503 has Retry-After');
    assert.equal(load.unfinished(), 0, 'every consent got its signature back');
    if (expectNotReady) assert.ok(notReady, 'readiness went not ready while no primary took writes');
    return row;
  }

  /**
   * every returned signature = one kept signature = one `signing.returned` entry = one delivered record, and no
   * more. Evidence rows (the certificate issued for an authorized signing) may outnumber them: a signing cut by
   * the failover after its certificate was recorded and before its signatures were kept returned nothing and
   * billed nothing; its consent's retry signed anew. Those are counted, not refused.
   */
  async function checkEverything(): Promise<string> {
    const returned = allCalls.filter((c) => c.status === 200);
    const txns = [...new Set(returned.map((c) => c.txn!))];
    assert.equal(txns.length, returned.length, 'each consent returned its signature once');
    const kept = await query<{ txn: string }>('SELECT txn FROM signed_documents WHERE signature IS NOT NULL');
    assert.deepEqual(kept.map((k) => k.txn).sort(), [...txns].sort(), 'one kept signature per returned signature');
    const entries = (
      await query<{ ref: string; body: string }>(
        "SELECT ref, body FROM journal_entries WHERE kind = 'signing.returned'",
      )
    ).map((r) => ({ ref: r.ref, txn: (JSON.parse(r.body) as { data: { txn: string } }).data.txn }));
    assert.deepEqual(entries.map((e) => e.txn).sort(), [...txns].sort(), 'one signing.returned entry per returned one');
    const rows = (await Promise.all(txns.map((t) => store.getTransaction(t)))).flat();
    const evidence = new Set(rows.map((r) => r.certificateSerialHex));
    for (const e of entries) assert.ok(evidence.has(e.ref), `the returned signing ${e.ref} has its evidence row`);
    const all = await query<{ n: string }>('SELECT count(*) AS n FROM signing_transactions');
    assert.equal(Number(all[0]!.n), rows.length, 'no evidence for a consent whose signature never came back');
    const ids = new Set(entries.map((e) => referenceId(e.txn, e.ref)));
    await waitFor(
      'every mediation record delivered',
      async () => {
        const outbox = await Promise.all([...ids].map((id) => store.getOutbox(id)));
        return outbox.every((e) => e?.state === 'delivered');
      },
      120_000,
      250,
    ).catch(async (err: Error) => {
      const outbox = await Promise.all([...ids].map((id) => store.getOutbox(id)));
      const waiting = outbox.filter((e) => e?.state !== 'delivered');
      const states = waiting.map((e) => `${e?.state}/${e?.attempts}/${e?.lastError}/${e?.updatedAt.toISOString()}`);
      const logs = instances.map((i, n) => `qtsp${n + 1}:\n${i.output().slice(-3000)}`).join('\n');
      throw new Error(`${err.message}: ${states.join('; ')}\nworker:\n${workerOutput().slice(-3000)}\n${logs}`);
    });
    const held = shared.sandbox.mediation.records();
    assert.equal(held.length, ids.size, 'no record billed but for a returned signature');
    assert.equal(new Set(held.map((r) => r.record.reference_id)).size, ids.size, 'no record twice');
    for (const r of held) assert.ok(ids.has(r.record.reference_id), 'a record for a signature never returned');
    const audit = await qtsp(['evidence', 'audit'], {
      QTSP_DATA_DIR: envs[0]!.QTSP_DATA_DIR!,
      QTSP_STORE_DRIVER: 'postgres',
      QTSP_STORE_URL: cluster.url,
    });
    assert.equal(audit.code, 0, `qtsp evidence audit: ${audit.stdout}${audit.stderr}`);
    return (
      `${returned.length} returned = ${kept.length} kept = ${entries.length} journal entries = ${held.length} ` +
      `records delivered once; ${rows.length - returned.length} more evidence rows of signings cut by a failover`
    );
  }

  it('(a) the PostgreSQL leader killed', async (t) => {
    const row = await scenario(
      'a leader killed',
      async () => {
        const leader = await waitFor('the leader', () => cluster.leader(), 60_000, 500);
        await cluster.kill(leader);
        return { promotedMs: await cluster.waitNewLeader(leader.name) };
      },
      true,
    );
    t.diagnostic(row);
  });

  it('(c) the old leader back as a replica (pg_rewind)', async (t) => {
    const row = await scenario(
      'c old leader rejoins',
      async () => {
        const down = cluster.nodes.find((n) => !n.running())!;
        await cluster.restart(down);
        await cluster.waitHealthy();
        return {};
      },
      false,
    );
    t.diagnostic(row);
  });

  it('(b) a planned switchover', async (t) => {
    const row = await scenario(
      'b switchover',
      async () => {
        const { from } = await cluster.switchover();
        const promotedMs = await cluster.waitNewLeader(from);
        return { promotedMs };
      },
      false,
    );
    await cluster.waitHealthy();
    t.diagnostic(row);
  });

  it('(d) the Redis master killed', async (t) => {
    const row = await scenario(
      'd redis master killed',
      async () => {
        const old = await redis.killMaster();
        return { promotedMs: await redis.waitForNewMaster(old) };
      },
      false,
    );
    await redis.restartKilled();
    t.diagnostic(row);
  });

  it('(e) the PostgreSQL leader and the Redis master killed at once', async (t) => {
    const row = await scenario(
      'e both killed',
      async () => {
        const leader = await waitFor('the leader', () => cluster.leader(), 60_000, 500);
        const [old] = await Promise.all([redis.killMaster(), cluster.kill(leader)]);
        const [pgMs, redisMs] = await Promise.all([cluster.waitNewLeader(leader.name), redis.waitForNewMaster(old)]);
        return { promotedMs: Math.max(pgMs, redisMs) };
      },
      true,
    );
    t.diagnostic(row);
  });
});
