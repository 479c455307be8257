/**
 * The operations listener: GET /health/live, /health/ready, /metrics and the status page (GET /, status-page.ts)
 * on their own port,
 * plain HTTP, loopback by default (ops.host, ops.port). Apart from the public signDoc port so that nobody
 * on the network reads our internals, and so that a load balancer's or orchestrator's probe needs no client
 * certificate. Plain HTTP is fine on loopback or a private interface: nothing here is secret, and nothing
 * here changes state.
 *
 * With several worker processes (node:cluster, server.workers) the primary serves the port for all of them
 * (cluster-ops.ts): a worker does not listen, it answers the primary's questions over IPC instead.
 */
import cluster from 'node:cluster';
import * as http from 'node:http';
import { listen, urlHost } from '../util/listen.ts';
import express from 'express';
import type { Config } from '../config/schema.ts';
import type { Metrics } from '../util/metrics.ts';
import type { Logger } from '../util/logger.ts';
import { drainable } from './listener.ts';
import type { MetricsJson } from './metrics.ts';
import { signDocWindow } from './signdoc-window.ts';
import { STATUS_PAGE_CSP, statusPage } from './status-page.ts';

export interface ReadinessAnswer {
  readonly ready: boolean;
  readonly reasons: string[];
}

export interface OpsSources {
  /** the last outcome of the readiness checks, without I/O (it must answer at once) */
  readiness(): ReadinessAnswer;
  readonly metrics: Metrics;
  /** refreshes the operational gauges before a scrape; bounded by the caller */
  beforeScrape(): Promise<void>;
  readonly logger: Logger;
}

/** What the endpoints answer from: one process's state, or a cluster primary's view of its workers. */
export interface OpsAnswers {
  readiness(): ReadinessAnswer | Promise<ReadinessAnswer>;
  /** the Prometheus text of /metrics; a rejection answers 503 with its message */
  metrics(): Promise<string>;
  /** the same metrics as prom-client's JSON (the status page reads them) */
  metricsJson(): Promise<MetricsJson>;
  readonly contentType: string;
}

export interface OpsListener {
  readonly url: string;
  close(): Promise<void>;
}

/** The primary's question to a worker and the worker's answer (the IPC of cluster-ops.ts). */
export interface OpsQuestion {
  readonly type: 'qtsp-ops-question';
  readonly id: number;
  readonly about: 'readiness' | 'metrics';
}

export interface OpsAnswer {
  readonly type: 'qtsp-ops-answer';
  readonly id: number;
  readonly readiness?: ReadinessAnswer;
  readonly metrics?: MetricsJson;
  readonly error?: string;
}

/** The operations endpoints of this process; in a cluster worker, its answers to the primary instead. */
export async function listenOps(config: Config, sources: OpsSources): Promise<OpsListener> {
  if (cluster.isWorker) return answerPrimary(config, sources);
  return serveOps(config, {
    readiness: () => sources.readiness(),
    metrics: async () => {
      await refreshGauges(sources);
      return sources.metrics.registry.metrics();
    },
    metricsJson: async () => {
      await refreshGauges(sources);
      return sources.metrics.registry.getMetricsAsJSON();
    },
    contentType: sources.metrics.registry.contentType,
  });
}

/** Listens on ops.host:ops.port and answers from `answers`; close() drains within lifecycle.drainTimeoutMs. */
export async function serveOps(config: Config, answers: OpsAnswers): Promise<OpsListener> {
  const window = signDocWindow();
  // a sample of the signDoc counters a minute, for the status page's last hour (signdoc-window.ts)
  const sampler = setInterval(() => {
    answers.metricsJson().then(
      (m) => window.add(m),
      () => undefined,
    );
  }, 60_000);
  sampler.unref();
  const server = http.createServer(opsApp(answers, window));
  server.requestTimeout = 30_000;
  const drain = drainable(server);
  const port = await listen(server, config.ops.port, config.ops.host).catch((err: unknown) => {
    clearInterval(sampler);
    throw err;
  });
  return {
    url: `http://${urlHost(config.ops.host)}:${port}`,
    close: () => {
      clearInterval(sampler);
      return drain(config.lifecycle.drainTimeoutMs);
    },
  };
}

