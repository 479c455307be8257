/**
 * Stopping, with `qtsp serve`, `qtsp dev` and `npm start` as real processes:
 * - SIGTERM with signDoc calls in flight: new connections are refused at once, every call in flight is
 *   answered 200, its evidence is in the store, and the process exits 0;
 * - SIGTERM after Redis and PostgreSQL are already gone: the process still exits, within its bound;
 * - SIGKILL of `npm start`, or of `qtsp dev` itself: no process they started (the QTSP, redis-server) remains.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { callSignDoc } from '../../src/rp/flow.ts';
import { openStore } from '../../src/store/open.ts';
import { freePort } from '../../src/util/free-port.ts';
import { sha256b64, waitFor } from '../helpers/delivery.ts';
import { alive, startServeFleet, type ServeFleet, type SharedParts } from '../helpers/instances.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { authorize, signDocBody } from '../helpers/signing.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** whether a TCP connection to 127.0.0.1:port is accepted */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe('SIGTERM of qtsp serve', () => {
  let fleet: ServeFleet;
  let shared: SharedParts;

  before(async () => {
    fleet = await startServeFleet();
    shared = fleet.shared;
  });
  after(async () => {
    await fleet?.close();
  });

  it('lets the signDoc calls in flight finish, refuses new connections, keeps every evidence row, exits 0', async () => {
    const env = fleet.instanceEnv('graceful', {
      extra: { QTSP_LIFECYCLE_DRAIN_TIMEOUT_MS: '60000', QTSP_LIFECYCLE_SHUTDOWN_TIMEOUT_MS: '90000' },
    });
    const serve = await fleet.spawn(env);
    const endpoints = shared.endpoints;
    const calls = 4;
    // one consent signs each document once: each call signs a document of its own
    const auth = await authorize(
      endpoints,
      Array.from({ length: calls }, (_, i) => ({ hash: sha256b64(`graceful stop ${i}`), label: `graceful stop ${i}` })),
    );

    // the bank holds every introspection answer until we let go: the calls are in the middle of the pipeline
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let arrived = 0;
    shared.sandbox.controls.introspection.hold = async () => {
      arrived++;
      await gate;
    };
    const inFlight = Array.from({ length: calls }, (_, i) =>
      callSignDoc(serve.signDocUrl, endpoints, signDocBody(auth.accessToken, [auth.hashes[i]!])),
    );
    try {
      await waitFor('every call to reach the introspection', () => arrived === calls);
      serve.child.kill('SIGTERM');
      await waitFor('the listener to refuse new connections', async () => !(await accepts(fleet.port)));
      assert.equal(serve.child.exitCode, null, 'still running: it waits for the calls in flight');
    } finally {
      release();
      delete shared.sandbox.controls.introspection.hold;
    }
    const results = await Promise.all(inFlight);
    assert.deepEqual(
      results.map((r) => r.status),
      Array(calls).fill(200),
      JSON.stringify(results.map((r) => r.body)),
    );
    const txn = String(results[0]!.headers['x-transaction-id']);
    assert.deepEqual(await serve.exited, { code: 0, signal: null }, serve.output());

    // what was written before the exit is in the store: one evidence row and one outbox entry per call
    const store = await openStore({ dataDir: env.QTSP_DATA_DIR!, store: { driver: 'sqlite', pingIntervalMs: 5000 } });
    try {
      assert.equal((await store.getTransaction(txn)).length, calls);
      const outbox = await store.outboxCounts('mediation');
      assert.equal(
        Object.values(outbox).reduce((a, b) => a + b, 0),
        calls,
      );
    } finally {
      await store.close();
    }
  });

  it('exits within its bound when Redis and PostgreSQL are already gone', async () => {
    let pg: PostgresServer | undefined = await startPostgres();
    try {
      const url = await pg.freshSchemaUrl();
      const p = await freePort();
      const pub = await freePort();
      const env = fleet.instanceEnv('gone', {
        port: p,
        publicationPort: pub,
        store: { driver: 'postgres', url },
        extra: { QTSP_LIFECYCLE_DRAIN_TIMEOUT_MS: '1000', QTSP_LIFECYCLE_SHUTDOWN_TIMEOUT_MS: '8000' },
      });
      const serve = await fleet.spawn(env);
      await shared.redis.stop();
      await pg.stop();
      pg = undefined;
      serve.child.kill('SIGTERM');
      // generous: the bound is 8 s; waiting three times that tells "bounded" from "hangs for ever"
      const ended = await Promise.race([serve.exited, delay(24_000, undefined, { ref: false })]);
      assert.ok(
        ended,
        `qtsp serve still runs 24 s after SIGTERM with Redis and PostgreSQL gone:\n${serve.output().slice(-2000)}`,
      );
      assert.equal(ended.signal, null, 'it ended by itself');
    } finally {
      await pg?.stop();
      if (!shared.redis.running) await shared.redis.restart();
    }
  });
});

