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
import { deadlineOf, type CalendarEntry } from '../ca/calendar.ts';
import type { JournalSealState } from '../store/types.ts';
import type { SelfAuditResult } from '../journal/self-audit.ts';

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
  const sealFailures = new Counter({
    name: 'qtsp_journal_seal_failures_total',
    help: 'journal seals that failed, by the TSA that failed (ours, second; none: the store)',
    labelNames: ['tsa'],
    registers: [registry],
  });
  // present from the start, so that the first failure is an increase (rate() needs a sample before it)
  for (const tsa of ['ours', 'second', 'none']) sealFailures.inc({ tsa }, 0);
  return {
    registry,
    sealFailures,
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
  /** undefined with the journal off (journal.enabled false) */
  readonly journal?: JournalSnapshot;
}

/** The sealed journal as an operator watches it. */
export interface JournalSnapshot {
  /** undefined when the store did not answer */
  readonly seal?: JournalSealState;
  /** a second TSA (journal.secondTsaUrl) time-stamps every batch */
  readonly secondTsa: boolean;
  /** the last scheduled audit that ran to its end (journal/self-audit.ts) */
  readonly audit?: SelfAuditResult;
  /** time-stamp renewals due at the last renewal check; undefined before one */
  readonly renewalsDue?: number;
}

type GaugeOf = <L extends string>(
  name: string,
  help: string,
  aggregator: Aggregator,
  labelNames?: readonly L[],
) => Gauge<L>;

const gaugesIn =
  (registry: Registry): GaugeOf =>
  (name, help, aggregator, labelNames = []) =>
    new Gauge({ name, help, labelNames, aggregator, registers: [registry] });

/**
 * A value that could not be read is left out: an absent series alerts as "no data", a false 0 looks healthy.
 * (remove(), not reset(): prom-client resets an unlabelled gauge to 0.)
 */
const setOrOmit = (g: Gauge, value: number | undefined) => (value === undefined ? g.remove() : g.set(value));

const ageSeconds = (since: Date, now: number) => Math.max(0, (now - since.getTime()) / 1000);

/**
 * Gauges of the operational state, set from one snapshot per scrape (`update` before `registry.metrics()`).
 * Across worker processes (aggregateProcesses): the store and the queue are shared, so every worker reads the
 * same counts (max, not their sum); up and ready hold only when they hold in every worker (min); an age is the
 * stalest worker's (max: each worker pulls the IDP list and the key archive itself).
 */
export function operationalGauges(
  registry: Registry,
  snapshot: () => Promise<OperationalSnapshot>,
): { update(): Promise<void> } {
  const gauge = gaugesIn(registry);
  const parts = [deliveryGauges(gauge), stateGauges(gauge), journalGauges(gauge)];
  return {
    async update() {
      const s = await snapshot();
      for (const set of parts) set(s);
    },
  };
}

/** the outbox and the queue of every delivery topic */
function deliveryGauges(gauge: GaugeOf): (s: OperationalSnapshot) => void {
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
  return (s) => {
    const now = Date.now();
    outbox.reset();
    oldest.reset();
    queue.reset();
    for (const [topic, t] of Object.entries(s.topics)) {
      for (const [state, n] of Object.entries(t.outbox ?? {})) outbox.set({ topic, state }, n);
      if (t.oldestUndelivered !== undefined)
        oldest.set({ topic }, t.oldestUndelivered ? ageSeconds(t.oldestUndelivered, now) : 0);
      for (const [state, n] of Object.entries(t.queue ?? {})) queue.set({ topic, state }, n);
    }
  };
}

/** what the service depends on: store, Redis, readiness, the trust sources' ages */
function stateGauges(gauge: GaugeOf): (s: OperationalSnapshot) => void {
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
  return (s) => {
    storeUp.set(s.storeUp ? 1 : 0);
    redisUp.set(s.redisUp ? 1 : 0);
    ready.set(s.ready ? 1 : 0);
    setOrOmit(idpAge, s.idpListAgeSeconds);
    setOrOmit(headAge, s.keyArchiveHeadAgeSeconds);
    setOrOmit(pullAge, s.keyArchiveLastPullAgeSeconds);
  };
}

