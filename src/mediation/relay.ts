/**
 * The outbox relay: moves pending outbox entries (written with the evidence, in the same database
 * transaction) to the delivery queues, and marks them queued. It runs on a timer and whenever a signature
 * wakes it; nothing on the signDoc path waits for it. While Redis is down, slow or was never reachable, it
 * touches nothing and tries again on the next tick: the entries wait in the store (spec 6.2: "persisted and
 * retried later").
 *
 * Crash safety: an entry is marked queued only after Redis took the job. A process killed in between leaves
 * it pending, and the next pass hands it over again, which bullmq drops (same job id) or, if that job is long
 * gone, delivers again; the mediation service then refuses the duplicate reference_id, which counts as
 * delivered. No record is lost, none is stored twice.
 */
import type { Store } from '../store/types.ts';
import type { Logger } from '../util/logger.ts';
import type { DeliveryQueues } from './queue.ts';

export interface RelayOptions {
  readonly store: Store;
  readonly queues: DeliveryQueues;
  readonly topics: readonly string[];
  readonly intervalMs: number;
  /** queued entries older than this are handed over again: no record stays stuck if Redis lost its job */
  readonly requeueAfterMs: number;
  /** entries per queue call */
  readonly batchSize?: number;
  readonly logger: Logger;
}

export class OutboxRelay {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  /** for logs: one line when handing over stops (Redis or the store failing), one when it resumes */
  private paused = false;

  constructor(private readonly o: RelayOptions) {}

  start(): void {
    this.timer = setInterval(() => this.wake(), this.o.intervalMs);
    this.timer.unref();
    this.wake();
  }

  /** Run a pass soon; passes never overlap, and wakes during a pass cause one more. Never throws. */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.passes().finally(() => {
      this.running = undefined;
    });
  }

  /** Runs passes until no wake arrived during the last one; resolves when idle (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.idle();
  }

  private async passes(): Promise<void> {
    do {
      this.again = false;
      await new Promise((r) => setImmediate(r)); // let the signDoc response go out first
      try {
        for (const topic of this.o.topics) await this.drain(topic);
      } catch (err) {
        this.reportFailure(err as Error);
      }
    } while (this.again && !this.stopped);
  }

  /** Hands over every pending entry of a topic, batch by batch, while Redis takes them. */
  private async drain(topic: string): Promise<void> {
    const batchSize = this.o.batchSize ?? 100;
    for (;;) {
      const pending = await this.o.store.outboxPending(topic, batchSize, new Date(Date.now() - this.o.requeueAfterMs));
      if (pending.length === 0) return;
      if (!this.o.queues.ready) {
        this.reportFailure(new Error('Redis is not connected'));
        return;
      }
      await this.o.queues.add(topic, pending);
      if (this.paused) {
        this.paused = false;
        this.o.logger.info({ event: 'relay.resumed', topic }, 'Redis takes jobs again; relaying the outbox');
      }
      for (const entry of pending) await this.markQueued(entry.id);
      if (pending.length < batchSize) return;
    }
  }

  /** Only a pending (or re-handed queued) entry becomes queued, atomically: a fast worker may have delivered it already. */
  private async markQueued(id: string): Promise<void> {
    await this.o.store.markOutbox(id, 'queued', undefined, ['pending', 'queued']); // also touches updated_at
  }

  private reportFailure(err: Error): void {
    if (this.paused) return;
    this.paused = true;
    this.o.logger.warn({ event: 'relay.paused', error: err.message }, 'cannot hand outbox entries to the queue; they stay in the outbox and are retried');
  }
}
