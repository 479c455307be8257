/**
 * `qtsp serve` with server.workers: one process per worker on one port, sharing PostgreSQL
 * and Redis; refused on the SQLite store. Real processes, real PostgreSQL, real mutual TLS.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { openStore } from '../../src/store/open.ts';
import { sha256b64, waitFor } from '../helpers/delivery.ts';
import { alive, startServeFleet, type ServeFleet } from '../helpers/instances.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { signThroughSandbox } from '../helpers/signing.ts';

/** the child processes of `pid` (the cluster's workers), from /proc */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(name));
    } catch {
      // ended while we looked
    }
  }
  return out;
}

describe('qtsp serve with several worker processes', () => {
  let fleet: ServeFleet;
  let pg: PostgresServer;

  before(async () => {
    fleet = await startServeFleet((serve) => childrenOf(serve.pid));
    pg = await startPostgres();
  });
  after(async () => {
    await fleet?.close();
    await pg?.stop();
  });

  it('refuses several workers on the SQLite store, naming the setting and what would work', async () => {
    const env = fleet.instanceEnv('sqlite-cluster', { extra: { QTSP_SERVER_WORKERS: '2' } });
    await assert.rejects(fleet.spawn(env), (err: Error) => {
      assert.match(err.message, /server\.workers \(QTSP_SERVER_WORKERS\): 2 processes need store\.driver postgres/);
      return true;
    });
  });

  it("serves signDoc from two processes on one port, every evidence row in PostgreSQL, the outbox relayed by the primary on the workers' wakes; a killed worker is replaced; SIGTERM stops all", async () => {
    const url = await pg.freshSchemaUrl();
    // relay passes only when woken: an entry handed over within seconds was announced by its worker over IPC
    const extra = {
      QTSP_SERVER_WORKERS: '2',
      QTSP_LOG_LEVEL: process.env.DEBUG_LOG ?? 'silent',
      QTSP_DELIVERY_RELAY_INTERVAL_MS: '600000',
      QTSP_DELIVERY_IN_PROCESS_WORKER: 'false',
    };
    const env = fleet.instanceEnv('pg-cluster', { store: { driver: 'postgres', url }, extra });
    const serve = await fleet.spawn(env);
    assert.match(serve.output(), /\(2 processes\)/);
    const workers = childrenOf(serve.pid);
    assert.equal(workers.length, 2, 'two worker processes');

    // a new connection each: round robin
    const signOnce = (label: string) =>
      signThroughSandbox(fleet.shared, [sha256b64(label)], { signDocUrl: serve.signDocUrl });
    const first = await Promise.all(Array.from({ length: 6 }, (_, i) => signOnce(`cluster ${i}`)));
    assert.deepEqual(
      first.map((r) => r.status),
      Array(6).fill(200),
      JSON.stringify(first.map((r) => r.body)),
    );

    process.kill(workers[0]!, 'SIGKILL');
    await waitFor('a replacement worker', () => {
      const now = childrenOf(serve.pid);
      return now.length === 2 && !now.includes(workers[0]!) ? now : undefined;
    });
    const second = await Promise.all(Array.from({ length: 4 }, (_, i) => signOnce(`after restart ${i}`)));
    assert.deepEqual(
      second.map((r) => r.status),
      Array(4).fill(200),
      JSON.stringify(second.map((r) => r.body)),
    );

    const store = await openStore({
      dataDir: env.QTSP_DATA_DIR!,
      store: { driver: 'postgres', url, pingIntervalMs: 5000 },
    });
    try {
      for (const r of [...first, ...second])
        assert.equal((await store.getTransaction(String(r.headers['x-transaction-id']))).length, 1);
      // no delivery workers run: every mediation record of the ten calls ends queued, none stays pending
      const counts = await waitFor(
        'the relay in the primary to hand over every record',
        async () => {
          const c = await store.outboxCounts('mediation');
          return c.pending === 0 && c.queued === 10 ? c : undefined;
        },
        10_000,
      );
      assert.equal(counts.delivered, 0);
    } finally {
      await store.close();
    }

    const all = childrenOf(serve.pid);
    serve.child.kill('SIGTERM');
    assert.deepEqual(await serve.exited, { code: 0, signal: null }, serve.output().slice(-2000));
    for (const w of all) assert.equal(alive(w), false, `worker ${w} ended with the primary`);
  });
});
