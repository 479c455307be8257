/**
 * A local redis-server for `qtsp dev`, `qtsp serve` without a configured Redis, and the tests: started on a
 * free loopback port, with the settings bullmq wants (noeviction, AOF: see launch), stopped with SIGTERM so
 * the AOF is flushed. restart() brings it back on the same port and directory with its data, which is what the
 * outage tests need. The package itself (Debian redis-server) is installed by
 * scripts/ensure-packages.mjs, which `npm start` and `npm test` run first.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { ensurePrivateDir } from './private-files.ts';
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

let setprivFound: boolean | undefined;

/** setpriv --pdeathsig is Linux (util-linux, essential on Debian); elsewhere redis-server is started directly. */
function withParentDeathSignal(): boolean {
  setprivFound ??=
    process.platform === 'linux' &&
    spawnSync('setpriv', ['--pdeathsig', 'SIGTERM', 'true'], { stdio: 'ignore' }).status === 0;
  return setprivFound;
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
    if (child.exitCode !== null)
      throw new Error(`redis-server exited with code ${child.exitCode}: ${output().slice(-500)}`);
    if (await ping(port)) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  child.kill('SIGKILL');
  throw new Error(`redis-server did not become ready within ${READY_TIMEOUT_MS} ms`);
}

function launch(port: number, dir: string): { child: ChildProcess; output: () => string } {
  const args = [
    '--bind',
    HOST,
    '--port',
    String(port),
    '--dir',
    dir,
    '--daemonize',
    'no',
    '--save',
    '',
    // bullmq: never evict keys; every write on disk before Redis answers (appendfsync always): an outbox
    // entry is marked queued once Redis took its job, so a job must survive even a crash of Redis itself
    '--appendonly',
    'yes',
    '--appendfsync',
    'always',
    '--maxmemory-policy',
    'noeviction',
    '--protected-mode',
    'yes',
    '--loglevel',
    'warning',
  ];
  // redis-server cannot watch its parent; setpriv (util-linux) sets PR_SET_PDEATHSIG before it execs it, so
  // the kernel sends it SIGTERM when we end, also when we are killed with SIGKILL: no orphan Redis
  // detached: its own process group, so a Ctrl-C in the terminal reaches us, not Redis; we stop it ourselves
  // after the queues are closed
  const options = { stdio: ['ignore', 'pipe', 'pipe'] as ('ignore' | 'pipe')[], detached: true };
  const child = withParentDeathSignal()
    ? spawn('setpriv', ['--pdeathsig', 'SIGTERM', 'redis-server', ...args], options)
    : spawn('redis-server', args, options);
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
    throw new RedisServerMissing(
      'redis-server is not installed: install the Debian package redis-server ' +
        '(`node scripts/ensure-packages.mjs start` does) or set REDIS_URL',
    );
  }
  ensurePrivateDir(options.dir);
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

/**
 * Where a local redis-server of a data directory keeps its files, and its URL while it runs (for `qtsp worker`,
 * `qtsp mediation status`).
 */
export function localRedisPaths(dataDir: string): { dir: string; urlFile: string } {
  const dir = join(dataDir, 'redis');
  return { dir, urlFile: join(dir, 'url') };
}

/**
 * The Redis to use: redis.url from the configuration, else REDIS_URL, else the local one a running `qtsp dev`
 * or `qtsp serve` of this data directory started (its URL file). undefined: none known.
 */
export function knownRedisUrl(
  configured: string | undefined,
  env: NodeJS.ProcessEnv,
  dataDir: string,
): string | undefined {
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
export async function provideRedis(
  configured: string | undefined,
  env: NodeJS.ProcessEnv,
  dataDir: string,
): Promise<ProvidedRedis> {
  const given = configured ?? env['REDIS_URL'];
  if (given) return { url: given, stop: async () => undefined };
  const paths = localRedisPaths(dataDir);
  const local = await startRedisServer({ dir: paths.dir });
  writeFileSync(paths.urlFile, `${local.url}\n`);
  return {
    url: local.url,
    local,
    async stop() {
      rmSync(paths.urlFile, { force: true });
      await local.stop();
    },
  };
}
