/**
 * `qtsp serve` with server.workers: one process per worker on one port, sharing PostgreSQL
 * and Redis; refused on the SQLite store. Real processes, real PostgreSQL, real mutual TLS.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { callSignDoc } from '../../src/rp/flow.ts';
import { openStore } from '../../src/store/open.ts';
import { authorize, sha256b64, signDocBody, waitFor } from '../helpers/delivery.ts';
import {
  alive,
  spawnServe,
  startSharedPartsOnFreePorts,
  type ServeProcess,
  type SharedParts,
} from '../helpers/instances.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';

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
  let shared: SharedParts;
  let pg: PostgresServer;
  let port: number;
  let publicationPort: number;
  const started: ServeProcess[] = [];

  before(async () => {
    ({ shared, port, publicationPort } = await startSharedPartsOnFreePorts());
    pg = await startPostgres();
  });
  after(async () => {
    for (const s of started) {
      for (const w of childrenOf(s.pid)) if (alive(w)) process.kill(w, 'SIGKILL');
      if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
    }
    await pg?.stop();
    await shared?.close();
  });

  it('refuses several workers on the SQLite store, naming the setting and what would work', async () => {
    const env = shared.instanceEnv('sqlite-cluster', { port, publicationPort, extra: { QTSP_SERVER_WORKERS: '2' } });
    await assert.rejects(spawnServe(env), (err: Error) => {
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
    const env = shared.instanceEnv('pg-cluster', { port, publicationPort, store: { driver: 'postgres', url }, extra });
    const serve = await spawnServe(env);
    started.push(serve);
    assert.match(serve.output(), /\(2 processes\)/);
    const workers = childrenOf(serve.pid);
    assert.equal(workers.length, 2, 'two worker processes');

    const signOnce = async (label: string) => {
      const auth = await authorize(shared.endpoints, [{ hash: sha256b64(label), label }]);
      return callSignDoc(serve.signDocUrl, shared.endpoints, signDocBody(auth.accessToken, auth.hashes)); // a new connection each: round robin
    };
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
