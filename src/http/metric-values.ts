/**
 * Reading series out of a process's (or a cluster's aggregated) metrics as prom-client gives them
 * (`getMetricsAsJSON`): what the status page (status-page.ts) and its window of the last hour (signdoc-window.ts)
 * show is what GET /metrics serves, read the same way in one process and in a cluster's primary.
 */
import type { MetricsJson } from './metrics.ts';

export interface Series {
  readonly labels: Readonly<Record<string, string | number>>;
  readonly value: number;
}

/** the series of metric `name` (a histogram's buckets under `name`_bucket etc., as prom-client names them) */
export function seriesOf(metrics: MetricsJson, name: string): Series[] {
  const out: Series[] = [];
  for (const metric of metrics)
    for (const v of metric.values as { labels: Record<string, string | number>; value: number; metricName?: string }[])
      if ((v.metricName ?? metric.name) === name) out.push({ labels: v.labels, value: v.value });
  return out;
}

/** the one value of an unlabelled gauge (the lowest when several instances' series are present); undefined: absent */
export function gaugeValue(metrics: MetricsJson, name: string): number | undefined {
  const values = seriesOf(metrics, name).map((s) => s.value);
  return values.length === 0 ? undefined : Math.min(...values);
}

/** the values of `name` summed by the label `by` */
export function sumBy(metrics: MetricsJson, name: string, by: string): Map<string, number> {
  const sums = new Map<string, number>();
  for (const s of seriesOf(metrics, name)) {
    const key = String(s.labels[by] ?? '');
    sums.set(key, (sums.get(key) ?? 0) + s.value);
  }
  return sums;
}
