/**
 * The operations endpoints of a cluster primary (server.workers > 1): it alone listens on the ops port and
 * answers from its workers, asked over IPC (ops.ts answers in each worker).
 * - /metrics: every listening worker's metrics, aggregated (http/metrics.ts aggregateProcesses), with the
 *   primary's own process metrics under worker="primary"; the status page (GET /) reads the same. A worker
 *   that does not answer fails the scrape (503): a sum without it would drop, and Prometheus reads a counter
 *   that drops as a reset.
 * - /health/ready: ready when at least one worker listens and every listening worker is ready: the cluster
 *   hands a signDoc to any of them. A worker that is slow to answer counts with its last answer for a while.
 */
import type { Worker } from 'node:cluster';
import { aggregateProcesses, processMetrics, type MetricsJson } from './metrics.ts';
import type { OpsAnswer, OpsAnswers, OpsQuestion, ReadinessAnswer } from './ops.ts';

/** A worker the primary may ask: it listens; `slot` (0..workers-1) is its `worker` label. */
export interface ClusterWorker {
  readonly slot: number;
  readonly worker: Worker;
}

export interface ClusterOpsOptions {
  /** the workers that listen now */
  listening(): readonly ClusterWorker[];
  /** server.workers */
  readonly expected: number;
  /** how long a scrape waits for a worker (it refreshes its gauges first, bounded by ops.metricsTimeoutMs) */
  readonly metricsTimeoutMs: number;
  /** labels of every series, as the workers' (qtsp_instance) */
  readonly defaultLabels?: Record<string, string>;
}

/** the readiness report is read without I/O: a worker that does not answer within this is busy or stuck */
const READINESS_TIMEOUT_MS = 1000;
/** how long a busy worker's last readiness answer still counts */
const READINESS_STALE_MS = 10_000;

type Asked = { readonly answer: OpsAnswer } | 'gone' | 'silent';

let nextQuestion = 0;

/** Asks one worker; 'gone' when it exits or its channel is closed, 'silent' when it does not answer in time. */
function ask(worker: Worker, about: OpsQuestion['about'], timeoutMs: number): Promise<Asked> {
  const id = nextQuestion++;
  return new Promise((resolve) => {
    const done = (asked: Asked) => {
      clearTimeout(timer);
      worker.off('message', onMessage);
      worker.off('exit', onExit);
      resolve(asked);
    };
    const onMessage = (msg: OpsAnswer) => {
      if (msg?.type === 'qtsp-ops-answer' && msg.id === id) done({ answer: msg });
    };
    const onExit = () => done('gone');
    const timer = setTimeout(() => done('silent'), timeoutMs);
    worker.on('message', onMessage);
    worker.once('exit', onExit);
    worker.send({ type: 'qtsp-ops-question', id, about } satisfies OpsQuestion, (err) => {
      if (err) done('gone');
    });
  });
}

export function clusterOps(options: ClusterOpsOptions): OpsAnswers {
  const own = processMetrics(options.defaultLabels);
  const readiness = readinessOfWorkers(options);
  const gathered = async () => {
    const workers = options.listening();
    const asked = await Promise.all(workers.map((w) => ask(w.worker, 'metrics', options.metricsTimeoutMs)));
    const processes: { worker: string; metrics: MetricsJson }[] = [
      { worker: 'primary', metrics: await own.getMetricsAsJSON() },
    ];
    const missing: string[] = [];
    workers.forEach((w, i) => {
      const a = asked[i]!;
      if (a === 'gone') return; // it ended during the scrape: its series end with it
      if (a === 'silent' || !a.answer.metrics) missing.push(`worker ${w.slot} (${describe(a)})`);
      else processes.push({ worker: String(w.slot), metrics: a.answer.metrics });
    });
    if (missing.length > 0) throw new Error(`no metrics: ${missing.join(', ')}; a partial sum is not served`);
    return aggregateProcesses(processes);
  };
  return {
    readiness,
    contentType: own.contentType,
    metrics: async () => (await gathered()).metrics(),
    metricsJson: async () => (await gathered()).getMetricsAsJSON(),
  };
}

function describe(asked: Asked): string {
  if (asked === 'silent') return 'no answer in time';
  if (asked === 'gone') return 'ended';
  return asked.answer.error ?? 'no metrics in its answer';
}

/** /health/ready of the cluster: each listening worker asked, their answers combined. */
function readinessOfWorkers(options: ClusterOpsOptions): () => Promise<ReadinessAnswer> {
  const last = new WeakMap<Worker, { readonly report: ReadinessAnswer; readonly at: number }>();
  const reportOf = (w: ClusterWorker, asked: Asked): ReadinessAnswer | undefined => {
    if (asked === 'gone') return undefined;
    if (asked !== 'silent' && asked.answer.readiness) {
      last.set(w.worker, { report: asked.answer.readiness, at: Date.now() });
      return asked.answer.readiness;
    }
    const before = last.get(w.worker);
    if (before && Date.now() - before.at < READINESS_STALE_MS) return before.report;
    return { ready: false, reasons: [`worker ${w.slot} did not answer the readiness question (${describe(asked)})`] };
  };
  return async () => {
    const workers = options.listening();
    const asked = await Promise.all(workers.map((w) => ask(w.worker, 'readiness', READINESS_TIMEOUT_MS)));
    const reports: { slot: number; report: ReadinessAnswer }[] = [];
    workers.forEach((w, i) => {
      const report = reportOf(w, asked[i]!);
      if (report) reports.push({ slot: w.slot, report });
    });
    return combined(reports, options.expected);
  };
}

/**
 * Ready when some worker listens and every one that does is ready. A reason every worker gives is named once;
 * one that only some give names them.
 */
function combined(reports: readonly { slot: number; report: ReadinessAnswer }[], expected: number): ReadinessAnswer {
  if (reports.length === 0) return { ready: false, reasons: ['cluster: no worker process listens yet'] };
  const reasons: string[] = [];
  if (reports.length < expected)
    reasons.push(`cluster: ${reports.length} of ${expected} worker processes listen; the others are starting`);
  const slotsOf = new Map<string, Set<number>>();
  for (const { slot, report } of reports)
    for (const reason of report.reasons) slotsOf.set(reason, (slotsOf.get(reason) ?? new Set()).add(slot));
  for (const [reason, slots] of slotsOf)
    reasons.push(slots.size === reports.length ? reason : `worker ${[...slots].join(', ')}: ${reason}`);
  return { ready: reports.every((r) => r.report.ready), reasons };
}
