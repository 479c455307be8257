/**
 * A local redis-server for `qtsp dev`, `qtsp serve` without a configured Redis, and the tests: started on a
 * free loopback port, with the settings bullmq wants (FIELD-NOTES, bullmq: noeviction, AOF), stopped with
 * SIGTERM so the AOF is flushed. restart() brings it back on the same port and directory with its data,
 * which is what the outage tests need. The package itself is installed by .ci/run (Debian redis-server).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createConnection } from 'node:net';
import { freePort } from './free-port.ts';

export interface LocalRedis {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** true while the server process runs */
  readonly running: boolean;
  /** SIGTERM and wait for the exit (AOF flushed on the way out) */
  stop(): Promise<void>;
  /** start again on the same port and directory, with the persisted data */
  restart(): Promise<void>;
}

export class RedisServerMissing extends Error {
  override name = 'RedisServerMissing';
}

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 10_000;


export function redisServerInstalled(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** PING over a raw socket: ready means it answers +PONG (not -LOADING while it replays the AOF). */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: HOST, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')));
  });
}

async function waitReady(port: number, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with code ${child.exitCode}: ${output().slice(-500)}`);
    if (await ping(port)) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  child.kill('SIGKILL');
  throw new Error(`redis-server did not become ready within ${READY_TIMEOUT_MS} ms`);
}

function launch(port: number, dir: string): { child: ChildProcess; output: () => string } {
  const args = [
    '--bind', HOST, '--port', String(port), '--dir', dir, '--daemonize', 'no', '--save', '',
    // bullmq: never evict keys; every write on disk before Redis answers (appendfsync always): an outbox
    // entry is marked queued once Redis took its job, so a job must survive even a crash of Redis itself
    '--appendonly', 'yes', '--appendfsync', 'always', '--maxmemory-policy', 'noeviction',
    '--protected-mode', 'yes', '--loglevel', 'warning',
  ];
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const collect = (d: Buffer) => {
    out = (out + d.toString()).slice(-4000);
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  return { child, output: () => out };
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** Starts redis-server on a free loopback port with its files in `dir`. */
export async function startRedisServer(options: { dir: string; port?: number }): Promise<LocalRedis> {
  if (!redisServerInstalled()) {
    throw new RedisServerMissing('redis-server is not installed: install the Debian package redis-server (.ci/run does) or set REDIS_URL');
  }
  mkdirSync(options.dir, { recursive: true });
  const port = options.port ?? (await freePort());
  let current = launch(port, options.dir);
  await waitReady(port, current.child, current.output);
  const handle: LocalRedis = {
    url: `redis://${HOST}:${port}`,
    port,
    dir: options.dir,
    get running() {
      return current.child.exitCode === null && current.child.signalCode === null;
    },
    async stop() {
      const child = current.child;
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited(child);
    },
    async restart() {
      await handle.stop();
      current = launch(port, options.dir);
      await waitReady(port, current.child, current.output);
    },
  };
  return handle;
}

/** Where a local redis-server of a data directory keeps its files, and its URL while it runs (for `qtsp worker`, `qtsp mediation status`). */
export function localRedisPaths(dataDir: string): { dir: string; urlFile: string } {
  const dir = join(dataDir, 'redis');
  return { dir, urlFile: join(dir, 'url') };
}

/**
 * The Redis to use: redis.url from the configuration, else REDIS_URL, else the local one a running `qtsp dev`
 * or `qtsp serve` of this data directory started (its URL file). undefined: none known.
 */
export function knownRedisUrl(configured: string | undefined, env: NodeJS.ProcessEnv, dataDir: string): string | undefined {
  if (configured) return configured;
  if (env['REDIS_URL']) return env['REDIS_URL'];
  const { urlFile } = localRedisPaths(dataDir);
  return existsSync(urlFile) ? readFileSync(urlFile, 'utf8').trim() : undefined;
}

export interface ProvidedRedis {
  readonly url: string;
  /** set when we started it */
  readonly local?: LocalRedis;
  stop(): Promise<void>;
}

/** redis.url or REDIS_URL when given; otherwise a local redis-server with its files in <dataDir>/redis. */
export async function provideRedis(configured: string | undefined, env: NodeJS.ProcessEnv, dataDir: string): Promise<ProvidedRedis> {
  const given = configured ?? env['REDIS_URL'];
  if (given) return { url: given, stop: async () => undefined };
  const paths = localRedisPaths(dataDir);
  const local = await startRedisServer({ dir: paths.dir });
  writeFileSync(paths.urlFile, local.url + '\n');
  return {
    url: local.url,
    local,
    async stop() {
      rmSync(paths.urlFile, { force: true });
      await local.stop();
    },
  };
}
