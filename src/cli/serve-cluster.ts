/**
 * `qtsp serve` with server.workers != 1: one QTSP process per worker (node:cluster), all serving signDoc and
 * the publication endpoints on the same ports; the primary starts, watches and stops them, and serves the
 * operations port for all of them (http/cluster-ops.ts: their metrics aggregated, ready when they are).
 *
 * What the workers share, and why it is correct: every worker is a full QTSP instance, as several instances
 * behind a load balancer would be. The evidence store must then be PostgreSQL (the store built for several
 * instances: the outbox marks are compare-and-set, so each worker's relay may run); the SQLite store is one
 * file owned by one writing process (its group commit and, later, its writer thread live in that process), so
 * several workers on it are refused at start rather than left to contend for the file. The delivery queues
 * are one Redis (the primary provides it: redis.url, REDIS_URL or a local redis-server) with the same prefix;
 * bullmq workers in several processes are what it is made for. The outbox relay runs once, in the primary: the
 * workers write outbox entries and wake it over IPC (at most one message per GATHER_MS each, and always one
 * after the last entry). A relay in every worker was correct (compare-and-set marks, bullmq drops a job id it
 * has) but each read and handed over the entries of all the others too, so two workers spent markedly more
 * CPU per signDoc than one process (docs/performance.md). Each worker pulls the key archive into its own clone
 * (<dataDir>/key-archive-worker-<slot>) and the IDP list itself, and keeps its own caches and RSA key pool; the
 * CA material in dataDir is only read.
 *
 * A worker that dies is replaced (the others keep serving); a worker that dies before it ever listened stops
 * the whole service with its exit code (a configuration or start-up fault would only repeat).
 */
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { startOutboxRelay } from '../deliveries.ts';
import { GATHER_MS } from '../delivery/relay.ts';
import { type ClusterWorker, clusterOps } from '../http/cluster-ops.ts';
import { type OpsListener, serveOps } from '../http/ops.ts';
import { startAnchorPublisher } from '../journal/anchor-repo.ts';
import { startRetention } from '../retention/purge.ts';
import { startQtsp } from '../service.ts';
import { openStore } from '../store/open.ts';
import { lockDataDir } from '../util/instance-lock.ts';
import { logger } from '../util/logger.ts';
import { provideRedis } from '../util/redis-server.ts';
import { checkSentinels } from '../delivery/queue.ts';

/** server.workers: 0 = one per core */
export function workerCount(config: Config): number {
  return config.server.workers === 0 ? availableParallelism() : config.server.workers;
}

/** Refuses what several processes cannot share (see the header). */
export function checkClusterConfig(config: Config, workers: number): void {
  if (workers > 1 && config.store.driver !== 'postgres') {
    throw new ConfigError(
      `setting server.workers (QTSP_SERVER_WORKERS): ${workers} processes need store.driver postgres; ` +
        `the SQLite store (${config.dataDir}/qtsp.sqlite) has one writing process. ` +
        'Use server.workers=1 with SQLite, or PostgreSQL for several processes.',
    );
  }
}

interface Listening {
  readonly type: 'qtsp-listening';
  readonly signDocUrl: string;
  readonly publicationUrl: string;
}

const RESTART_DELAY_MS = 1000;
const SLOT_ENV = 'QTSP_CLUSTER_SLOT';

interface RelayWake {
  readonly type: 'qtsp-relay-wake';
}

/**
 * `wake` for a worker whose relay runs elsewhere: the first wake is sent at once, the wakes of the next
 * `windowMs` become one more send at its end (so an entry written then is announced after it was written),
 * and so on. The relay gathers for GATHER_MS after a wake anyway: more messages would only cost both sides.
 */
export function coalescedWake(send: () => void, windowMs: number): () => void {
  let window: NodeJS.Timeout | undefined;
  let again = false;
  const close = () => {
    if (!again) {
      window = undefined;
      return;
    }
    again = false;
    send();
    window = setTimeout(close, windowMs).unref();
  };
  return () => {
    if (window) {
      again = true;
      return;
    }
    send();
    window = setTimeout(close, windowMs).unref();
  };
}

/** What the primary holds for all its workers: the data directory's lock, the store, Redis and the relay. */
interface PrimaryShared {
  readonly redisUrl: string;
  readonly relay: { wake(): void };
  /** stops the relay, closes the store, stops Redis and releases the lock, in this order */
  close(): Promise<void>;
}

