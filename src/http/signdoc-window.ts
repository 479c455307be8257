/**
 * signDoc's answers and latency of the last hour for the status page, from the counters the process keeps
 * (qtsp_signdoc_requests_total, qtsp_signdoc_duration_seconds): a sample of their cumulative values is kept at
 * most once a minute, and "the last hour" is the difference between the values now and the newest sample at
 * least an hour old; while the process (or cluster) is younger than an hour, the difference since its start
 * (where every counter was 0). So the window covers between 60 and 61 minutes, or less since a start, and says
 * which. Percentiles are read off the histogram's buckets (the upper bound of the bucket that holds them), as
 * Prometheus's histogram_quantile would estimate them between bucket bounds.
 */
import type { MetricsJson } from './metrics.ts';
import { seriesOf, sumBy } from './metric-values.ts';

const HOUR_MS = 3_600_000;
const SAMPLE_MS = 60_000;

interface Sample {
  readonly at: number;
  /** answers by HTTP status */
  readonly byStatus: ReadonlyMap<string, number>;
  /** cumulative bucket counts by upper bound (all statuses), ascending; Infinity last */
  readonly buckets: readonly (readonly [number, number])[];
  readonly sum: number;
}

export interface SignDocWindow {
  /** where the window starts: an hour ago, or the start */
  readonly since: Date;
  readonly byStatus: ReadonlyMap<string, number>;
  readonly total: number;
  /** seconds; undefined without answers */
  readonly mean?: number;
  /** upper bounds of the buckets holding the 50th, 90th and 99th percentile (Infinity: above the last bound) */
  readonly p50?: number;
  readonly p90?: number;
  readonly p99?: number;
}

function sampleOf(metrics: MetricsJson, at: number): Sample {
  const buckets = [...sumBy(metrics, 'qtsp_signdoc_duration_seconds_bucket', 'le')]
    .map(([le, n]) => [le === '+Inf' ? Infinity : Number(le), n] as const)
    .sort((a, b) => a[0] - b[0]);
  const sum = seriesOf(metrics, 'qtsp_signdoc_duration_seconds_sum').reduce((t, s) => t + s.value, 0);
  return { at, byStatus: sumBy(metrics, 'qtsp_signdoc_requests_total', 'status'), buckets, sum };
}

/** The samples of one process (or cluster), the first the start with every counter at 0. */
export function signDocWindow(startedAt = Date.now()): {
  add(metrics: MetricsJson, at?: number): void;
  lastHour(metrics: MetricsJson, at?: number): SignDocWindow;
} {
  const samples: Sample[] = [{ at: startedAt, byStatus: new Map(), buckets: [], sum: 0 }];
  const add = (metrics: MetricsJson, at = Date.now()) => {
    if (at - samples.at(-1)!.at < SAMPLE_MS) return;
    samples.push(sampleOf(metrics, at));
    // one sample at least an hour old is kept: the baseline
    while (samples.length > 2 && samples[1]!.at <= at - HOUR_MS) samples.shift();
  };
  const lastHour = (metrics: MetricsJson, at = Date.now()) => {
    const now = sampleOf(metrics, at);
    const base = [...samples].reverse().find((s) => s.at <= at - HOUR_MS) ?? samples[0]!;
    return difference(now, base);
  };
  return { add, lastHour };
}

/** now - base; a counter that dropped (a worker restarted) counts from 0 */
function difference(now: Sample, base: Sample): SignDocWindow {
  const minus = (a: number, b: number | undefined) => (b !== undefined && a >= b ? a - b : a);
  const byStatus = new Map([...now.byStatus].map(([status, n]) => [status, minus(n, base.byStatus.get(status))]));
  const baseBuckets = new Map(base.buckets);
  const buckets = now.buckets.map(([le, n]) => [le, minus(n, baseBuckets.get(le))] as const);
  const count = buckets.at(-1)?.[1] ?? 0;
  const quantile = (q: number) => buckets.find(([, n]) => n >= q * count)?.[0];
  return {
    since: new Date(base.at),
    byStatus,
    total: [...byStatus.values()].reduce((t, n) => t + n, 0),
    ...(count > 0
      ? { mean: minus(now.sum, base.sum) / count, p50: quantile(0.5)!, p90: quantile(0.9)!, p99: quantile(0.99)! }
      : {}),
  };
}
