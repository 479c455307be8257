/**
 * The queue floor: what handing a signDoc's outbox records to Redis costs the process that hands them over,
 * without the relay around it: one bullmq `add` per record, with the job the service makes for it (its data,
 * the delivery options of queue.ts jobOptions and a job id of its own), `concurrency` at a time, on one
 * connection to the bench's redis-server. CPU of this process only; Redis's own is no one's floor.
 */
import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { loadConfig } from '../src/config/load.ts';
import { jobOptions } from '../src/delivery/queue.ts';

/** CPU ms of one add, after a warm-up as long as the run */
export async function queueAddFloor(redisUrl: string, n: number, concurrency: number): Promise<number> {
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const queue = new Queue('bench-queue-floor', { connection, prefix: `bench-floor-${randomUUID()}` });
  const options = jobOptions(loadConfig({}, {}));
  const run = async (count: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < count) {
          const id = randomUUID();
          await queue.add('mediation', { id }, { ...options, jobId: id });
        }
      }),
    );
  };
  try {
    await run(n);
    const c0 = process.cpuUsage();
    await run(n);
    const cpu = process.cpuUsage(c0);
    return (cpu.user + cpu.system) / 1000 / n;
  } finally {
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    connection.disconnect();
  }
}
