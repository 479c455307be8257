/**
 * The operations listener: GET /health/live, /health/ready and /metrics on their own port,
 * plain HTTP, loopback by default (ops.host, ops.port). Apart from the public signDoc port so that nobody
 * on the network reads our internals, and so that a load balancer's or orchestrator's probe needs no client
 * certificate. Plain HTTP is fine on loopback or a private interface: nothing here is secret, and nothing
 * here changes state.
 */
import * as http from 'node:http';
import { listen, urlHost } from '../util/listen.ts';
import express from 'express';
import type { Config } from '../config/schema.ts';
import type { Metrics } from '../util/metrics.ts';
import type { Logger } from '../util/logger.ts';
import { drainable } from './listener.ts';

export interface OpsSources {
  /** the last outcome of the readiness checks, without I/O (it must answer at once) */
  readiness(): { ready: boolean; reasons: string[] };
  readonly metrics: Metrics;
  /** refreshes the operational gauges before a scrape; bounded by the caller */
  beforeScrape(): Promise<void>;
  readonly logger: Logger;
}

export async function listenOps(config: Config, sources: OpsSources): Promise<{ url: string; close(): Promise<void> }> {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.get('/health/live', (_req, res) => {
    res.set('cache-control', 'no-store').json({ status: 'live' });
  });
  app.get('/health/ready', (_req, res) => {
    const r = sources.readiness();
    res
      .status(r.ready ? 200 : 503)
      .set('cache-control', 'no-store')
      .json({ status: r.ready ? 'ready' : 'not_ready', reasons: r.reasons });
  });
  app.get('/metrics', async (_req, res) => {
    try {
      await sources.beforeScrape();
    } catch (err) {
      sources.logger.warn(
        { event: 'metrics.snapshot_failed', error: (err as Error).message },
        'operational gauges not refreshed',
      );
    }
    res
      .set({ 'content-type': sources.metrics.registry.contentType, 'cache-control': 'no-store' })
      .send(await sources.metrics.registry.metrics());
  });
  app.use((_req, res) => {
    res.status(404).json({
      error: 'not_found',
      error_description: 'no such endpoint (operations listener: /health/live, /health/ready, /metrics)',
    });
  });
  const server = http.createServer(app);
  server.requestTimeout = 30_000;
  const drain = drainable(server);
  const port = await listen(server, config.ops.port, config.ops.host);
  return { url: `http://${urlHost(config.ops.host)}:${port}`, close: () => drain(config.lifecycle.drainTimeoutMs) };
}
