/**
 * `qtsp serve` with server.workers=2: the primary serves the operations port for both workers. A scrape returns
 * the sum of both workers' signDoc counters and every process's default metrics under a `worker` label;
 * readiness is the workers'. Real processes, real PostgreSQL, real mutual TLS.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { httpRequest, jsonBody } from '../../src/util/http-client.ts';
import { sha256b64, waitFor } from '../helpers/delivery.ts';
import { alive, startServeFleet, type ServeFleet, type ServeProcess } from '../helpers/instances.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { signThroughSandbox } from '../helpers/signing.ts';

const CALLS = 12;
const AT_ONCE = 4;

/** the cluster's workers: child processes of `pid` that run its command line (not a short-lived helper), from /proc */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  let command: string;
  try {
    command = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return out; // the primary has ended
  }
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== pid) continue;
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8') === command) out.push(Number(name));
    } catch {
      // ended while we looked
    }
  }
  return out;
}

/** the value of the one series `name{labels}` in a Prometheus text, or undefined */
function seriesValue(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** the `worker` label values of the series of metric `name` */
function workersOf(text: string, name: string): string[] {
  const lines = text.split('\n').filter((l) => l.startsWith(`${name}{`));
  return [...new Set(lines.map((l) => /[{,]worker="([^"]+)"/.exec(l)?.[1]).filter((w) => w !== undefined))].sort();
}

describe('metrics and readiness of qtsp serve with two worker processes', () => {
  let fleet: ServeFleet;
  let pg: PostgresServer;
  let serve: ServeProcess | undefined;

  before(async () => {
    fleet = await startServeFleet((s) => childrenOf(s.pid));
    pg = await startPostgres();
    const url = await pg.freshSchemaUrl();
    const extra = {
      QTSP_SERVER_WORKERS: '2',
      QTSP_LOG_LEVEL: process.env.DEBUG_LOG ?? 'silent',
      QTSP_DELIVERY_IN_PROCESS_WORKER: 'false',
    };
    serve = await fleet.spawn(fleet.instanceEnv('pg-cluster-metrics', { store: { driver: 'postgres', url }, extra }));
  });
  after(async () => {
    await fleet?.close();
    await pg?.stop();
  });

  const scrape = async (): Promise<string> => {
    const res = await httpRequest(`${serve!.opsUrl}/metrics`, { timeoutMs: 20_000 });
    assert.equal(res.status, 200, res.body.toString());
    return res.body.toString();
  };
  const readiness = async () => {
    const res = await httpRequest(`${serve!.opsUrl}/health/ready`, { timeoutMs: 10_000 });
    return { status: res.status, body: jsonBody(res) as { status: string; reasons: string[] } };
  };
  // a new connection each: the primary hands connections to the workers in turn
  const signOnce = (label: string) =>
    signThroughSandbox(fleet.shared, [sha256b64(label)], { signDocUrl: serve!.signDocUrl });

  it('sums both workers’ signDoc counters, labels each process’s default metrics, and is ready when both are', async () => {
    const s = serve!;
    assert.match(s.output(), /\(2 processes\)/);
    assert.equal((await httpRequest(`${s.opsUrl}/health/live`, { timeoutMs: 10_000 })).status, 200);
    const ready = await waitFor(
      'both workers ready',
      async () => ((await readiness()).status === 200 ? true : undefined),
      60_000,
    );
    assert.ok(ready);
    assert.deepEqual((await readiness()).body, { status: 'ready', reasons: [] });

    const statuses: number[] = [];
    for (let i = 0; i < CALLS; i += AT_ONCE) {
      const batch = await Promise.all(Array.from({ length: AT_ONCE }, (_, j) => signOnce(`metrics ${i + j}`)));
      statuses.push(...batch.map((r) => r.status));
    }
    assert.deepEqual(statuses, Array(CALLS).fill(200));

    const text = await scrape();
    assert.equal(seriesValue(text, 'qtsp_signdoc_requests_total{status="200"}'), CALLS, 'the sum of both workers');
    assert.equal(seriesValue(text, 'qtsp_signdoc_duration_seconds_count{status="200"}'), CALLS);
    assert.equal(seriesValue(text, 'qtsp_signatures_created_total'), CALLS);
    assert.equal(seriesValue(text, 'qtsp_ready'), 1, 'every worker ready');
    assert.equal(seriesValue(text, 'qtsp_store_up'), 1);
    // per process: a sum of heaps or event-loop lags means nothing
    for (const name of ['nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_seconds', 'process_resident_memory_bytes'])
      assert.deepEqual(workersOf(text, name), ['0', '1', 'primary'], name);
    assert.doesNotMatch(text, /^qtsp_\w+\{[^}]*worker=/m, 'the service metrics are the cluster’s, not a worker’s');

    // killing a worker leaves the other's count alone in the sum: both served some of the calls
    const workers = childrenOf(s.pid);
    assert.equal(workers.length, 2);
    process.kill(workers[0]!, 'SIGKILL');
    await waitFor('the killed worker to end', () => !alive(workers[0]!));
    const survivor = seriesValue(await scrape(), 'qtsp_signdoc_requests_total{status="200"}') ?? 0;
    assert.ok(survivor > 0 && survivor < CALLS, `the surviving worker served ${survivor} of ${CALLS}`);

    // its replacement takes the same worker label, and readiness is both workers' again (while it starts, the
    // survivor alone makes the cluster ready, with a reason naming the one starting)
    await waitFor(
      'the replacement worker to listen and be ready',
      async () => {
        const r = await readiness();
        return r.status === 200 && r.body.reasons.length === 0 ? true : undefined;
      },
      60_000,
    );
    assert.equal(childrenOf(s.pid).filter((w) => w !== workers[0]).length, 2);
    const again = await scrape();
    assert.deepEqual(workersOf(again, 'nodejs_heap_size_used_bytes'), ['0', '1', 'primary']);
    assert.equal(
      seriesValue(again, 'qtsp_signdoc_requests_total{status="200"}'),
      survivor,
      'the replacement counts from 0',
    );

    const all = childrenOf(s.pid);
    s.child.kill('SIGTERM');
    assert.deepEqual(await s.exited, { code: 0, signal: null }, s.output().slice(-2000));
    for (const w of all) assert.equal(alive(w), false, `worker ${w} ended with the primary`);
  });
});
