/**
 * Helpers for the delivery tests (mediation records, notifications): waiting for an asynchronous outcome,
 * signDoc on a kept-alive agent (the consent: signing.ts), the reference_ids a signDoc call produced, and a
 * `qtsp` child process configured for a test environment (worker, CLI).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import type { HttpAgent as Agent } from '../../src/util/http-client.ts';
import { referenceId } from '../../src/mediation/record.ts';
import { httpRequest, jsonBody } from '../../src/util/http-client.ts';
import { QTSP_ID, type TestEnvironment } from './environment.ts';
import { QTSP_BIN } from './qtsp-cli.ts';
import { signDocBody } from './signing.ts';

export const sha256b64 = (data: string | Uint8Array): string => createHash('sha256').update(data).digest('base64');

/** Polls until `probe` returns something truthy; fails with `what` after timeoutMs. */
export async function waitFor<T>(
  what: string,
  probe: () => T | Promise<T>,
  timeoutMs = 20_000,
  everyMs = 50,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * The ids of the delivery jobs in Redis that carry outbox entry `id` (a job carries the ids of one hand-over,
 * src/delivery/queue.ts), read from bullmq's job hashes.
 */
export async function jobsCarrying(redisUrl: string, prefix: string, topic: string, id: string): Promise<string[]> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    const found: string[] = [];
    for (const key of await redis.keys(`${prefix}:${topic}:h-*`)) {
      if ((await redis.type(key)) !== 'hash') continue;
      const data = await redis.hget(key, 'data');
      const ids = data ? (JSON.parse(data) as { ids?: string[] }).ids : undefined;
      if (ids?.includes(id)) found.push(key.slice(`${prefix}:${topic}:`.length));
    }
    return found;
  } finally {
    redis.disconnect();
  }
}

/** The outbox ids carried by the jobs bullmq holds as `delayed` (waiting for a retry) in a topic's queue. */
export async function idsInDelayedJobs(redisUrl: string, prefix: string, topic: string): Promise<string[]> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    const ids: string[] = [];
    for (const job of await redis.zrange(`${prefix}:${topic}:delayed`, '0', '-1')) {
      const data = await redis.hget(`${prefix}:${topic}:${job}`, 'data');
      if (data) ids.push(...((JSON.parse(data) as { ids?: string[] }).ids ?? []));
    }
    return ids;
  } finally {
    redis.disconnect();
  }
}

export interface SignDocOutcome {
  readonly status: number;
  readonly txn: string;
  readonly ms: number;
  readonly body: unknown;
}

/** POST signDoc on a kept-alive RP agent (so the time measured is signDoc's, not a TLS handshake's). */
export async function postSignDoc(
  env: TestEnvironment,
  agent: Agent,
  sad: string,
  hashes: readonly string[],
): Promise<SignDocOutcome> {
  const started = performance.now();
  const res = await httpRequest(env.qtsp.signDocUrl, {
    method: 'POST',
    agent,
    timeoutMs: 60_000,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(signDocBody(sad, hashes)),
    maxResponseBytes: 8 * 1024 * 1024,
  });
  const ms = performance.now() - started;
  return { status: res.status, txn: String(res.headers['x-transaction-id'] ?? ''), ms, body: jsonBody(res) };
}

/** The reference_ids of every signDoc call recorded under this txn (one per call: txn + certificate serial). */
export async function referenceIdsOf(env: TestEnvironment, txn: string): Promise<string[]> {
  const rows = await env.qtsp.deps.store.getTransaction(txn);
  return rows.map((r) => referenceId(r.txn, r.certificateSerialHex));
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? NaN;
}

/** Environment variables that point a `qtsp` child process at a test environment's data, Redis and sandbox. */
export function childEnv(env: TestEnvironment, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    QTSP_DATA_DIR: env.dataDir,
    QTSP_QTSP_ID: QTSP_ID,
    QTSP_REDIS_URL: env.config.redis.url!,
    QTSP_REDIS_PREFIX: env.config.redis.prefix,
    QTSP_MEDIATION_URL: env.config.mediation.url,
    QTSP_NOTIFICATION_SMTP_URL: env.config.notification.smtpUrl,
    QTSP_TRUST_IDP_DIRECTORY_URL: env.config.trust.idpDirectoryUrl,
    QTSP_LOG_LEVEL: 'warn',
    ...extra,
  };
}

export interface QtspChild {
  readonly process: ChildProcess;
  readonly output: () => string;
  /** resolves with the exit code (or the signal) */
  readonly exited: Promise<number | string>;
}

/** `qtsp <args>` as a child process that runs on (a worker), its output collected; to its end: qtsp-cli.ts. */
export function spawnQtsp(args: readonly string[], env: NodeJS.ProcessEnv): QtspChild {
  const child = spawn(process.execPath, [QTSP_BIN, ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)),
  );
  return { process: child, output: () => out, exited };
}
