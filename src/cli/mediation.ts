/**
 * `qtsp mediation status [--json]`: how far the records of spec 6.2 (and the notifications of 6.3) got:
 * the outbox (pending: not yet handed to the queue; queued; delivered = confirmed by the receiver; failed =
 * given up, kept for an operator), the queue depth in Redis, and the number of records the mediation service
 * has confirmed (stored, or refused as a duplicate of one it holds).
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { DELIVERY_TOPICS } from '../deliveries.ts';
import { deliveryStatus, type TopicStatus } from '../delivery/delivery.ts';
import { DeliveryQueues, redisConnection, withTimeout } from '../delivery/queue.ts';
import { MEDIATION_TOPIC } from '../mediation/record.ts';
import { openStore } from '../store/open.ts';
import { knownRedisUrl } from '../util/redis-server.ts';

const USAGE = 'usage: qtsp mediation status [--json]\n';

function line(label: string, counts: object): string {
  return `  ${label.padEnd(8)}${Object.entries(counts)
    .map(([k, v]) => `${k} ${v}`)
    .join('  ')}`;
}

export function formatStatus(status: Record<string, TopicStatus>): string {
  const out: string[] = [];
  for (const [topic, s] of Object.entries(status)) {
    out.push(topic === MEDIATION_TOPIC ? 'mediation records (spec 6.2)' : 'end-user notifications (spec 6.3)');
    out.push(line('outbox', s.outbox));
    out.push(s.queue ? line('queue', s.queue) : `  queue   unknown: ${s.queueError}`);
    const receiver = topic === MEDIATION_TOPIC ? 'confirmed by the mediation service' : 'accepted by the mail server';
    out.push(`  ${receiver}: ${s.outbox.delivered}`);
  }
  return `${out.join('\n')}\n`;
}

/** Queues on a connection that had its chance to come up (calls on a fresh one would fail at once). */
async function connectQueues(url: string, config: Config): Promise<DeliveryQueues> {
  const connection = redisConnection(url, { blocking: false, onError: () => undefined });
  await withTimeout(
    new Promise((resolve) => connection.once('ready', resolve)),
    config.redis.commandTimeoutMs,
    'connect',
  ).catch(() => undefined);
  return new DeliveryQueues(connection, DELIVERY_TOPICS, config, () => undefined);
}

export async function runMediation(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { json: { type: 'boolean', default: false } },
  });
  if (positionals[0] !== 'status' || positionals.length !== 1) {
    process.stderr.write(USAGE);
    return 2;
  }
  const config = loadConfig();
  const store = await openStore(config);
  const url = knownRedisUrl(config.redis.url, process.env, config.dataDir);
  const queues = url ? await connectQueues(url, config) : undefined;
  try {
    const status = queues
      ? await deliveryStatus(store, queues)
      : Object.fromEntries(
          await Promise.all(
            DELIVERY_TOPICS.map(async (t) => [
              t,
              {
                outbox: await store.outboxCounts(t),
                queueError: 'no Redis known (redis.url, REDIS_URL, or a running qtsp dev)',
              },
            ]),
          ),
        );
    process.stdout.write(values.json ? `${JSON.stringify(status, null, 2)}\n` : formatStatus(status));
    return 0;
  } finally {
    await queues?.close();
    await store.close();
  }
}
