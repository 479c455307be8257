/**
 * The outbox relay: moves pending outbox entries (written with the evidence, in the same database
 * transaction) to the delivery queues, and marks them queued. It runs on a timer and whenever a signature
 * wakes it; nothing on the signDoc path waits for it. While Redis is down, slow or was never reachable, it
 * touches nothing and tries again on the next tick: the entries wait in the store (spec 6.2: "persisted and
 * retried later").
 *
 * A hand-over is one job carrying the ids of the entries it hands over (one topic, at most batchSize of them;
 * queue.ts). Handing an entry over again is harmless: the same entries give the same job id, which bullmq
 * drops, and an entry that ends up in a second job is delivered by one job only, the first that took it
 * (worker.ts); the outbox's marks decide what is left to do.
 *
 * Crash safety: an entry is marked queued only after Redis took the job. A process killed in between leaves
 * it pending, and the next pass hands it over again; if its first job is long gone, it is delivered again,
 * and the mediation service then refuses the duplicate reference_id, which counts as delivered. No record is
 * lost, none is stored twice.
 *
 * A Redis that restarts empty (no persistence, a failover) loses the jobs of queued entries. The relay
 * notices a restart by Redis's run_id, read after every (re)connect, and then hands every queued entry over
 * again at once: an entry whose job still exists stays with it, the lost ones are delivered by the new jobs.
 * The first connection of a process counts as a restart too (Redis may have restarted while we were not
 * running). delivery.requeueAfterMs remains the backstop for jobs lost without a restart (a FLUSHALL, say).
 *
 * Entries handed over without reading them back: a signDoc that has just committed its mediation record
 * names it in wake(entries), and a pass that has nothing else to look for hands those ids to Redis and marks
 * them, sparing the event loop an outbox read per signDoc for rows whose ids we hold.
 * Every other pass reads the outbox as before: the timer's (every intervalMs, so nothing written by another
 * process or left by a failure waits longer than that), the first after a (re)connect, the one after a failed
 * pass, and a wake that names no entries. A read and a hand-over may both hand one entry over (see above),
 * and the mark only moves a pending or queued entry.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Store } from '../store/types.ts';
import type { Logger } from '../util/logger.ts';
import type { DeliveryQueues } from './queue.ts';

/**
 * A pass starts this long after the wake that asked for it, and wakes meanwhile join it: under load one pass
 * (one call to Redis, one write of the marks) serves the records of many signDocs instead of one each. A pass
 * costs more than its records, so a longer wait costs the main thread less CPU per record (bench/relay.bench.ts
 * compares waits). Delivery happens after the response anyway; 50 ms more before it is nothing to the
 * mediation service.
 */
export const GATHER_MS = 50;

/** ids held for a hand-over at most; past them the next pass reads the outbox instead (memory stays bounded) */
const MAX_HELD_ENTRIES = 10_000;

/** an outbox entry just committed, as wake() is told of it */
export interface CommittedEntry {
  readonly id: string;
  readonly topic: string;
}

export interface RelayOptions {
  readonly store: Store;
  readonly queues: DeliveryQueues;
  readonly topics: readonly string[];
  readonly intervalMs: number;
  /** queued entries older than this are handed over again: no record stays stuck if Redis lost its job */
  readonly requeueAfterMs: number;
  /** entries per queue call */
  readonly batchSize?: number;
  /** how long a pass waits for more wakes to join it (default GATHER_MS; the relay bench compares others) */
  readonly gatherMs?: number;
  readonly logger: Logger;
}

export class OutboxRelay {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  /** a pass is waiting out its gathering time: a wake now is served by it */
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
   * wake (those entries are requeueAfterMs old, and under load one look per pass would be a large share of the
   * relay's reads on the event loop)
   */
  private staleCheckedAt = Number.NEGATIVE_INFINITY;
  /** the next pass reads the outbox (see the head of this file for when) */
  private readDue = true;
  /** ids of committed entries to hand over without reading them back, by topic */
  private held = new Map<string, string[]>();
  private heldCount = 0;
  private readonly connected = () => {
    this.checkRunId = true;
    this.wake();
  };

  constructor(private readonly o: RelayOptions) {}

  start(): void {
    this.o.queues.connection.on('ready', this.connected);
    this.timer = setInterval(() => this.wake(), this.o.intervalMs); // a wake naming no entries: a read
    this.timer.unref();
    this.wake();
  }

  /**
   * Run a pass soon; passes never overlap, and wakes during a pass cause one more. `entries`: committed outbox
   * entries the pass may hand over without reading the outbox; without them, the pass reads it. Never throws.
   */
  wake(entries?: readonly CommittedEntry[]): void {
    if (this.stopped) return;
    this.hold(entries);
    if (this.running) {
      if (!this.gathering) this.again = true;
      return;
    }
    this.running = this.passes().finally(() => {
      this.running = undefined;
    });
  }

  /** Keeps the ids of `entries` for the next pass, or has it read the outbox (no entries named, or too many held). */
  private hold(entries: readonly CommittedEntry[] | undefined): void {
    if (this.readDue) return; // the read finds them
    if (
      !entries ||
      this.heldCount + entries.length > MAX_HELD_ENTRIES ||
      entries.some((e) => !this.o.topics.includes(e.topic))
    ) {
      this.readDue = true;
      return;
    }
    for (const { id, topic } of entries) {
      const ids = this.held.get(topic);
      if (ids) ids.push(id);
      else this.held.set(topic, [id]);
    }
    this.heldCount += entries.length;
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
      // the signDoc response goes out first, and the records of others join this pass
      await sleep(this.o.gatherMs ?? GATHER_MS);
      this.gathering = false;
      await this.pass();
    } while (this.again && !this.stopped);
  }

