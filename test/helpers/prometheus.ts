/**
 * A real Prometheus (Debian's `prometheus` package) for the tests: on a free loopback port, its own storage in a
 * temp directory, scraping `targets` every second with the shipped rules evaluated every second; and the HTTP
 * API the tests read it through (/api/v1/alerts, /api/v1/targets, /api/v1/query).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../src/util/free-port.ts';

export const SHIPPED_RULES = fileURLToPath(new URL('../../docker/prometheus/qtsp-rules.yml', import.meta.url));

export interface PromAlert {
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  readonly state: 'pending' | 'firing' | 'inactive';
  readonly activeAt?: string;
}

export interface PromTarget {
  readonly labels: Record<string, string>;
  readonly health: 'up' | 'down' | 'unknown';
  readonly lastError: string;
  readonly scrapeUrl: string;
}

/** Reads a Prometheus's HTTP API. */
export function prometheusApi(url: string) {
  const get = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`${path}: ${body.error ?? res.status}`);
    return body.data;
  };
  return {
    url,
    alerts: async () => (await get<{ alerts: PromAlert[] }>('/api/v1/alerts')).alerts,
    targets: async () => (await get<{ activeTargets: PromTarget[] }>('/api/v1/targets')).activeTargets,
    query: async (expr: string) =>
      (
        await get<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(
          `/api/v1/query?query=${encodeURIComponent(expr)}`,
        )
      ).result,
    /** rule groups as loaded, with their last evaluation */
    rules: async () =>
      (await get<{ groups: { name: string; lastEvaluation: string; rules: { name: string }[] }[] }>('/api/v1/rules'))
        .groups,
  };
}

export type PrometheusApi = ReturnType<typeof prometheusApi>;

/** `until` polled every 500 ms until it returns something other than undefined, or an error naming `what`. */
export async function eventually<T>(what: string, timeoutMs: number, until: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const got = await until();
      if (got !== undefined) return got;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms${last ? ` (${last})` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

export interface LocalPrometheus extends PrometheusApi {
  output(): string;
  stop(): Promise<void>;
}

/** Starts Prometheus in `dir` scraping `targets` (host:port of ops listeners) as job "qtsp" with `rules`. */
export async function startPrometheus(options: {
  dir: string;
  targets: readonly string[];
  rules?: string;
}): Promise<LocalPrometheus> {
  mkdirSync(join(options.dir, 'data'), { recursive: true });
  const config = join(options.dir, 'prometheus.yml');
  writeFileSync(
    config,
    [
      'global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}',
      `rule_files: [${JSON.stringify(options.rules ?? SHIPPED_RULES)}]`,
      'scrape_configs:',
      '  - job_name: qtsp',
      `    static_configs: [{targets: ${JSON.stringify(options.targets)}}]`,
      '',
    ].join('\n'),
  );
  const port = await freePort();
  const child = spawn(
    'prometheus',
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(options.dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  child.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  const api = prometheusApi(`http://127.0.0.1:${port}`);
  const stop = () => stopChild(child);
  try {
    await eventually('prometheus ready', 60_000, async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited: ${out}`);
      const res = await fetch(`${api.url}/-/ready`);
      return res.ok ? true : undefined;
    });
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}\n${out}`);
  }
  return { ...api, output: () => out, stop };
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