/** pid -> parent pid of every process, from /proc */
function processTable(): Map<number, { ppid: number; comm: string }> {
  const table = new Map<number, { ppid: number; comm: string }>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const ppid = Number(stat.slice(close + 2).split(' ')[1]);
      table.set(Number(name), { ppid, comm });
    } catch {
      // ended while we looked
    }
  }
  return table;
}

function descendants(pid: number): { pid: number; comm: string }[] {
  const table = processTable();
  const out: { pid: number; comm: string }[] = [];
  const walk = (parent: number) => {
    for (const [p, info] of table) {
      if (info.ppid !== parent) continue;
      out.push({ pid: p, comm: info.comm });
      walk(p);
    }
  };
  walk(pid);
  return out;
}

/** starts a command, waits for `ready` in its output, returns it with the processes it started by then */
async function startAndWait(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  detached = false,
): Promise<{ child: ChildProcess; tree: { pid: number; comm: string }[]; output: () => string }> {
  const child = spawn(cmd, args, { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'], detached });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const collect = (d: Buffer) => {
      out += d.toString();
      if (ready.test(out)) resolve();
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    child.once('exit', (code) => reject(new Error(`${cmd} ended (${code}) before it was ready:\n${out.slice(-3000)}`)));
  });
  return { child, tree: descendants(child.pid!), output: () => out };
}

describe('no orphan process after SIGKILL of the parent', () => {
  let dataDir: string;
  const leftovers: number[] = [];
  before(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'qtsp-orphans-'));
  });
  after(() => {
    for (const pid of leftovers) if (alive(pid)) process.kill(pid, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  const devEnv = (dir: string): NodeJS.ProcessEnv => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      QTSP_DATA_DIR: dir,
      QTSP_SERVER_PORT: '0',
      QTSP_SERVER_PUBLICATION_PORT: '0',
      QTSP_OPS_PORT: '0',
      QTSP_SIGNER_RSA_POOL_SIZE: '0',
    };
    delete env['REDIS_URL']; // a local redis-server, the process that must not be orphaned
    delete env['QTSP_REDIS_URL'];
    return env;
  };
  const sandboxPorts = ['--as-port', '0', '--platform-port', '0', '--mediation-port', '0', '--smtp-port', '0'];

  async function assertAllEnd(tree: { pid: number; comm: string }[]): Promise<void> {
    leftovers.push(...tree.map((p) => p.pid));
    await waitFor(
      `every process started under the killed one to end (${tree.map((p) => `${p.comm}:${p.pid}`).join(', ')})`,
      () => tree.every((p) => !alive(p.pid)),
      30_000,
      100,
    );
  }

  it('`npm start` killed with SIGKILL: the QTSP and its redis-server end', async () => {
    const npm = await startAndWait(
      'npm',
      ['start', '--', ...sandboxPorts],
      devEnv(join(dataDir, 'npm')),
      /qtsp sandbox is running/,
    );
    assert.ok(
      npm.tree.some((p) => p.comm === 'redis-server'),
      `a local redis-server runs: ${JSON.stringify(npm.tree)}`,
    );
    assert.ok(
      npm.tree.some((p) => p.comm === 'node'),
      `the QTSP runs: ${JSON.stringify(npm.tree)}`,
    );
    npm.child.kill('SIGKILL');
    await assertAllEnd(npm.tree);
  });

  it('Ctrl-C on `npm start` (SIGINT to its process group, which npm forwards once more): one graceful stop', async () => {
    const env = { ...devEnv(join(dataDir, 'ctrl-c')), QTSP_LOG_LEVEL: 'info' };
    // its own process group, as a terminal's foreground job; the banner is printed just before the signal
    // handlers are installed, in the same tick
    const npm = await startAndWait('npm', ['start', '--', ...sandboxPorts], env, /qtsp sandbox is running/, true);
    const exited = new Promise<void>((resolve) => npm.child.once('exit', () => resolve()));
    process.kill(-npm.child.pid!, 'SIGINT');
    await exited;
    await assertAllEnd(npm.tree);
    const events = npm
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => (JSON.parse(l) as { event?: string }).event);
    assert.ok(events.includes('shutdown.done'), npm.output().slice(-2000));
    assert.ok(!events.includes('shutdown.forced'), 'the forwarded copy of the SIGINT is not a second Ctrl-C');
    assert.ok(
      !events.includes('shutdown.step_failed'),
      `every stop step succeeded (Redis outlived the queues):\n${npm.output().slice(-2000)}`,
    );
  });

  it('`qtsp dev` itself killed with SIGKILL: its redis-server ends (parent-death signal)', async () => {
    const dev = await startAndWait(
      process.execPath,
      ['bin/qtsp.js', 'dev', ...sandboxPorts],
      devEnv(join(dataDir, 'dev')),
      /qtsp sandbox is running/,
    );
    const redis = dev.tree.filter((p) => p.comm === 'redis-server');
    assert.equal(redis.length, 1, JSON.stringify(dev.tree));
    dev.child.kill('SIGKILL');
    await assertAllEnd(dev.tree);
  });
});
