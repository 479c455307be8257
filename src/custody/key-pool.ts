/**
 * A pool of fresh, never-used keys, made in the background so that a request waits for a key generation only
 * when the pool is empty (spec 2.16: a fresh key pair per request). Generic over what a key is and how it is
 * made and destroyed: software custody keeps RSA-3072 KeyObjects made in worker threads, PKCS#11 custody keeps
 * RSA session key pairs made in the token.
 *
 * Each key is handed out once: take() removes it from the pool, and the pool keeps no other reference. Keys
 * nobody took are destroyed at close(). The pool starts filling at fill(); a take() before gets its own key.
 */
import type { Logger } from '../util/logger.ts';

/** How the keys of a pool are made and destroyed. */
export interface KeyMaker<K> {
  /** one fresh key, never handed out before */
  make(): Promise<K>;
  /** destroys a key nobody took (at close); never throws */
  destroy(key: K): Promise<void>;
  /** stops what makes the keys (worker threads): keys still being made then fail */
  close?(): Promise<void>;
  /** Whether a request waits for a key: what makes keys keeps the process alive only then. */
  awaited?(awaited: boolean): void;
}

export interface KeyPoolOptions<K> {
  readonly maker: KeyMaker<K>;
  /** keys kept ready; 0: every take() waits for a key made for it */
  readonly size: number;
  /** keys made at the same time (default one) */
  readonly concurrency?: number;
  /** what the pool holds, for log lines: "RSA-3072" */
  readonly what: string;
  /** the reason of a failed generation for log lines (default: its message); never key material */
  readonly reason?: (err: unknown) => string;
  readonly logger?: Logger;
}

/** The pool's counts: what operators (logs) and tests observe of it. */
export interface KeyPoolStats {
  readonly ready: number;
  readonly generating: number;
  /** take() calls waiting for a key now */
  readonly waiting: number;
  readonly generated: number;
  readonly handedOut: number;
  /** take() calls that found the pool empty and waited for a generation */
  readonly waited: number;
}

interface Waiter<K> {
  resolve(key: K): void;
  reject(err: Error): void;
}

/** Consecutive failed generations after which waiting requests are failed rather than retried forever. */
const MAX_FAILURES = 3;

export class KeyPoolClosedError extends Error {
  override name = 'KeyPoolClosedError';
  constructor(what = 'key') {
    super(`the ${what} key pool is closed`);
  }
}

export class KeyPool<K> {
  readonly size: number;
  readonly #options: KeyPoolOptions<K>;
  readonly #concurrency: number;
  readonly #ready: K[] = [];
  readonly #waiters: Waiter<K>[] = [];
  readonly #making = new Set<Promise<void>>();
  /** bumped by discard(): keys of an earlier era are void when they arrive */
  #era = 0;
  #failures = 0;
  #paused: Error | undefined;
  #closed = false;
  #closing: Promise<void> | undefined;
  #generated = 0;
  #handedOut = 0;
  #waited = 0;

  constructor(options: KeyPoolOptions<K>) {
    if (!Number.isInteger(options.size) || options.size < 0)
      throw new RangeError('key pool size must be a non-negative integer');
    this.size = options.size;
    this.#options = options;
    this.#concurrency = Math.max(1, options.concurrency ?? 1);
  }

