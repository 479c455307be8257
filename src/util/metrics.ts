/**
 * The operator metrics the service counts (Prometheus, prom-client), as an interface: the pipeline
 * (signing/sign-doc.ts) counts through it, http/metrics.ts creates and serves it at GET /metrics. Here, below
 * both, so signing/ need not import http/.
 */
import type { Counter, Histogram, Registry } from 'prom-client';

export interface Metrics {
  readonly registry: Registry;
  readonly requests: Counter<'status'>;
  readonly signatures: Counter;
  readonly certificates: Counter;
  readonly duration: Histogram<'status'>;
  /** journal seals that failed, by the TSA that failed (journal/seal.ts) */
  readonly sealFailures: Counter<'tsa'>;
}
