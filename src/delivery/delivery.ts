/**
 * Delivery of what the QTSP owes others after a signature (spec 6.2, 6.3; step 10 of docs/architecture.md):
 * the outbox relay (in every process that writes the outbox, or in the one process a cluster's workers wake)
 * and, where configured, the workers, one per outbox topic.
 * What a topic's entries are and how one is delivered is plugged in by topic (src/deliveries.ts wires the
 * mediation records and the notifications); this module knows no topic. Starting never waits for Redis: the
 * connections come up in the background, and until they do the outbox simply keeps the entries.
 */
import { ConfigError } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import type { OutboxState, Store } from '../store/types.ts';
import { hostLookup, type HostLookup } from '../util/host-lookup.ts';
import type { Logger } from '../util/logger.ts';
import { DeliveryQueues, redisConnection, type QueueDepth } from './queue.ts';
import { OutboxRelay, type CommittedEntry } from './relay.ts';
import { DeliveryWorkers, type Deliver } from './worker.ts';

export interface DeliveryDeps {
  readonly store: Store;
  readonly logger: Logger;
  /** the outbox topics to relay */
  readonly topics: readonly string[];
  /** how each topic's entries are delivered; called only when this process runs the workers */
  readonly handlers: () => Readonly<Record<string, Deliver>>;
  /** run the workers in this process */
  readonly workers: boolean;
  /**
   * The outbox relay runs in another process (a cluster's primary, cli/serve-cluster.ts): this process starts no
   * relay of its own, and wake() calls this instead. Without it, this process relays.
   */
  readonly relayElsewhere?: () => void;
}

export interface TopicStatus {
  readonly outbox: Record<OutboxState, number>;
  /** undefined when Redis did not answer */
  readonly queue?: QueueDepth;
  readonly queueError?: string;
}

export interface Delivery {
  /**
   * hand new outbox entries over soon; never waits, never throws. `entries`: the ones just committed, which the
   * relay may then hand over without reading them back (relay.ts)
   */
  wake(entries?: readonly CommittedEntry[]): void;
  /** resolves when the relay has nothing in hand (tests) */
  idle(): Promise<void>;
  status(): Promise<Record<string, TopicStatus>>;
  close(): Promise<void>;
}

/** ioredis reports every failed reconnect; one line per outage is enough. */
function outageLogger(logger: Logger, what: string): { error: (err: Error) => void; ready: () => void } {
  let down = false;
  return {
    error: (err) => {
      if (down) return;
      down = true;
      logger.warn(
        { event: 'redis.unavailable', connection: what, error: err.message },
        'Redis is unavailable; deliveries wait in the outbox',
      );
    },
    ready: () => {
      if (!down) return;
      down = false;
      logger.info({ event: 'redis.available', connection: what }, 'Redis is available again');
    },
  };
}

/** The Redis URL must be resolved by now (resolveRedis in cli/redis.ts fills it in). */
export function startDelivery(config: Config, deps: DeliveryDeps): Delivery {
  const url = redisUrl(config);
  // Redis's host name resolved without the thread pool: a stop never waits for a DNS that does not answer
  const names = hostLookup();
  const queues = producerQueues(url, names, config, deps);
  const relay = deps.relayElsewhere ? undefined : startRelay(config, deps, queues);
  const workers = deps.workers ? startWorkers(url, names, config, deps) : undefined;
  return {
    // without a relay here, the primary's relay reads what the workers wrote
    wake: relay ? (entries) => relay.wake(entries) : () => deps.relayElsewhere!(),
    idle: async () => relay?.idle(),
    status: () => deliveryStatus(deps.store, queues),
    async close() {
      // no lookup and no reconnect from here on: connections that are up finish their work, the others stay down
      names.close();
      await relay?.stop();
      await workers?.close();
      await queues.close();
    },
  };
}

function redisUrl(config: Config): string {
  const url = config.redis.url;
  if (url) return url;
  throw new ConfigError(
    'setting redis.url (QTSP_REDIS_URL): required; `qtsp dev` and `qtsp serve` fill it in ' +
      '(REDIS_URL or a local redis-server)',
  );
}

/** the producer side: a fail-fast connection and the topics' queues on it */
function producerQueues(url: string, names: HostLookup, config: Config, deps: DeliveryDeps): DeliveryQueues {
  const log = outageLogger(deps.logger, 'producer');
  const connection = redisConnection(url, { blocking: false, onError: log.error, names });
  connection.on('ready', log.ready);
  return new DeliveryQueues(connection, deps.topics, config, log.error);
}

function startRelay(config: Config, deps: DeliveryDeps, queues: DeliveryQueues): OutboxRelay {
  const relay = new OutboxRelay({
    store: deps.store,
    queues,
    topics: deps.topics,
    intervalMs: config.delivery.relayIntervalMs,
    requeueAfterMs: config.delivery.requeueAfterMs,
    logger: deps.logger,
  });
  relay.start();
  return relay;
}

/** the workers, on a blocking connection of their own */
function startWorkers(url: string, names: HostLookup, config: Config, deps: DeliveryDeps): DeliveryWorkers {
  const log = outageLogger(deps.logger, 'worker');
  const connection = redisConnection(url, { blocking: true, onError: log.error, names });
  connection.on('ready', log.ready);
  return new DeliveryWorkers({ connection, store: deps.store, handlers: deps.handlers(), config, logger: deps.logger });
}

/** Outbox counts per topic, and the queue depth when Redis answers. */
export async function deliveryStatus(store: Store, queues: DeliveryQueues): Promise<Record<string, TopicStatus>> {
  const out: Record<string, TopicStatus> = {};
  for (const topic of queues.topics) {
    const outbox = await store.outboxCounts(topic);
    try {
      out[topic] = { outbox, queue: await queues.depth(topic) };
    } catch (err) {
      out[topic] = { outbox, queueError: (err as Error).message };
    }
  }
  return out;
}
