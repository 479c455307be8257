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
 *
 * A Redis that restarts empty (no persistence, a failover) loses the jobs of queued entries. The relay
 * notices a restart by Redis's run_id, read after every (re)connect, and then hands every queued entry over
 * again at once: bullmq drops the jobs that still exist (same job id), the lost ones are queued anew. The
 * first connection of a process counts as a restart too (Redis may have restarted while we were not running).
 * delivery.requeueAfterMs remains the backstop for jobs lost without a restart (a FLUSHALL, say).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Store } from '../store/types.ts';
import type { Logger } from '../util/logger.ts';
import type { DeliveryQueues } from './queue.ts';

/**
 * A pass starts this long after the wake that asked for it, and wakes meanwhile join it: under load one pass
 * (one read of the outbox, one call to Redis, one write of the marks) serves the records of many signDocs
 * instead of one each (issue 12: the relay's per-record passes cost each signDoc ~0.25 ms of the event loop).
 * Delivery happens after the response anyway; 10 ms more before it is nothing to the mediation service.
 */
export const GATHER_MS = 10;

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
  /** a pass is waiting out GATHER_MS: a wake now is served by it */
  private gathering = false;
  private stopped = false;
  /** for logs: one line when handing over stops (Redis or the store failing), one when it resumes */
  private paused = false;
  /** the Redis connection came (back) up: compare its run_id before the next pass */
  private checkRunId = true;
  /** the run_id of the Redis that holds our jobs, once read */
  private runId: string | undefined;
  /** set when Redis restarted: queued entries last touched before this go to the queue again */
  private requeueQueuedBefore: Date | undefined;
  /**
   * when a pass last looked for queued entries whose job may be lost: at most once per intervalMs, not on every
   * wake (those entries are requeueAfterMs old; issue 12: under load that look was half of the relay's reads,
   * one per pass, on the event loop)
   */
  private staleCheckedAt = Number.NEGATIVE_INFINITY;
  private readonly connected = () => {
    this.checkRunId = true;
    this.wake();
  };

  constructor(private readonly o: RelayOptions) {}

  start(): void {
    this.o.queues.connection.on('ready', this.connected);
    this.timer = setInterval(() => this.wake(), this.o.intervalMs);
    this.timer.unref();
    this.wake();
  }

  /** Run a pass soon; passes never overlap, and wakes during a pass cause one more. Never throws. */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      if (!this.gathering) this.again = true;
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
    this.o.queues.connection.off('ready', this.connected);
    clearInterval(this.timer);
    await this.idle();
  }

  private async passes(): Promise<void> {
    do {
      this.again = false;
      this.gathering = true;
      await sleep(GATHER_MS); // the signDoc response goes out first, and the records of others join this pass
      this.gathering = false;
      try {
        await this.noticeRestart();
        const now = Date.now();
        const checkStale = this.requeueQueuedBefore !== undefined || now - this.staleCheckedAt >= this.o.intervalMs;
        const queuedBefore = this.requeueQueuedBefore ?? (checkStale ? new Date(now - this.o.requeueAfterMs) : undefined);
        for (const topic of this.o.topics) await this.drain(topic, queuedBefore);
        if (checkStale) this.staleCheckedAt = now; // a pass cut short looks again next time
        // every entry queued before the restart is with the new Redis now (a pass cut short keeps trying)
        if (queuedBefore !== undefined && queuedBefore === this.requeueQueuedBefore) this.requeueQueuedBefore = undefined;
      } catch (err) {
        this.reportFailure(err as Error);
      }
    } while (this.again && !this.stopped);
  }

  /** After a (re)connect: a new run_id means a restarted Redis, so every queued entry is handed over again. */
  private async noticeRestart(): Promise<void> {
    if (!this.checkRunId || !this.o.queues.ready) return;
    this.checkRunId = false;
    let runId: string;
    try {
      runId = await this.o.queues.runId();
    } catch (err) {
      this.checkRunId = true; // next pass
      throw err;
    }
    if (runId === this.runId) return;
    if (this.runId) this.o.logger.warn({ event: 'relay.redis_restarted' }, 'Redis restarted and may have lost queued jobs; handing every queued outbox entry over again');
    this.runId = runId;
    this.requeueQueuedBefore = new Date();
  }

  /**
   * Hands over every pending entry of a topic (and, when given, the queued ones last touched before `queuedBefore`), batch
   * by batch, while Redis takes them. Marking an entry queued touches it, so the next batch holds others; an
   * entry that comes back anyway (a database clock behind ours) ends the pass instead of looping.
   */
  private async drain(topic: string, queuedBefore: Date | undefined): Promise<void> {
    const batchSize = this.o.batchSize ?? 100;
    const handed = new Set<string>();
    for (;;) {
      const batch = await this.o.store.outboxPending(topic, batchSize, queuedBefore);
      const pending = batch.filter((e) => !handed.has(e.id));
      if (pending.length === 0) return;
      if (!this.o.queues.ready) throw new Error('Redis is not connected');
      await this.o.queues.add(topic, pending);
      if (this.paused) {
        this.paused = false;
        this.o.logger.info({ event: 'relay.resumed', topic }, 'Redis takes jobs again; relaying the outbox');
      }
      // one write for the batch; only a pending (or re-handed queued) entry becomes queued, atomically: a fast
      // worker may have delivered it already
      await this.o.store.markOutboxQueued(pending.map((e) => e.id));
      for (const entry of pending) handed.add(entry.id);
      if (batch.length < batchSize) return;
    }
  }

  private reportFailure(err: Error): void {
    if (this.paused) return;
    this.paused = true;
    this.o.logger.warn({ event: 'relay.paused', error: err.message }, 'cannot hand outbox entries to the queue; they stay in the outbox and are retried');
  }
}
