/**
 * Operator metrics in Prometheus text format (prom-client), served at GET /metrics. One registry per
 * service instance, so tests running several instances in one process do not share counters. The interface
 * is util/metrics.ts. With several worker processes (server.workers) the cluster primary serves the sum of
 * its workers' metrics (aggregateProcesses); each metric says how its values combine (prom-client's
 * `aggregator`, `sum` unless set).
 */
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Aggregator } from 'prom-client';
import type { Metrics } from '../util/metrics.ts';
import type { CalendarEntry } from '../ca/calendar.ts';

/**
 * How often the event-loop lag (prom-client's nodejs_eventloop_lag_*) is sampled: each sample is a timer that
 * wakes an idle process, and at prom-client's 10 ms those wakeups were most of an idle QTSP's CPU
 * (docs/performance.md). 20 samples a second still give a scrape hundreds to read percentiles from.
 */
export const EVENT_LOOP_SAMPLE_MS = 50;

export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics)
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  return {
    registry,
    requests: new Counter({
      name: 'qtsp_signdoc_requests_total',
      help: 'signDoc requests by HTTP status',
      labelNames: ['status'],
      registers: [registry],
    }),
    signatures: new Counter({
      name: 'qtsp_signatures_created_total',
      help: 'signatures created',
      registers: [registry],
    }),
    certificates: new Counter({
      name: 'qtsp_signer_certificates_issued_total',
      help: 'per-request signer certificates issued',
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'qtsp_signdoc_duration_seconds',
      help: 'signDoc latency',
      labelNames: ['status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
  };
}

/** What an on-call person needs to see, read once per scrape (service.ts gathers it). */
export interface OperationalSnapshot {
  /** per delivery topic; undefined counts when the store did not answer */
  readonly topics: Record<
    string,
    {
      readonly outbox?: Record<string, number>;
      /** createdAt of the oldest entry not delivered yet (pending or queued); null when none */
      readonly oldestUndelivered?: Date | null;
      /** undefined when Redis did not answer */
      readonly queue?: Record<string, number>;
    }
  >;
  readonly storeUp: boolean;
  readonly redisUp: boolean;
  readonly ready: boolean;
  /** seconds; undefined before the first good answer */
  readonly idpListAgeSeconds?: number;
  readonly keyArchiveHeadAgeSeconds?: number;
  readonly keyArchiveLastPullAgeSeconds?: number;
}

/**
 * Gauges of the operational state, set from one snapshot per scrape (`update` before `registry.metrics()`).
 * A value that could not be read is left out rather than reported as 0: an absent series alerts as "no
 * data", a false 0 would look healthy.
 */
export function operationalGauges(
  registry: Registry,
  snapshot: () => Promise<OperationalSnapshot>,
): { update(): Promise<void> } {
  // across worker processes (aggregateProcesses): the store and the queue are shared, so every worker reads the
  // same counts (max, not their sum); up and ready hold only when they hold in every worker (min); an age is the
  // stalest worker's (max: each worker pulls the IDP list and the key archive itself)
  const gauge = <L extends string>(name: string, help: string, aggregator: Aggregator, labelNames: readonly L[] = []) =>
    new Gauge<L>({ name, help, labelNames, aggregator, registers: [registry] });
  const outbox = gauge(
    'qtsp_outbox_entries',
    'outbox entries by delivery topic and state ' +
      '(pending: not handed to the queue yet; queued; delivered; failed: given up)',
    'max',
    ['topic', 'state'],
  );
  const oldest = gauge(
    'qtsp_outbox_oldest_undelivered_age_seconds',
    'age of the oldest outbox entry not delivered yet (pending or queued), 0 when none',
    'max',
    ['topic'],
  );
  const queue = gauge('qtsp_queue_jobs', 'jobs in the Redis delivery queue by state', 'max', ['topic', 'state']);
  const storeUp = gauge('qtsp_store_up', '1 when the evidence store commits a write, else 0', 'min');
  const redisUp = gauge('qtsp_redis_up', '1 when Redis answered the last queue query, else 0', 'min');
  const ready = gauge('qtsp_ready', '1 when /health/ready answers 200, else 0', 'min');
  const idpAge = gauge(
    'qtsp_idp_list_age_seconds',
    'time since the IDP directory list was last pulled successfully',
    'max',
  );
  const headAge = gauge(
    'qtsp_key_archive_head_age_seconds',
    'time since the verified key archive HEAD was committed',
    'max',
  );
  const pullAge = gauge(
    'qtsp_key_archive_last_pull_age_seconds',
    'time since the key archive was last pulled successfully',
    'max',
  );
  const optional = (g: Gauge, value: number | undefined) => (value === undefined ? g.reset() : g.set(value));
  return {
    async update() {
      const s = await snapshot();
      outbox.reset();
      oldest.reset();
      queue.reset();
      for (const [topic, t] of Object.entries(s.topics)) {
        for (const [state, n] of Object.entries(t.outbox ?? {})) outbox.set({ topic, state }, n);
        if (t.oldestUndelivered !== undefined)
          oldest.set(
            { topic },
            t.oldestUndelivered ? Math.max(0, (Date.now() - t.oldestUndelivered.getTime()) / 1000) : 0,
          );
        for (const [state, n] of Object.entries(t.queue ?? {})) queue.set({ topic, state }, n);
      }
      storeUp.set(s.storeUp ? 1 : 0);
      redisUp.set(s.redisUp ? 1 : 0);
      ready.set(s.ready ? 1 : 0);
      optional(idpAge, s.idpListAgeSeconds);
      optional(headAge, s.keyArchiveHeadAgeSeconds);
      optional(pullAge, s.keyArchiveLastPullAgeSeconds);
    },
  };
}

/**
 * The calendar of the long-lived material (ca/calendar.ts) as gauges, read at each scrape from the entries the
 * service keeps: one series per object, its end (notAfter, a CRL's nextUpdate) and, where it ends earlier, its
 * key's usage period, as Unix time (alert on `qtsp_pki_end_timestamp_seconds - time()`). Across workers the
 * earliest counts (min).
 */
export function pkiCalendarGauges(registry: Registry, entries: () => readonly CalendarEntry[]): void {
  new Gauge({
    name: 'qtsp_pki_end_timestamp_seconds',
    help: 'end of a long-lived certificate (notAfter) or CRL (nextUpdate), Unix time, by object',
    labelNames: ['object', 'renewed_by'],
    aggregator: 'min',
    registers: [registry],
    collect() {
      this.reset();
      for (const e of entries()) this.set({ object: e.object, renewed_by: e.renewedBy }, e.endsAt.getTime() / 1000);
    },
  });
  new Gauge({
    name: 'qtsp_pki_key_usage_end_timestamp_seconds',
    help: 'end of the usage period of a long-lived key, where it ends before its certificate, Unix time, by object',
    labelNames: ['object'],
    aggregator: 'min',
    registers: [registry],
    collect() {
      this.reset();
      for (const e of entries())
        if (e.keyUsageEndsAt) this.set({ object: e.object }, e.keyUsageEndsAt.getTime() / 1000);
    },
  });
}

/** One process's metrics as prom-client reads them (`Registry.getMetricsAsJSON`): what a worker sends over IPC. */
export type MetricsJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/** prom-client's default metrics (event-loop lag, memory, heap, CPU, handles) describe one process each. */
const PER_PROCESS = /^(process|nodejs)_/;

/**
 * The metrics of a cluster's processes as one registry (prom-client's AggregatorRegistry.aggregate): counters
 * and histograms summed, the operational gauges combined as each declares, and every process's default
 * metrics kept apart under a `worker` label (a sum of event-loop lags or heaps means nothing).
 */
export function aggregateProcesses(processes: readonly { worker: string; metrics: MetricsJson }[]): Registry {
  const labelled = processes.map(({ worker, metrics }) =>
    metrics.map((metric) =>
      PER_PROCESS.test(metric.name)
        ? {
            ...metric,
            // one series per worker: nothing left to combine, and nothing omitted (the start time's own is 'omit')
            aggregator: 'first' as const,
            values: metric.values.map((v) => ({ ...v, labels: { ...v.labels, worker } })),
          }
        : metric,
    ),
  );
  return AggregatorRegistry.aggregate(labelled);
}

/** The default metrics of a process that counts nothing else (the cluster primary), labelled like the workers'. */
export function processMetrics(defaultLabels: Record<string, string> = {}): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  registry.setDefaultLabels(defaultLabels);
  return registry;
}
