/**
 * The delivery queues on Redis (bullmq): one queue per outbox topic (the topics are given by whoever wires
 * the delivery: mediation records and notifications, src/deliveries.ts). Every call has its own timeout (with
 * a Redis that was never reachable, bullmq's `add()` stays pending for ever), and the connection never queues
 * commands while Redis is away (enableOfflineQueue false), so callers learn at once and the outbox keeps the
 * entry.
 *
 * One job per hand-over: it carries the outbox ids of the entries the relay handed over together (one topic,
 * at most the relay's batch), not their payload, which stays in the store (notifications hold a user's sub,
 * which has no business in Redis). bullmq's client work is per job, so a job of many ids costs the process that
 * signs a fraction per record of a job each. Retries and final states stay per entry (worker.ts).
 *
 * Handing an entry over twice must not let two jobs deliver it: a second job would retry it on a backoff of
 * its own and could post it while the first does. The job id is derived from the ids (the same entries handed
 * over again are dropped by bullmq); entries that end up in two jobs all the same (a read after a crash or a
 * Redis restart groups them otherwise) are settled by the job that claims them first: a hash `carriers` maps
 * each entry to the job that holds it, and a job delivers only the entries no other unfinished job holds
 * (`claimEntries`, run by the worker at the start of each attempt, so the relay's hand-over costs no more).
 * A Redis that lost a job lost, or no longer points to, what held its entries.
 */
