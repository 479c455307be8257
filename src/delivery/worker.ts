/**
 * Delivery workers: one bullmq Worker per outbox topic; a job carries the outbox ids of one hand-over
 * (queue.ts), and the worker delivers them one after the other. Each entry's outcome is written back to the
 * outbox at once: delivered; queued with the error (one more attempt counted) while retries remain; failed when
 * the attempts are used up or the failure is permanent (kept, never dropped: `qtsp mediation status` shows it).
 * One entry's failure does not hold up the others of its job. While an entry of the job is to be retried, the
 * job fails its attempt and bullmq retries it with exponential backoff and jitter (queue.ts jobOptions); a
 * retry skips the entries the outbox shows delivered or failed, so an entry's attempts count as they would in
 * a job of its own. A job that ends with an entry given up lands in bullmq's failed set (kept for inspection).
 * An entry handed over again while its job lives (relay.ts) is in two jobs: each attempt first claims its
 * entries (queue.ts claimEntries), and leaves those another unfinished job holds to that job, so an entry is
 * tried on one backoff and posted by one job at a time.
 *
 * A worker killed at any moment: its jobs' locks expire (delivery.lockMs) and another worker runs them
 * again. A record whose post got through before the kill is then refused by the mediation service as a
 * duplicate reference_id, which counts as delivered; one marked delivered before the kill is skipped.
 *
 * A Redis that stops while a worker fetches a job can leave that job active with no worker holding it: Redis
 * ran the fetch (and wrote it to its AOF) but its answer was lost, and ioredis sends the unanswered fetch again
 * after the reconnect, which takes the next job: a Redis stopped in the middle of a stream of jobs often leaves
 * up to `concurrency` of them so. The stalled check runs them once their lock expires: at most lockMs +
 * stalledInterval after the restart. Late, never lost.
 */
import { UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Config } from '../config/schema.ts';
import type { OutboxEntry, Store } from '../store/types.ts';
import type { Logger } from '../util/logger.ts';
import { claimEntries, letGoEntries, withTimeout, type DeliveryJob } from './queue.ts';

/** A failure that retrying cannot cure (the receiver refused the content). */
export class PermanentDeliveryError extends Error {
  override name = 'PermanentDeliveryError';
}

/**
 * Delivers one entry; resolves when the receiver confirmed it. Throws PermanentDeliveryError, or anything else
 * (retried).
 */
export type Deliver = (entry: OutboxEntry) => Promise<void>;

export interface WorkerOptions {
  readonly connection: Redis;
  readonly store: Store;
  readonly handlers: Readonly<Record<string, Deliver>>;
  readonly config: Pick<Config, 'redis' | 'delivery'>;
  readonly logger: Logger;
}

/** error text kept in the outbox: one line, bounded */
function describe(err: unknown): string {
  return (err instanceof Error ? `${err.name}: ${err.message}` : String(err)).replace(/\s+/g, ' ').slice(0, 500);
}

/** the ids a job carries; a job added before hand-overs carried several ids holds one, as `id` */
function entryIds(data: DeliveryJob | { readonly id: string }): readonly string[] {
  return 'ids' in data ? data.ids : [data.id];
}

function processor(topic: string, deliver: Deliver, o: WorkerOptions) {
  return async (job: Job<DeliveryJob>): Promise<string> => {
    const ids = entryIds(job.data);
    const where = { topic, jobId: job.id! };
    // an entry another unfinished job holds is that job's to deliver (queue.ts, claimEntries)
    const mine = await claimEntries(o.connection, o.config, where, ids);
    let retry: { error: unknown } | undefined;
    let givenUp = 0;
    for (const id of mine) {
      const outcome = await deliverEntry(topic, id, job, deliver, o);
      if (outcome === 'failed') givenUp++;
      else if (outcome !== 'delivered') retry ??= outcome;
    }
    // bullmq retries the job (with its backoff) for the entries still queued; the settled ones are skipped then
    if (retry) throw retry.error;
    await letGoEntries(o.connection, o.config, where, mine);
    // a job with an entry given up stays in bullmq's failed set for inspection, as a job of one entry did
    if (givenUp > 0) throw new UnrecoverableError(`${givenUp} of ${ids.length} outbox entries failed for good`);
    return mine.length === ids.length ? 'delivered' : `${ids.length - mine.length} left to the jobs holding them`;
  };
}

/**
 * One entry of a job, unless the outbox shows it settled: its state afterwards, delivered or failed (for good,
 * or unknown), or the error when it is to be tried again.
 */