function opsApp(answers: OpsAnswers, window: ReturnType<typeof signDocWindow>): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.get('/', statusRoute(answers, window));
  app.get('/health/live', (_req, res) => {
    res.set('cache-control', 'no-store').json({ status: 'live' });
  });
  app.get('/health/ready', async (_req, res) => {
    const r = await answers.readiness();
    res
      .status(r.ready ? 200 : 503)
      .set('cache-control', 'no-store')
      .json({ status: r.ready ? 'ready' : 'not_ready', reasons: r.reasons });
  });
  app.get('/metrics', async (_req, res) => {
    let text: string;
    try {
      text = await answers.metrics();
    } catch (err) {
      res
        .status(503)
        .set('cache-control', 'no-store')
        .type('text/plain')
        .send(`${(err as Error).message}\n`);
      return;
    }
    res.set({ 'content-type': answers.contentType, 'cache-control': 'no-store' }).send(text);
  });
  app.use((_req, res) => {
    res.status(404).json({
      error: 'not_found',
      error_description: 'no such endpoint (operations listener: /, /health/live, /health/ready, /metrics)',
    });
  });
  return app;
}

/** GET /: the status page (status-page.ts) from the readiness and metrics answers; 503 when no metrics came. */
function statusRoute(answers: OpsAnswers, window: ReturnType<typeof signDocWindow>): express.RequestHandler {
  const headers = {
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
  };
  return async (_req, res) => {
    let metrics: MetricsJson;
    try {
      metrics = await answers.metricsJson();
    } catch (err) {
      res
        .status(503)
        .set(headers)
        .type('text/plain')
        .send(`${(err as Error).message}\n`);
      return;
    }
    window.add(metrics);
    const page = statusPage({
      readiness: await answers.readiness(),
      metrics,
      lastHour: window.lastHour(metrics),
      now: new Date(),
    });
    res
      .set({ ...headers, 'content-type': 'text/html; charset=utf-8', 'content-security-policy': STATUS_PAGE_CSP })
      .send(page);
  };
}

/** The operational gauges are refreshed before a scrape; a scrape still answers when that fails. */
async function refreshGauges(sources: OpsSources): Promise<void> {
  try {
    await sources.beforeScrape();
  } catch (err) {
    sources.logger.warn(
      { event: 'metrics.snapshot_failed', error: (err as Error).message },
      'operational gauges not refreshed',
    );
  }
}

/**
 * A cluster worker: answers the primary's readiness and metrics questions over IPC until closed. Its URL is the
 * primary's listener (the primary passes the port it listens on as ops.port).
 */
function answerPrimary(config: Config, sources: OpsSources): OpsListener {
  const onMessage = (question: OpsQuestion) => {
    if (question?.type !== 'qtsp-ops-question') return;
    void answer(sources, question).then((reply) => {
      // a primary that is stopping has closed the channel: nothing waits for the answer then
      if (process.connected) process.send!(reply, undefined, undefined, () => undefined);
    });
  };
  process.on('message', onMessage);
  return {
    url: `http://${urlHost(config.ops.host)}:${config.ops.port}`,
    close: async () => {
      process.off('message', onMessage);
    },
  };
}

async function answer(sources: OpsSources, question: OpsQuestion): Promise<OpsAnswer> {
  const reply = { type: 'qtsp-ops-answer', id: question.id } as const;
  try {
    if (question.about === 'readiness') return { ...reply, readiness: sources.readiness() };
    await refreshGauges(sources);
    return { ...reply, metrics: await sources.metrics.registry.getMetricsAsJSON() };
  } catch (err) {
    return { ...reply, error: (err as Error).message };
  }
}
