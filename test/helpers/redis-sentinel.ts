/**
 * Redis under Sentinel on loopback, as an operator runs it: a master with AOF, one replica, and three sentinels
 * (quorum 2) watching it; each a redis-server process of its own on a free port. `killMaster` SIGKILLs the
 * current master; `waitForNewMaster` waits until the sentinels name another one (the replica, promoted).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../src/util/free-port.ts';

export const SENTINEL_MASTER_NAME = 'qtsp-queues';
const HOST = '127.0.0.1';

export interface SentinelRedis {
  /** host:port of each sentinel, the form QTSP_REDIS_SENTINELS takes */
  readonly sentinels: readonly string[];
  readonly name: string;
  /** the port of the master the sentinels name now */
  masterPort(): Promise<number>;
  /** SIGKILL of the current master's process; returns its port */
  killMaster(): Promise<number>;
  /** until the sentinels name a master other than `oldPort` and it answers as master; ms it took */
  waitForNewMaster(oldPort: number, timeoutMs?: number): Promise<number>;
  /** the killed server back on its port, until Sentinel made it a synced replica of the current master */
  restartKilled(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

interface Server {
  readonly port: number;
  child: ChildProcess;
  readonly args: string[];
}

function launch(args: string[]): ChildProcess {
  // setpriv execs redis-server with a parent-death signal: no server outlives a test process that was killed
  const child = spawn('setpriv', ['--pdeathsig', 'SIGKILL', 'redis-server', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr!.resume();
  return child;
}

async function waitAnswers(port: number, deadlineMs = 10_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    const client = new Redis({ host: HOST, port, lazyConnect: true, retryStrategy: () => null });
    client.on('error', () => undefined);
    try {
      await client.connect();
      if ((await client.ping()) === 'PONG') return;
    } catch {
      // not up yet
    } finally {
      client.disconnect();
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`redis on port ${port} did not answer within ${deadlineMs} ms`);
}

async function dataServer(dir: string, replicaOf?: number): Promise<Server> {
  const port = await freePort();
  const own = join(dir, `redis-${port}`);
  mkdirSync(own, { recursive: true });
  const args = [
    ...['--bind', HOST, '--port', String(port), '--dir', own, '--save', '', '--protected-mode', 'no'],
    ...['--appendonly', 'yes', '--appendfsync', 'always', '--maxmemory-policy', 'noeviction'],
    ...(replicaOf ? ['--replicaof', HOST, String(replicaOf)] : []),
  ];
  const server = { port, args, child: launch(args) };
  await waitAnswers(port);
  return server;
}

async function sentinel(dir: string, masterPort: number): Promise<Server> {
  const port = await freePort();
  const file = join(dir, `sentinel-${port}.conf`);
  // Sentinel rewrites its own file (the master it follows, the replicas and sentinels it learnt)
  writeFileSync(
    file,
    [
      `bind ${HOST}`,
      `port ${port}`,
      `dir ${dir}`,
      'protected-mode no',
      `sentinel monitor ${SENTINEL_MASTER_NAME} ${HOST} ${masterPort} 2`,
      `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} 2000`,
      `sentinel failover-timeout ${SENTINEL_MASTER_NAME} 10000`,
      `sentinel parallel-syncs ${SENTINEL_MASTER_NAME} 1`,
      '',
    ].join('\n'),
  );
  const args = [file, '--sentinel'];
  const server = { port, args, child: launch(args) };
  await waitAnswers(port);
  return server;
}

async function askMaster(sentinelPort: number): Promise<number | undefined> {
  const client = new Redis({ host: HOST, port: sentinelPort, lazyConnect: true, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const answer = (await client.call('SENTINEL', 'get-master-addr-by-name', SENTINEL_MASTER_NAME)) as
      | [string, string]
      | null;
    return answer ? Number(answer[1]) : undefined;
  } catch {
    return undefined;
  } finally {
    client.disconnect();
  }
}

async function isMaster(port: number): Promise<boolean> {
  const client = new Redis({ host: HOST, port, lazyConnect: true, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return /role:master/.test(await client.info('replication'));
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

async function isSyncedReplica(port: number): Promise<boolean> {
  const client = new Redis({ host: HOST, port, lazyConnect: true, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const info = await client.info('replication');
    return /role:slave/.test(info) && /master_link_status:up/.test(info) && /master_sync_in_progress:0/.test(info);
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

function stop(server: Server): Promise<void> {
  const { child } = server;
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

export async function startSentinelRedis(): Promise<SentinelRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'qtsp-sentinel-'));
  const master = await dataServer(dir);
  const replica = await dataServer(dir, master.port);
  const sentinels = [
    await sentinel(dir, master.port),
    await sentinel(dir, master.port),
    await sentinel(dir, master.port),
  ];
  const data = [master, replica];
  let killed: Server | undefined;
  const masterPort = async () => {
    for (const s of sentinels) {
      const port = await askMaster(s.port);
      if (port) return port;
    }
    throw new Error('no sentinel names a master');
  };
  return {
    sentinels: sentinels.map((s) => `${HOST}:${s.port}`),
    name: SENTINEL_MASTER_NAME,
    masterPort,
    async killMaster() {
      const port = await masterPort();
      killed = data.find((s) => s.port === port)!;
      killed.child.kill('SIGKILL');
      await stop(killed);
      return port;
    },
    async waitForNewMaster(oldPort, timeoutMs = 30_000) {
      const started = Date.now();
      while (Date.now() - started < timeoutMs) {
        const port = await masterPort().catch(() => undefined);
        if (port && port !== oldPort && (await isMaster(port))) return Date.now() - started;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`the sentinels named no new master within ${timeoutMs} ms`);
    },
    async restartKilled(timeoutMs = 60_000) {
      if (!killed) return;
      const back = killed;
      back.child = launch(back.args);
      await waitAnswers(back.port);
      // healthy again once Sentinel made it a replica of the current master and its link is up
      const started = Date.now();
      while (Date.now() - started < timeoutMs) {
        if (await isSyncedReplica(back.port)) return;
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new Error(`the restarted Redis on ${back.port} is no synced replica after ${timeoutMs} ms`);
    },
    async close() {
      await Promise.all([...sentinels, ...data].map(stop));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