async function openPrimaryShared(config: Config): Promise<PrimaryShared> {
  // the cluster is one instance: the primary holds the data directory's lock for all its workers
  const lock = lockDataDir(config.dataDir);
  // the schema is migrated once, here, before the workers open the store together; the relay keeps it open
  const store = await openStore(config);
  let redis: Awaited<ReturnType<typeof provideRedis>>;
  try {
    redis = await provideRedis(config.redis.url, process.env, config.dataDir);
    await checkSentinels(redis.url, config.redis.commandTimeoutMs);
  } catch (err) {
    await store.close();
    lock.release();
    throw err;
  }
  // the one outbox relay of the instance (see the header); never waits for Redis
  const relay = startOutboxRelay({ ...config, redis: { ...config.redis, url: redis.url } }, store, logger);
  // the purge runs beside the one relay, in this process only (retention/purge.ts)
  const retention = startRetention(config, store, logger);
  // the workers seal; the anchor repository in the data directory is written here only (journal/anchor-repo.ts)
  const { enabled, sealIntervalSeconds } = config.journal;
  const anchor = enabled ? startAnchorPublisher(store, config.dataDir, sealIntervalSeconds, logger) : undefined;
  return {
    redisUrl: redis.url,
    relay,
    async close() {
      await relay.close();
      await retention.close();
      await anchor?.close();
      await store.close();
      await redis.stop();
      lock.release();
    },
  };
}

/** The workers of the primary: started together, replaced when one dies, stopped together. */
interface WorkerPool {
  /** forks `count` workers; the first one's addresses once all listen, an error when one exits before */
  startAll(count: number): Promise<Listening>;
  /** asks every worker to stop and waits for their exits; from then on none is replaced */
  stopAll(): Promise<void>;
  /** the workers that listen now, with their slots */
  listening(): ClusterWorker[];
}

function workerPool(env: Record<string, string>, relay: { wake(): void }): WorkerPool {
  let stopping = false;
  let failure: ((err: Error) => void) | undefined;
  const listening = new Map<Worker, number>();
  const onExit = (worker: Worker, slot: number, code: number, signal: string) => {
    const wasListening = listening.delete(worker);
    if (stopping) return;
    if (!wasListening) {
      failure?.(new Error(`a qtsp worker exited (${signal ?? code}) before it listened`));
      return;
    }
    logger.error(
      { event: 'cluster.worker_exit', pid: worker.process.pid, code, signal },
      'qtsp worker exited; starting a new one',
    );
    setTimeout(() => {
      if (!stopping) fork(slot);
    }, RESTART_DELAY_MS).unref();
  };
  // each worker has a slot (0..workers-1) that its replacement inherits: its own key-archive clone
  const fork = (slot: number): Worker => {
    const worker = cluster.fork({ ...env, [SLOT_ENV]: String(slot) });
    worker.on('message', (msg: Listening | RelayWake) => {
      if (msg?.type === 'qtsp-listening') listening.set(worker, slot);
      else if (msg?.type === 'qtsp-relay-wake') relay.wake();
    });
    worker.once('exit', (code, signal) => onExit(worker, slot, code, signal));
    return worker;
  };
  const stopOne = (w: Worker | undefined) =>
    new Promise<void>((resolve) => {
      if (!w || w.isDead()) return resolve();
      w.once('exit', () => resolve());
      // a listening worker drains its calls (asked over IPC: see runClusterWorker); one still starting has
      // nothing to drain and may not listen to IPC yet: SIGTERM ends it
      if (listening.has(w)) w.send({ type: 'qtsp-stop' });
      else w.process.kill('SIGTERM');
    });
  return {
    async startAll(count) {
      const first = await new Promise<Listening>((resolve, reject) => {
        failure = reject;
        let listened = 0;
        for (let i = 0; i < count; i++) {
          fork(i).on('message', (msg: Listening) => {
            if (msg?.type !== 'qtsp-listening') return;
            if (++listened === count) resolve(msg);
          });
        }
      });
      failure = undefined;
      return first;
    },
    async stopAll() {
      stopping = true;
      await Promise.all(Object.values(cluster.workers ?? {}).map(stopOne));
    },
    listening: () => [...listening].map(([worker, slot]) => ({ worker, slot })),
  };
}

