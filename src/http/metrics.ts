/**
 * Operator metrics in Prometheus text format (prom-client), served at GET /metrics. One registry per
 * service instance, so tests running several instances in one process do not share counters.
 */
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface Metrics {
  readonly registry: Registry;
  readonly requests: Counter<'status'>;
  readonly signatures: Counter;
  readonly certificates: Counter;
  readonly duration: Histogram<'status'>;
}

export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry });
  return {
    registry,
    requests: new Counter({ name: 'qtsp_signdoc_requests_total', help: 'signDoc requests by HTTP status', labelNames: ['status'], registers: [registry] }),
    signatures: new Counter({ name: 'qtsp_signatures_created_total', help: 'signatures created', registers: [registry] }),
    certificates: new Counter({ name: 'qtsp_signer_certificates_issued_total', help: 'per-request signer certificates issued', registers: [registry] }),
    duration: new Histogram({
      name: 'qtsp_signdoc_duration_seconds',
      help: 'signDoc latency',
      labelNames: ['status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
  };
}
