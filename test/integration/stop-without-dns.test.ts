/**
 * SIGTERM when Redis (and, for `qtsp serve`, PostgreSQL) is gone and so is the DNS that names it: `qtsp worker`
 * and `qtsp serve` exit 0, promptly. Each runs in a mount namespace of its own (`unshare -m`, as root) whose
 * /etc/hosts names the servers until the test takes the names away, and whose /etc/resolv.conf points at a DNS
 * server that takes every query and never answers (each system lookup then hangs for the 30 s of
 * `options timeout:30`). Reconnects then ask DNS for the names; a lookup on libuv's thread pool would hold the
 * exit until it times out.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { startRedisServer, type LocalRedis } from '../../src/util/redis-server.ts';
import { childEnv, waitFor } from '../helpers/delivery.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { startServeFleet, type ServeFleet } from '../helpers/instances.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { QTSP_BIN } from '../helpers/qtsp-cli.ts';

/** a loopback address of its own for the silent DNS server (port 53 needs root, as the namespace does) */
const SILENT_DNS = `127.53.${1 + randomInt(250)}.${1 + randomInt(250)}`;
const REDIS_NAME = 'qtsp-redis.test';
const POSTGRES_NAME = 'qtsp-postgres.test';
/** the bound the processes get, and the time they are given: generous, yet well short of one lookup's 30 s */
const SHUTDOWN_TIMEOUT_MS = 8000;
const EXIT_WITHIN_MS = 20_000;

const isRoot = process.getuid?.() === 0;
const canUnshare = isRoot && spawnSync('unshare', ['-m', 'true']).status === 0;
const skip = canUnshare ? false : 'needs root and unshare -m (a mount namespace with its own /etc/hosts)';

/** a DNS server that takes every query and answers none */
function silentDns(): Promise<{ socket: Socket; queries: () => number }> {
  const socket = createSocket('udp4');
  let queries = 0;
  socket.on('message', () => queries++);
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(53, SILENT_DNS, () => resolve({ socket, queries: () => queries }));
  });
}

interface Names {
  readonly dir: string;
  readonly hosts: string;
  readonly resolv: string;
  /** /etc/hosts no longer names the servers: their names are DNS's to give, which says nothing */
  forget(): void;
}

function names(): Names {
  const dir = mkdtempSync(join(tmpdir(), 'qtsp-names-'));
  const hosts = join(dir, 'hosts');
  const resolv = join(dir, 'resolv.conf');
  writeFileSync(hosts, `127.0.0.1 localhost\n127.0.0.1 ${REDIS_NAME} ${POSTGRES_NAME}\n`);
  writeFileSync(resolv, `nameserver ${SILENT_DNS}\noptions timeout:30 attempts:1\n`);
  // written in place: the bind mount follows the file, not its name
  return { dir, hosts, resolv, forget: () => writeFileSync(hosts, '127.0.0.1 localhost\n') };
}

/** `qtsp <args>` in a mount namespace where `n` are /etc/hosts and /etc/resolv.conf (exec: same pid) */
function spawnWithNames(n: Names, args: readonly string[], env: NodeJS.ProcessEnv): ChildProcess {
  const script = 'mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@"';
  return spawn(
    'unshare',
    [
      '-m',
      '--propagation',
      'private',
      'sh',
      '-c',
      script,
      'sh',
      n.hosts,
      n.resolv,
      process.execPath,
      QTSP_BIN,
      ...args,
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
}

function collect(child: ChildProcess): () => string {
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return () => out;
}

const exited = (child: ChildProcess) =>
  new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );

/** clients connected to this Redis (ours included) */
async function clients(redis: LocalRedis): Promise<number> {
  const probe = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  try {
    await probe.connect();
    return (
      String(await probe.client('LIST'))
        .trim()
        .split('\n').length - 1
    );
  } catch {
    return 0;
  } finally {
    probe.disconnect();
  }
}

/**
 * Starts `qtsp <args>` with Redis at REDIS_NAME, waits for its connections, stops Redis (and `postgres`) and
 * takes the names away, waits until the process asks the silent DNS, then sends SIGTERM: resolves with how it
 * ended and when.
 */
async function stopWithoutServersOrDns(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  dns: { queries: () => number },
  postgres?: PostgresServer,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number; output: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'qtsp-redis-'));
  const n = names();
  const redis = await startRedisServer({ dir });
  const child = spawnWithNames(n, args, { ...env, QTSP_REDIS_URL: `redis://${REDIS_NAME}:${redis.port}` });
  const output = collect(child);
  const ended = exited(child);
  try {
    await waitFor('the process to start', () => ready.test(output()), 90_000, 200);
    await waitFor('its connections to Redis', async () => (await clients(redis)) >= 2, 30_000, 200);
    await redis.stop();
    await postgres?.stop();
    n.forget();
    const before = dns.queries();
    await waitFor('a reconnect to ask DNS for the name', () => dns.queries() > before, 30_000, 50);
    const sent = Date.now();
    child.kill('SIGTERM');
    const end = await Promise.race([ended, delay(EXIT_WITHIN_MS, undefined, { ref: false })]);
    const ms = Date.now() - sent;
    if (!end) return { code: null, signal: null, ms, output: output() };
    return { ...end, ms, output: output() };
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (redis.running) await redis.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(n.dir, { recursive: true, force: true });
  }
}

describe('SIGTERM with Redis and its DNS gone', { skip }, () => {
  let env: TestEnvironment;
  let fleet: ServeFleet;
  let dns: Awaited<ReturnType<typeof silentDns>>;

  before(async () => {
    dns = await silentDns();
    env = await startEnvironment({ delivery: { inProcessWorker: false } });
    fleet = await startServeFleet();
  });
  after(async () => {
    await fleet?.close();
    await env?.close();
    dns?.socket.close();
  });

  it('`qtsp worker` exits 0 within its bound', async () => {
    const r = await stopWithoutServersOrDns(
      ['worker'],
      childEnv(env, { QTSP_LIFECYCLE_SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS), QTSP_LOG_LEVEL: 'info' }),
      /qtsp worker delivering/,
      dns,
    );
    assert.ok(
      r.code !== null || r.signal !== null,
      `still running ${r.ms} ms after SIGTERM:\n${r.output.slice(-3000)}`,
    );
    assert.equal(r.code, 0, r.output.slice(-3000));
    assert.match(r.output, /"event":"shutdown.done"/);
  });

  it('`qtsp serve` on PostgreSQL exits 0 within its bound', async () => {
    const postgres = await startPostgres({ ownCluster: true });
    const url = new URL(await postgres.freshSchemaUrl());
    url.hostname = POSTGRES_NAME;
    const serveEnv = fleet.instanceEnv('dns-gone', {
      store: { driver: 'postgres', url: url.toString() },
      extra: {
        QTSP_LIFECYCLE_DRAIN_TIMEOUT_MS: '1000',
        QTSP_LIFECYCLE_SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
        QTSP_LOG_LEVEL: 'info',
      },
    });
    const r = await stopWithoutServersOrDns(
      ['serve'],
      { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir(), NODE_ENV: 'test', ...serveEnv },
      /qtsp serving signDoc at/,
      dns,
      postgres,
    ).finally(() => postgres.stop().catch(() => undefined));
    assert.ok(
      r.code !== null || r.signal !== null,
      `still running ${r.ms} ms after SIGTERM:\n${r.output.slice(-3000)}`,
    );
    assert.equal(r.code, 0, r.output.slice(-3000));
  });
});