/**
 * The operations port, served by the primary from its workers' answers. It listens before the workers start
 * (a probe meanwhile reads "not ready"); its port is passed to them as ops.port, the address they report.
 */
async function listenClusterOps(
  config: Config,
  workers: number,
  listening: () => ClusterWorker[],
): Promise<OpsListener> {
  return serveOps(
    config,
    clusterOps({
      listening,
      expected: workers,
      // the worker bounds its own snapshot by metricsTimeoutMs; the rest is IPC and serialisation
      metricsTimeoutMs: config.ops.metricsTimeoutMs + 2000,
      ...(config.instance.id === undefined ? {} : { defaultLabels: { qtsp_instance: config.instance.id } }),
    }),
  );
}

/** The primary: Redis for all, N workers, their replacement, and the stop of all of them. */
export async function runClusterPrimary(
  config: Config,
  workers: number,
  untilSignal: (stop: () => Promise<void>) => Promise<number>,
): Promise<number> {
  checkClusterConfig(config, workers);
  const shared = await openPrimaryShared(config);
  let pool: WorkerPool | undefined;
  const ops = await listenClusterOps(config, workers, () => pool?.listening() ?? []).catch(async (err: unknown) => {
    await shared.close();
    throw err;
  });
  const opsPort = new URL(ops.url).port;
  pool = workerPool({ QTSP_REDIS_URL: shared.redisUrl, QTSP_OPS_PORT: opsPort }, shared.relay);
  let first: Listening;
  try {
    first = await pool.startAll(workers);
  } catch (err) {
    await ops.close();
    await pool.stopAll();
    await shared.close();
    throw err;
  }
  process.stdout.write(`qtsp serving signDoc at ${first.signDocUrl} (${workers} processes)\n`);
  process.stdout.write(`qtsp publishing OCSP, CRLs, TSA at ${first.publicationUrl}\n`);
  process.stdout.write(`qtsp operations (health, metrics) at ${ops.url}\n`);
  return untilSignal(async () => {
    await ops.close(); // first, as one process does: a probe that cannot connect takes the instance out
    await pool.stopAll(); // their last outbox entries are written and announced before the relay stops
    await shared.close();
  });
}

/** A worker: one QTSP instance; tells the primary where it listens; stops on SIGTERM/SIGINT or the primary's word. */
export async function runClusterWorker(
  config: Config,
  untilSignal: (stop: () => Promise<void>) => Promise<number>,
): Promise<number> {
  // until it listens, a stop ends the worker at once: nothing to drain
  const early = () => process.exit(0);
  process.once('SIGTERM', early);
  process.once('SIGINT', early);
  const slot = Number(process.env[SLOT_ENV] ?? cluster.worker?.id ?? 0);
  let qtsp;
  try {
    qtsp = await startQtsp(config, {
      keyArchiveDir: join(config.dataDir, `key-archive-worker-${slot}`),
      dataDirLockHeldByPrimary: true,
      // a wake that cannot reach the primary (it is stopping) is dropped: its relay's timer passes are the backstop
      relayElsewhere: coalescedWake(() => {
        if (process.connected)
          process.send!({ type: 'qtsp-relay-wake' } satisfies RelayWake, undefined, undefined, () => undefined);
      }, GATHER_MS),
    });
  } catch (err) {
    // the IPC channel would keep a failed worker alive: end it, so that the primary sees it never listened
    process.stderr.write(`qtsp worker ${process.pid}: ${(err as Error).message}\n`);
    process.exit(1);
  }
  process.off('SIGTERM', early);
  process.off('SIGINT', early);
  let signalled = false;
  process.once('SIGTERM', () => (signalled = true));
  process.once('SIGINT', () => (signalled = true));
  // the primary asks over IPC rather than by signal: a Ctrl-C in a terminal has already signalled the whole
  // process group, and a second signal would cut the drain short (util/lifecycle.ts)
  process.on('message', (msg: { type?: string }) => {
    if (msg?.type === 'qtsp-stop' && !signalled) process.kill(process.pid, 'SIGTERM');
  });
  const stopped = untilSignal(() => qtsp.close());
  process.send!({
    type: 'qtsp-listening',
    signDocUrl: qtsp.signDocUrl,
    publicationUrl: qtsp.publicationUrl,
  } satisfies Listening);
  return stopped;
}