import { createHash } from 'node:crypto';
import { isIP, connect as netConnect, Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { Queue, type JobsOptions } from 'bullmq';
import { AbstractConnector, Redis, type RedisOptions } from 'ioredis';
import { ConfigError } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { hostLookup, type HostLookup } from '../util/host-lookup.ts';
import { redisAddress, type RedisAddress } from '../util/redis-address.ts';

export interface DeliveryJob {
  /** the outbox ids of one hand-over, all of the queue's topic (mediation: the reference_ids) */
  readonly ids: readonly string[];
}

/**
 * The job id of a hand-over: a digest of its ids, in any order. Handing the same entries over again (a crash
 * between the add and the outbox mark) gives the same id, which bullmq drops. bullmq refuses ids with `:` and
 * all-digit ids: base64url has neither, and the prefix keeps the id from being all digits.
 */
export function handOverJobId(ids: readonly string[]): string {
  return `h-${createHash('sha256')
    .update([...ids].sort().join('\n'))
    .digest('base64url')}`;
}

/** the hash of a topic: outbox id -> id of the job that holds it (see the head of this file) */
export function carriersKey(prefix: string, topic: string): string {
  return `${prefix}:${topic}:carriers`;
}

/**
 * KEYS[1] the carriers hash; ARGV[1] the topic's job key prefix, ARGV[2] a job id, then outbox ids. Returns
 * the ids that job may deliver, now held by it: those that no other job holds which Redis still has and has
 * not finished (bullmq sets `finishedOn` on a completed job and on one given up, not between retries).
 */
const CLAIM = `local mine = {}
for i = 3, #ARGV do
  local holder = redis.call('HGET', KEYS[1], ARGV[i])
  local job = holder and ARGV[1] .. holder
  if holder == ARGV[2] or not holder or redis.call('EXISTS', job) == 0
    or redis.call('HEXISTS', job, 'finishedOn') == 1 then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[2])
    mine[#mine + 1] = ARGV[i]
  end
end
return mine`;

/** KEYS[1] the carriers hash; ARGV[1] a job id, then outbox ids: those the job holds are let go */
const LET_GO = `for i = 2, #ARGV do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[1] then redis.call('HDEL', KEYS[1], ARGV[i]) end
end
return 0`;

/** The entries of `ids` that job `jobId` holds, claimed now (see CLAIM); worker.ts calls it at each attempt. */
export async function claimEntries(
  redis: Redis,
  config: Pick<Config, 'redis'>,
  where: { topic: string; jobId: string },
  ids: readonly string[],
): Promise<string[]> {
  const { prefix, commandTimeoutMs } = config.redis;
  const jobs = `${prefix}:${where.topic}:`;
  const claimed = redis.eval(CLAIM, 1, carriersKey(prefix, where.topic), jobs, where.jobId, ...ids);
  return (await withTimeout(claimed, commandTimeoutMs, `queue ${where.topic}: claim`)) as string[];
}

/** Job `jobId` has settled these entries: it holds them no longer (the carriers hash keeps only live claims). */
export async function letGoEntries(
  redis: Redis,
  config: Pick<Config, 'redis'>,
  where: { topic: string; jobId: string },
  ids: readonly string[],
): Promise<void> {
  const { prefix, commandTimeoutMs } = config.redis;
  const done = redis.eval(LET_GO, 1, carriersKey(prefix, where.topic), where.jobId, ...ids);
  await withTimeout(done, commandTimeoutMs, `queue ${where.topic}: let go`);
}

export class QueueTimeoutError extends Error {
  override name = 'QueueTimeoutError';
}

/** Rejects after `ms`; the underlying call may still finish later (a late add is deduplicated by job id). */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new QueueTimeoutError(`${what}: no answer from Redis within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * ioredis's own connector (StandaloneConnector), with the host resolved first by `names`
 * (util/host-lookup.ts): its reconnects, every 2 s while Redis or its name is gone, then leave no lookup that a
 * stop would wait for. Once `names` is closed, a reconnect gets a stream that closes without an error: the
 * connection ends quietly, whoever still listens to it or not (bullmq's copies).
 */
function connectorWith(names: HostLookup) {
  return class LookupConnector extends AbstractConnector {
    private readonly options: RedisOptions;

    constructor(options: unknown) {
      const o = options as RedisOptions;
      super(o.disconnectTimeout ?? 2000);
      this.options = o;
    }

    async connect(): Promise<Socket> {
      const o = this.options;
      const host = o.host ?? 'localhost';
      this.connecting = true;
      let address = host;
      if (!isIP(host)) {
        try {
          const found = await names.addresses(host, o.family === 6 ? 6 : o.family === 4 ? 4 : 0);
          address = found[0]!.address;
        } catch (err) {
          // a name not found reaches ioredis as a connection that failed, which it retries
          return this.ended((err as NodeJS.ErrnoException).code === 'ECANCELLED' ? undefined : (err as Error));
        }
      }
      // as ioredis's: no stream once disconnect() came first
      if (!this.connecting) throw new Error('Connection is closed.');
      const target = { host: address, port: o.port ?? 6379 };
      // the certificate is checked against the name, not the address it resolved to
      const servername = isIP(host) ? {} : { servername: host };
      this.stream = o.tls ? tlsConnect({ ...servername, ...o.tls, ...target }) : netConnect(target);
      this.stream.once('error', (err: Error) => (this.firstError = err));
      return this.stream as Socket;
    }

    /** a stream already closed: ioredis reports `firstError`, if any, and reconnects or ends as it would */
    private ended(err?: Error): Socket {
      const stream = new Socket();
      stream.destroy();
      this.stream = stream;
      this.firstError = err;
      return stream;
    }
  };
}

/**
 * A Redis connection. `blocking` (workers) must retry commands for ever (bullmq requires
 * maxRetriesPerRequest null); producers fail fast. ioredis reconnects on its own; errors are reported through
 * onError, which the caller rate-limits (ioredis emits one per reconnect attempt). Host names are resolved by
 * `names`, which the owner closes when it stops: from then on no connection (bullmq's copies of this one
 * included) reconnects. Without `names`, the connection has a lookup of its own.
 */
export function redisConnection(
  url: string,
  options: { blocking: boolean; onError: (err: Error) => void; names?: HostLookup },
): Redis {
  const names = options.names ?? hostLookup();
  // reconnect after 50 ms, 100 ms, ... at most every 2 s: Redis coming back is noticed within 2 s
  const retryStrategy = (times: number) => (names.closed ? null : Math.min(times * 50, 2000));
  const common: RedisOptions = {
    connectTimeout: 2000,
    retryStrategy,
    ...(options.blocking
      ? { maxRetriesPerRequest: null, enableOfflineQueue: true }
      : { maxRetriesPerRequest: 1, enableOfflineQueue: false }),
  };
  const address = redisAddress(url);
  const redis =
    address.kind === 'server'
      ? new Redis(url, { ...common, Connector: connectorWith(names) })
      : new Redis({ ...common, ...sentinelOptions(address, retryStrategy) });
  redis.on('error', options.onError);
  return redis;
}

/**
 * ioredis's SentinelConnector: asks the sentinels in turn for the current master, checks that the server it
 * reached calls itself master (a demoted one is left), and reconnects through the sentinels when the master goes
 * away or a sentinel announces a new one (failoverDetector), so a failover needs nothing from us.
 */
function sentinelOptions(address: RedisAddress & { kind: 'sentinel' }, retry: (times: number) => number | null) {
  return {
    sentinels: address.sentinels.map((s) => ({ host: s.host, port: s.port })),
    name: address.name,
    role: 'master' as const,
    sentinelRetryStrategy: retry,
    sentinelCommandTimeout: 2000,
    failoverDetector: true,
  };
}

/** Retries with exponential backoff and jitter (bullmq's built-in strategy); failed jobs are kept for inspection. */
export function jobOptions(config: Pick<Config, 'delivery'>): JobsOptions {
  return {
    attempts: config.delivery.attempts,
    backoff: { type: 'exponential', delay: config.delivery.backoffMs, jitter: 0.5 },
    // completed jobs stay a day: a second add() of the same id within that time is a no-op
    removeOnComplete: { age: 24 * 3600 },
    removeOnFail: false,
  };
}

export interface QueueDepth {
  readonly waiting: number;
  readonly active: number;
  readonly delayed: number;
  readonly failed: number;
  readonly completed: number;
}

/**
 * The producer side: hand outbox entries to their topic's queue. A bullmq Queue runs its setup commands
 * once, when created, and stays broken if they fail; with our fail-fast connection that would be for good.
 * So each Queue is created on first use, on a connection that is up, and kept only once its setup succeeded.
 */
export class DeliveryQueues {
  private readonly queues = new Map<string, Queue<DeliveryJob>>();

  constructor(
    readonly connection: Redis,
    /** the outbox topics that have a queue */
    readonly topics: readonly string[],
    private readonly config: Pick<Config, 'redis' | 'delivery'>,
    private readonly onError: (err: Error) => void,
  ) {}

  /** Redis answers right now (a call made while it does not would only wait for the timeout). */
  get ready(): boolean {
    return this.connection.status === 'ready';
  }

  private async queue(topic: string): Promise<Queue<DeliveryJob>> {
    if (!this.topics.includes(topic)) throw new TypeError(`no delivery queue for outbox topic ${topic}`);
    const known = this.queues.get(topic);
    if (known) return known;
    const queue = new Queue<DeliveryJob>(topic, { connection: this.connection, prefix: this.config.redis.prefix });
    queue.on('error', this.onError);
    try {
      await withTimeout(queue.waitUntilReady(), this.config.redis.commandTimeoutMs, `queue ${topic}: setup`);
    } catch (err) {
      void queue.close().catch(() => undefined);
      throw err;
    }
    this.queues.set(topic, queue);
    return queue;
  }

  /** Adds one job carrying the ids of these outbox entries (all of one topic; the caller bounds how many). */
  async add(topic: string, ids: readonly string[]): Promise<void> {
    const options = { ...jobOptions(this.config), jobId: handOverJobId(ids) };
    const queue = await this.queue(topic);
    await withTimeout(queue.add(topic, { ids }, options), this.config.redis.commandTimeoutMs, `queue ${topic}: add`);
  }

  /**
   * Redis's run_id (INFO server, "random value identifying the Redis server"): a new one after a reconnect
   * means a Redis that restarted, which may have come back without the jobs it held (no persistence, or a
   * failover to a replica that had not got them).
   */
  async runId(): Promise<string> {
    const info = await withTimeout(this.connection.info('server'), this.config.redis.commandTimeoutMs, 'INFO server');
    const runId = /^run_id:([0-9a-f]+)\r?$/m.exec(info)?.[1];
    if (!runId) throw new Error('INFO server shows no run_id');
    return runId;
  }

  async depth(topic: string): Promise<QueueDepth> {
    const queue = await this.queue(topic);
    const counts = await withTimeout(
      queue.getJobCounts('waiting', 'active', 'delayed', 'failed', 'completed', 'prioritized'),
      this.config.redis.commandTimeoutMs,
      `queue ${topic}: counts`,
    );
    return {
      waiting: (counts['waiting'] ?? 0) + (counts['prioritized'] ?? 0),
      active: counts['active'] ?? 0,
      delayed: counts['delayed'] ?? 0,
      failed: counts['failed'] ?? 0,
      completed: counts['completed'] ?? 0,
    };
  }

  async close(): Promise<void> {
    await Promise.allSettled(
      [...this.queues.values()].map((q) => withTimeout(q.close(), this.config.redis.commandTimeoutMs, 'queue close')),
    );
    this.connection.disconnect();
  }
}

/**
 * At start: a Sentinel setting that no sentinel answers, or whose master name none of them monitors, is a
 * configuration error naming the setting (a plain Redis may be down at start: deliveries wait in the outbox).
 */
export async function checkSentinels(url: string, timeoutMs: number): Promise<void> {
  const address = redisAddress(url);
  if (address.kind !== 'sentinel') return;
  const failures: string[] = [];
  for (const { host, port } of address.sentinels) {
    const sentinel = new Redis({ host, port, lazyConnect: true, connectTimeout: timeoutMs, retryStrategy: () => null });
    sentinel.on('error', () => undefined);
    try {
      await withTimeout(sentinel.connect(), timeoutMs, `sentinel ${host}:${port}`);
      const master = await withTimeout(
        sentinel.call('SENTINEL', 'get-master-addr-by-name', address.name),
        timeoutMs,
        `sentinel ${host}:${port}`,
      );
      if (master) return;
      throw new ConfigError(
        `setting redis.sentinelName (QTSP_REDIS_SENTINEL_NAME): the sentinel at ${host}:${port} monitors ` +
          `no master named "${address.name}"`,
      );
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      failures.push(`${host}:${port}: ${(err as Error).message}`);
    } finally {
      sentinel.disconnect();
    }
  }
  throw new ConfigError(
    `setting redis.sentinels (QTSP_REDIS_SENTINELS): no sentinel answered (${failures.join('; ')})`,
  );
}