  /** One pass: reads the outbox when that is due (see the head of this file), else hands over the held entries. */
  private async pass(): Promise<void> {
    const read = this.readDue;
    const held = this.held;
    this.readDue = false;
    this.held = new Map();
    this.heldCount = 0;
    try {
      await this.noticeRestart();
      const now = Date.now();
      const checkStale = this.requeueQueuedBefore !== undefined || now - this.staleCheckedAt >= this.o.intervalMs;
      if (read || checkStale) await this.readAll(now, checkStale);
      else await this.handOverHeld(held);
    } catch (err) {
      this.readDue = true; // what this pass did not hand over is still pending: the next pass reads it
      this.reportFailure(err as Error);
    }
  }

  /**
   * Drains every topic; with `checkStale`, or after a Redis restart, the queued entries whose job may be lost
   * too. The read finds the held entries as well: pending, or queued by the pass that read them before.
   */
  private async readAll(now: number, checkStale: boolean): Promise<void> {
    const queuedBefore = this.requeueQueuedBefore ?? (checkStale ? new Date(now - this.o.requeueAfterMs) : undefined);
    for (const topic of this.o.topics) await this.drain(topic, queuedBefore);
    if (checkStale) this.staleCheckedAt = now; // a pass cut short looks again next time
    // every entry queued before the restart is with the new Redis now (a pass cut short keeps trying)
    if (queuedBefore !== undefined && queuedBefore === this.requeueQueuedBefore) this.requeueQueuedBefore = undefined;
  }

  /** the entries wake() named, in drain's batches */
  private async handOverHeld(held: ReadonlyMap<string, readonly string[]>): Promise<void> {
    for (const [topic, ids] of held) {
      for (let i = 0; i < ids.length; i += this.batchSize) await this.handOver(topic, ids.slice(i, i + this.batchSize));
    }
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
    if (this.runId)
      this.o.logger.warn(
        { event: 'relay.redis_restarted' },
        'Redis restarted and may have lost queued jobs; handing every queued outbox entry over again',
      );
    this.runId = runId;
    this.requeueQueuedBefore = new Date();
  }

  /**
   * Hands over every pending entry of a topic (and, when given, the queued ones last touched before
   * `queuedBefore`), batch by batch, while Redis takes them. Marking an entry queued touches it, so the next
   * batch holds others; an entry that comes back anyway (a database clock behind ours) ends the pass instead of
   * looping.
   */
  private async drain(topic: string, queuedBefore: Date | undefined): Promise<void> {
    const batchSize = this.batchSize;
    const handed = new Set<string>();
    for (;;) {
      const batch = await this.o.store.outboxPending(topic, batchSize, queuedBefore);
      const pending = batch.filter((e) => !handed.has(e.id));
      if (pending.length === 0) return;
      const ids = pending.map((e) => e.id);
      await this.handOver(topic, ids);
      for (const id of ids) handed.add(id);
      if (batch.length < batchSize) return;
    }
  }

  /** entries per queue call */
  private get batchSize(): number {
    return this.o.batchSize ?? 100;
  }

  /** Adds a job carrying the entries to Redis, then marks them queued: a crash in between leaves them pending. */
  private async handOver(topic: string, ids: readonly string[]): Promise<void> {
    if (!this.o.queues.ready) throw new Error('Redis is not connected');
    await this.o.queues.add(topic, ids);
    if (this.paused) {
      this.paused = false;
      this.o.logger.info({ event: 'relay.resumed', topic }, 'Redis takes jobs again; relaying the outbox');
    }
    // one write for the batch; only a pending (or re-handed queued) entry becomes queued, atomically: a fast
    // worker may have delivered it already
    await this.o.store.markOutboxQueued(ids);
  }

  private reportFailure(err: Error): void {
    if (this.paused) return;
    this.paused = true;
    this.o.logger.warn(
      { event: 'relay.paused', error: err.message },
      'cannot hand outbox entries to the queue; they stay in the outbox and are retried',
    );
  }
}
