/**
 * http/cluster-ops.ts: the cluster primary's /metrics and /health/ready from its workers' answers over IPC.
 * The workers here are stand-ins that answer like ops.ts does in a worker (or stay silent, or end).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Worker } from 'node:cluster';
import { EventEmitter } from 'node:events';
import type { Registry } from 'prom-client';
import { type ClusterWorker, clusterOps } from '../../../src/http/cluster-ops.ts';
import { createMetrics } from '../../../src/http/metrics.ts';
import type { OpsAnswer, OpsQuestion, ReadinessAnswer } from '../../../src/http/ops.ts';

interface StandIn {
  readiness?: ReadinessAnswer;
  registry?: Registry;
  /** answers nothing */
  silent?: boolean;
}

/** A worker that answers the primary's questions from `state` (read at each question). */
function standIn(slot: number, state: StandIn): ClusterWorker & { state: StandIn } {
  const worker = new EventEmitter() as EventEmitter & { send: Worker['send'] };
  worker.send = ((question: OpsQuestion) => {
    if (state.silent) return true;
    void (async () => {
      const reply: OpsAnswer =
        question.about === 'readiness'
          ? { type: 'qtsp-ops-answer', id: question.id, readiness: state.readiness! }
          : { type: 'qtsp-ops-answer', id: question.id, metrics: await state.registry!.getMetricsAsJSON() };
      // over IPC the answer arrives serialised
      worker.emit('message', JSON.parse(JSON.stringify(reply)));
    })();
    return true;
  }) as Worker['send'];
  return { slot, worker: worker as unknown as Worker, state };
}

const READY: ReadinessAnswer = { ready: true, reasons: [] };

function seriesValue(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test('readiness: not ready before a worker listens; ready when every listening worker is', async () => {
  const workers: ClusterWorker[] = [];
  const ops = clusterOps({ listening: () => workers, expected: 2, metricsTimeoutMs: 1000 });
  assert.deepEqual(await ops.readiness(), { ready: false, reasons: ['cluster: no worker process listens yet'] });
  workers.push(standIn(0, { readiness: READY }));
  const one = await ops.readiness();
  assert.equal(one.ready, true, 'one listening worker serves signDoc');
  assert.match(one.reasons.join('\n'), /cluster: 1 of 2 worker processes listen/);
  workers.push(standIn(1, { readiness: READY }));
  assert.deepEqual(await ops.readiness(), READY);
});

test('readiness: a reason of every worker is named once; one of some workers names them and is not ready', async () => {
  const shared = 'IDP directory failing (reset); cached answers serve for at most 3600 s';
  const workers = [
    standIn(0, { readiness: { ready: true, reasons: [shared] } }),
    standIn(1, { readiness: { ready: false, reasons: [shared, 'signing keys: the issuing CA key does not sign'] } }),
  ];
  const ops = clusterOps({ listening: () => workers, expected: 2, metricsTimeoutMs: 1000 });
  assert.deepEqual(await ops.readiness(), {
    ready: false,
    reasons: [shared, 'worker 1: signing keys: the issuing CA key does not sign'],
  });
});

test('readiness: a silent worker counts with its last answer; one that never answered is not ready', async () => {
  const busy = standIn(0, { readiness: READY });
  const ops = clusterOps({ listening: () => [busy], expected: 1, metricsTimeoutMs: 1000 });
  assert.deepEqual(await ops.readiness(), READY);
  busy.state.silent = true;
  assert.deepEqual(await ops.readiness(), READY, 'its last answer');
  const mute = standIn(0, { silent: true });
  const never = await clusterOps({ listening: () => [mute], expected: 1, metricsTimeoutMs: 1000 }).readiness();
  assert.equal(never.ready, false);
  assert.match(never.reasons.join('\n'), /worker 0 did not answer the readiness question \(no answer in time\)/);
});

test('metrics: counters and histograms summed, each process’s default metrics under its worker label', async () => {
  const a = createMetrics();
  const b = createMetrics({ defaultMetrics: true });
  a.requests.inc({ status: '200' }, 3);
  b.requests.inc({ status: '200' }, 4);
  b.requests.inc({ status: '503' });
  a.duration.observe({ status: '200' }, 0.2);
  b.duration.observe({ status: '200' }, 0.3);
  const workers = [standIn(0, { registry: a.registry }), standIn(1, { registry: b.registry })];
  const ops = clusterOps({
    listening: () => workers,
    expected: 2,
    metricsTimeoutMs: 1000,
    defaultLabels: { qtsp_instance: 'q1' },
  });
  const text = await ops.metrics();
  assert.equal(seriesValue(text, 'qtsp_signdoc_requests_total{status="200"}'), 7);
  assert.equal(seriesValue(text, 'qtsp_signdoc_requests_total{status="503"}'), 1);
  assert.equal(seriesValue(text, 'qtsp_signdoc_duration_seconds_count{status="200"}'), 2);
  assert.equal(seriesValue(text, 'qtsp_signdoc_duration_seconds_bucket{le="0.25",status="200"}'), 1);
  assert.match(text, /^nodejs_heap_size_used_bytes\{worker="1"\} \d/m);
  assert.match(text, /^nodejs_heap_size_used_bytes\{qtsp_instance="q1",worker="primary"\} \d/m);
  assert.doesNotMatch(text, /^nodejs_heap_size_used_bytes\{worker="0"\}/m, 'worker 0 collects no default metrics');
  assert.match(text, /^process_start_time_seconds\{worker="1"\} \d/m, 'kept per worker, not omitted');
});

test('metrics: a worker that ended is left out; a silent one fails the scrape rather than serve a partial sum', async () => {
  const a = createMetrics();
  a.requests.inc({ status: '200' }, 2);
  const ended = standIn(1, { silent: true });
  const workers = [standIn(0, { registry: a.registry }), ended];
  const ops = clusterOps({ listening: () => workers, expected: 2, metricsTimeoutMs: 300 });
  const scrape = ops.metrics();
  setImmediate(() => ended.worker.emit('exit', 0, null));
  assert.equal(seriesValue(await scrape, 'qtsp_signdoc_requests_total{status="200"}'), 2);
  workers[1] = standIn(1, { silent: true });
  await assert.rejects(ops.metrics(), /no metrics: worker 1 \(no answer in time\); a partial sum is not served/);
});
