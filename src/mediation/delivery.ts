/**
 * Delivery of what the QTSP owes others after a signature (DESIGN step 10, spec 6.2, 6.3), assembled from
 * the configuration: the outbox relay (always, in every process that writes the outbox) and, where
 * configured, the workers that post mediation records and send notifications. Starting never waits for
 * Redis: the connections come up in the background, and until they do the outbox simply keeps the entries.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Agent } from 'node:https';
import { ConfigError } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { ensureMailCertificate } from '../notification/mail-certificate.ts';
import { notificationDeliverer } from '../notification/deliver.ts';
import { NOTIFICATION_TOPIC } from '../notification/request.ts';
import type { OutboxState, Store } from '../store/types.ts';
import type { IdpDirectory } from '../trust/idp-directory.ts';
import type { Logger } from '../util/logger.ts';
import { mediationDeliverer } from './deliver.ts';
import { DeliveryQueues, redisConnection, TOPICS, type QueueDepth } from './queue.ts';
import { MEDIATION_TOPIC } from './record.ts';
import { OutboxRelay } from './relay.ts';
import { DeliveryWorkers, type Deliver } from './worker.ts';

export interface DeliveryDeps {
  readonly store: Store;
  /** presents our TLS client certificate (mediation service, spec 5.12) */
  readonly mtlsAgent: Agent;
  readonly idps: Pick<IdpDirectory, 'record'>;
  readonly logger: Logger;
  /** run the workers in this process */
  readonly workers: boolean;
}

export interface TopicStatus {
  readonly outbox: Record<OutboxState, number>;
  /** undefined when Redis did not answer */
  readonly queue?: QueueDepth;
  readonly queueError?: string;
}

export interface Delivery {
  /** hand new outbox entries over soon; never waits, never throws */
  wake(): void;
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
      logger.warn({ event: 'redis.unavailable', connection: what, error: err.message }, 'Redis is unavailable; deliveries wait in the outbox');
    },
    ready: () => {
      if (!down) return;
      down = false;
      logger.info({ event: 'redis.available', connection: what }, 'Redis is available again');
    },
  };
}

export function recipientCertDir(config: Pick<Config, 'dataDir' | 'notification'>): string {
  return config.notification.recipientCertDir ?? join(config.dataDir, 'notification-recipients');
}

function handlers(config: Config, deps: DeliveryDeps): Record<string, Deliver> {
  return {
    [MEDIATION_TOPIC]: mediationDeliverer({ url: config.mediation.url, agent: deps.mtlsAgent, timeoutMs: config.delivery.timeoutMs, logger: deps.logger }),
    [NOTIFICATION_TOPIC]: notificationDeliverer({
      smtpUrl: config.notification.smtpUrl,
      from: config.notification.from,
      spId: config.qtspId,
      ca: readFileSync(config.trust.caFile),
      timeoutMs: config.delivery.timeoutMs,
      signer: ensureMailCertificate(config.dataDir, config.notification.from),
      chain: [],
      recipientCertDir: recipientCertDir(config),
      idps: deps.idps,
    }),
  };
}

/** The Redis URL must be resolved by now (resolveRedis in cli/redis.ts fills it in). */
export function startDelivery(config: Config, deps: DeliveryDeps): Delivery {
  const url = config.redis.url;
  if (!url) throw new ConfigError('setting redis.url (QTSP_REDIS_URL): required; `qtsp dev` and `qtsp serve` fill it in (REDIS_URL or a local redis-server)');
  const producerLog = outageLogger(deps.logger, 'producer');
  const connection = redisConnection(url, { blocking: false, onError: producerLog.error });
  connection.on('ready', producerLog.ready);
  const queues = new DeliveryQueues(connection, config, producerLog.error);
  const relay = new OutboxRelay({ store: deps.store, queues, topics: TOPICS, intervalMs: config.delivery.relayIntervalMs, requeueAfterMs: config.delivery.requeueAfterMs, logger: deps.logger });
  relay.start();
  let workers: DeliveryWorkers | undefined;
  if (deps.workers) {
    const workerLog = outageLogger(deps.logger, 'worker');
    const workerConnection = redisConnection(url, { blocking: true, onError: workerLog.error });
    workerConnection.on('ready', workerLog.ready);
    workers = new DeliveryWorkers({ connection: workerConnection, store: deps.store, handlers: handlers(config, deps), config, logger: deps.logger });
  }
  return {
    wake: () => relay.wake(),
    idle: () => relay.idle(),
    status: () => deliveryStatus(deps.store, queues),
    async close() {
      await relay.stop();
      await workers?.close();
      await queues.close();
    },
  };
}

/** Outbox counts per topic, and the queue depth when Redis answers. */
export async function deliveryStatus(store: Store, queues: DeliveryQueues): Promise<Record<string, TopicStatus>> {
  const out: Record<string, TopicStatus> = {};
  for (const topic of TOPICS) {
    const outbox = await store.outboxCounts(topic);
    try {
      out[topic] = { outbox, queue: await queues.depth(topic) };
    } catch (err) {
      out[topic] = { outbox, queueError: (err as Error).message };
    }
  }
  return out;
}