/**
 * The sealed journal (docs/evidence.md): what waits to be sealed, the newest batch, the scheduled audit and the
 * renewals due. Across workers the store's counts are the same (max); the audit is each worker's own, so the
 * worst counts: clean only when clean in every worker (min), its time the stalest (min).
 */
function journalGauges(gauge: GaugeOf): (s: OperationalSnapshot) => void {
  const g = {
    unsealed: gauge('qtsp_journal_unsealed_entries', 'journal entries not sealed into a batch yet', 'max'),
    oldest: gauge(
      'qtsp_journal_oldest_unsealed_age_seconds',
      'age of the oldest journal entry not sealed yet, 0 when none',
      'max',
    ),
    batch: gauge('qtsp_journal_last_batch_number', 'number of the newest sealed batch (0: none yet)', 'max'),
    sealedAt: gauge(
      'qtsp_journal_last_batch_timestamp_seconds',
      'time-stamp time (genTime) of the newest sealed batch, Unix time',
      'max',
    ),
    second: gauge('qtsp_journal_second_tsa_enabled', '1 when a second TSA time-stamps every batch', 'min'),
    clean: gauge('qtsp_journal_audit_clean', '1 when the last scheduled journal audit found nothing, else 0', 'min'),
    findings: gauge('qtsp_journal_audit_findings', 'findings (besides purges) of the last scheduled audit', 'max'),
    auditedAt: gauge(
      'qtsp_journal_audit_timestamp_seconds',
      'start of the last scheduled journal audit that ran to its end, Unix time',
      'min',
    ),
    due: gauge('qtsp_journal_renewals_due', 'evidence-record time-stamp renewals due at the last check', 'max'),
  };
  return (s) => {
    const j = s.journal;
    const seal = j?.seal;
    setOrOmit(g.unsealed, seal?.unsealed);
    setOrOmit(g.oldest, seal && (seal.oldestUnsealedAt ? ageSeconds(seal.oldestUnsealedAt, Date.now()) : 0));
    setOrOmit(g.batch, seal && (seal.lastBatch?.batchNo ?? 0));
    setOrOmit(g.sealedAt, seal?.lastBatch && seal.lastBatch.sealedAt.getTime() / 1000);
    setOrOmit(g.second, j && (j.secondTsa ? 1 : 0));
    setOrOmit(g.clean, j?.audit && (j.audit.clean ? 1 : 0));
    setOrOmit(g.findings, j?.audit?.findings);
    setOrOmit(g.auditedAt, j?.audit && j.audit.at.getTime() / 1000);
    setOrOmit(g.due, j?.renewalsDue);
  };
}

/**
 * The calendar of the long-lived material (ca/calendar.ts) as gauges, read at each scrape from the entries the
 * service keeps: one series per object, its end (notAfter, a CRL's nextUpdate) and, where it ends earlier, its
 * key's usage period, as Unix time, and the days left until the earlier of the two on the service's own clock
 * (what the alert rules use: the clock the service signs on). Across workers the earliest counts (min).
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
  new Gauge({
    name: 'qtsp_pki_days_left',
    help:
      "days until an object's deadline (the earlier of its end and its key's usage end) on the service's clock, " +
      'negative once passed',
    labelNames: ['object', 'renewed_by'],
    aggregator: 'min',
    registers: [registry],
    collect() {
      this.reset();
      const now = Date.now();
      for (const e of entries())
        this.set({ object: e.object, renewed_by: e.renewedBy }, (deadlineOf(e).at.getTime() - now) / DAY_MS);
    },
  });
}

const DAY_MS = 86_400_000;

/**
 * Settings the alert rules compare with (docker/prometheus/qtsp-rules.yml), in seconds: set once, the same in
 * every worker (max).
 */
export function settingGauges(registry: Registry, settings: Readonly<Record<string, number>>): void {
  const gauge = new Gauge({
    name: 'qtsp_setting_seconds',
    help: 'a setting in seconds the alert rules compare with, by setting name',
    labelNames: ['setting'],
    aggregator: 'max',
    registers: [registry],
  });
  for (const [setting, value] of Object.entries(settings)) gauge.set({ setting }, value);
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