async function deliverEntry(
  topic: string,
  id: string,
  job: Job,
  deliver: Deliver,
  o: WorkerOptions,
): Promise<'delivered' | 'failed' | { error: unknown }> {
  const entry = await o.store.getOutbox(id);
  if (!entry) {
    o.logger.warn({ event: 'delivery.unknown', topic, id }, 'no such outbox entry; skipped');
    return 'failed';
  }
  if (entry.state === 'delivered' || entry.state === 'failed') return entry.state;
  const attempt = job.attemptsMade + 1;
  try {
    await deliver(entry);
  } catch (error) {
    const permanent = error instanceof PermanentDeliveryError;
    const last = permanent || attempt >= (job.opts.attempts ?? 1);
    // never un-deliver: only a pending or queued entry takes the mark
    await o.store.markOutbox(id, last ? 'failed' : 'queued', describe(error), ['pending', 'queued']);
    o.logger.warn(
      { event: 'delivery.failed', topic, id, attempt, final: last, error: describe(error) },
      last ? 'delivery failed for good; kept in the outbox' : 'delivery failed; will retry',
    );
    return last ? 'failed' : { error };
  }
  await o.store.markOutbox(id, 'delivered');
  o.logger.info({ event: 'delivery.done', topic, id, attempt }, 'delivered');
  return 'delivered';
}

/**
 * The workers start once their connection is up: a bullmq Worker created against a Redis that never
 * answers cannot be closed again (its close waits for that Redis for ever).
 */
export class DeliveryWorkers {
  private readonly workers: Worker<DeliveryJob>[] = [];
  /** the deliveries running now, which close() lets finish */
  private readonly running = new Set<Promise<unknown>>();
  private closed = false;
  private readonly start = () => {
    if (!this.closed && this.workers.length === 0) this.createWorkers();
  };

  constructor(private readonly o: WorkerOptions) {
    if (o.connection.status === 'ready') this.start();
    else o.connection.once('ready', this.start);
  }

  private createWorkers(): void {
    const o = this.o;
    for (const [topic, deliver] of Object.entries(o.handlers)) {
      const run = processor(topic, deliver, o);
      const worker = new Worker<DeliveryJob>(topic, (job) => this.track(run(job)), {
        connection: o.connection,
        prefix: o.config.redis.prefix,
        concurrency: o.config.delivery.concurrency,
        lockDuration: o.config.delivery.lockMs,
        stalledInterval: Math.max(1000, Math.floor(o.config.delivery.lockMs / 2)),
        // a job whose worker keeps dying is retried, not given up: the outbox entry must reach a final state
        maxStalledCount: 1000,
      });
      worker.on('error', (err) =>
        o.logger.debug({ event: 'worker.error', topic, error: err.message }, 'worker connection error'),
      );
      // a job that bullmq itself gave up (not through our processor) still ends as failed in the outbox
      worker.on('failed', (job, err) => {
        if (job) void this.settleFailed(job, err).catch(() => undefined);
      });
      this.workers.push(worker);
    }
  }

  private track<T>(delivery: Promise<T>): Promise<T> {
    this.running.add(delivery);
    const done = () => this.running.delete(delivery);
    delivery.then(done, done);
    return delivery;
  }

  private async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  /**
   * 'failed' fires for every failed attempt; only a job in bullmq's failed set is given up for good, and then
   * each of its entries not yet settled is marked failed.
   */
  private async settleFailed(job: Job<DeliveryJob>, err: Error): Promise<void> {
    if ((await job.getState()) !== 'failed') return;
    const o = this.o;
    const where = { topic: job.queueName, jobId: job.id! };
    // only its own entries: one that another job holds is that job's to settle
    const mine = await claimEntries(o.connection, o.config, where, entryIds(job.data));
    for (const id of mine) await o.store.markOutbox(id, 'failed', describe(err), ['pending', 'queued']);
    await letGoEntries(o.connection, o.config, where, mine);
  }

  /**
   * Takes no new job, lets running deliveries finish (each is bounded by delivery.timeoutMs), then closes
   * without waiting for Redis: a graceful bullmq close waits for a Redis that is down for as long as it stays
   * down, and bullmq's waiting pause reconnects its blocking connection afterwards, which needs Redis and its
   * name again. A delivery cut short, or whose completion did not reach Redis, runs again once its lock
   * expires; the outbox's delivered mark and the duplicate refusal make that harmless.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.o.connection.off('ready', this.start);
    const graceMs = this.o.config.delivery.timeoutMs + this.o.config.redis.commandTimeoutMs;
    await Promise.allSettled(this.workers.map((w) => withTimeout(w.pause(true), graceMs, 'worker pause')));
    await withTimeout(this.settled(), graceMs, 'deliveries in flight').catch(() => undefined);
    await Promise.allSettled(this.workers.map((w) => withTimeout(w.close(true), graceMs, 'worker close')));
    this.o.connection.disconnect();
  }
}