  /** A fresh key that nobody else gets; waits for a generation only when the pool is empty. */
  take(): Promise<K> {
    if (this.#closed) return Promise.reject(new KeyPoolClosedError(this.#options.what));
    if (this.#paused) return Promise.reject(this.#paused);
    const key = this.#ready.shift();
    if (key !== undefined) {
      this.#handedOut++;
      this.#pump();
      return Promise.resolve(key);
    }
    this.#waited++;
    // with size 0 waiting is the configured behaviour, not news
    if (this.size > 0)
      this.#options.logger?.warn(
        { event: 'keys.pool_empty', key: this.#options.what, size: this.size, waited: this.#waited },
        `${this.#options.what} key pool empty: the request waits for a key generation`,
      );
    return new Promise<K>((resolve, reject) => {
      this.#waiters.push({ resolve, reject });
      this.#pump();
    });
  }

  stats(): KeyPoolStats {
    return {
      ready: this.#ready.length,
      generating: this.#making.size,
      waiting: this.#waiters.length,
      generated: this.#generated,
      handedOut: this.#handedOut,
      waited: this.#waited,
    };
  }

  /**
   * The keys made so far are void (a PKCS#11 token reconnected: its session objects died with the sessions):
   * they are dropped without destroy(), and so are those still being made.
   */
  discard(): void {
    this.#era++;
    this.#ready.length = 0;
  }

  /** No keys are made until fill(); waiting and later take() calls fail with `reason`. */
  pause(reason: Error): void {
    this.#paused = reason;
    this.#failWaiting(reason);
  }

  /** Makes keys until the pool is full: at start, and again after pause() or repeated failures. */
  fill(): void {
    this.#paused = undefined;
    this.#failures = 0;
    this.#pump();
  }

  /** Fails waiting requests, destroys the keys nobody took, and waits for generations under way (destroyed too). */
  close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#failWaiting(new KeyPoolClosedError(this.#options.what));
      const unused = this.#ready.splice(0);
      this.#closing = this.#shutDown(unused);
    }
    return this.#closing!;
  }

  async #shutDown(unused: readonly K[]): Promise<void> {
    await Promise.all([this.#options.maker.close?.(), ...this.#making]);
    await Promise.all(unused.map((key) => this.#options.maker.destroy(key)));
  }

  /** Keys still needed: one per waiting request plus the gap to a full pool, minus those being made. */
  #missing(): number {
    return this.#waiters.length + this.size - this.#ready.length - this.#making.size;
  }

  /** Starts generations, up to `concurrency` at a time, while keys are missing. */
  #pump(): void {
    while (!this.#closed && !this.#paused && this.#making.size < this.#concurrency && this.#missing() > 0) {
      // after repeated failures the refill pauses until a request asks
      if (this.#failures >= MAX_FAILURES && this.#waiters.length === 0) break;
      this.#startOne();
    }
    this.#options.maker.awaited?.(this.#waiters.length > 0);
  }

  #startOne(): void {
    const era = this.#era;
    const making: Promise<void> = this.#options.maker.make().then(
      (key) => this.#finished(making, () => this.#arrived(key, era)),
      (err: unknown) => this.#finished(making, () => this.#failed(err)),
    );
    this.#making.add(making);
  }

  #finished(making: Promise<void>, then: () => void | Promise<void>): void | Promise<void> {
    this.#making.delete(making);
    return then();
  }

  async #arrived(key: K, era: number): Promise<void> {
    if (this.#closed) return this.#options.maker.destroy(key); // made while closing: nobody takes it
    if (era !== this.#era) return this.#pump(); // void: see discard()
    this.#failures = 0;
    this.#generated++;
    const waiter = this.#waiters.shift();
    if (waiter) {
      this.#handedOut++;
      waiter.resolve(key);
    } else this.#ready.push(key);
    this.#pump();
  }

  #failed(err: unknown): void {
    if (this.#closed) return; // a generation abandoned by close()
    this.#failures++;
    const reason = this.#options.reason?.(err) ?? (err instanceof Error ? err.message : String(err));
    this.#options.logger?.error(
      { event: 'keys.generation_failed', key: this.#options.what, failures: this.#failures, reason },
      `${this.#options.what} key generation failed`,
    );
    if (this.#failures >= MAX_FAILURES) this.#failWaiting(err instanceof Error ? err : new Error(reason));
    this.#pump();
  }

  #failWaiting(err: Error): void {
    for (const waiter of this.#waiters.splice(0)) waiter.reject(err);
    this.#options.maker.awaited?.(false);
  }
}
