/**
 * Signer keys (DESIGN.md step 7, spec 2.16: a fresh key pair per request). EC keys are generated inline
 * (~0.05 ms). RSA-3072 generation takes ~400 ms of CPU, so RSA keys come from a small pool of fresh, never-used
 * keys that worker threads generate in the background: a request waits for generation only when the pool is
 * empty, and then the generation still runs off the event loop.
 *
 * Worker threads, not the async crypto.generateKeyPair: that one runs on libuv's small shared threadpool (4
 * threads by default), where each 400 ms generation would hold up file system, DNS and other crypto work.
 *
 * Keys cross from the worker as KeyObjects (postMessage clones a KeyObject since Node 14.5): the receiving thread
 * gets a handle to the same native key, so the private key is never serialised, neither as PKCS#8 DER nor
 * otherwise. Either way the key never leaves the process: worker threads share its address space.
 *
 * Each key is handed out once: take() removes it from the pool, and the pool keeps no other reference.
 */
import { Worker } from 'node:worker_threads';
import { availableParallelism } from 'node:os';
import type { KeyObject } from 'node:crypto';
import { generateKeyPair, type KeyAlgorithm, type KeyPair } from '../crypto/keys.ts';
import type { Logger } from '../util/logger.ts';

/**
 * The worker, as plain JavaScript evaluated in the thread: the service runs TypeScript through tsx, whose loader
 * hooks (registered in the main thread by bin/qtsp.js) do not reach worker threads in Node 20, so a .ts worker
 * file would not load. One message in, one key pair (or an error text) out.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { generateKeyPairSync } = require('node:crypto');
parentPort.on('message', () => {
  try {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: workerData.modulusLength });
    parentPort.postMessage({ privateKey, publicKey });
  } catch (err) {
    parentPort.postMessage({ error: String((err && err.message) || err) });
  }
});
`;

type WorkerReply = { privateKey: KeyObject; publicKey: KeyObject } | { error: string };

interface Waiter {
  resolve(keys: KeyPair): void;
  reject(err: Error): void;
}

interface PoolWorker {
  readonly worker: Worker;
  busy: boolean;
}

export interface RsaKeyPoolOptions {
  /** keys kept ready; 0: every RSA request generates its key on demand (still off the event loop) */
  readonly size: number;
  /** worker threads; default: one per spare core, at least one, at most two */
  readonly threads?: number;
  readonly logger?: Logger;
}

export interface RsaKeyPoolStats {
  readonly ready: number;
  readonly generating: number;
  readonly waiting: number;
  readonly generated: number;
  readonly handedOut: number;
  /** take() calls that found the pool empty and waited for a generation */
  readonly waited: number;
  readonly threads: number;
}

/** Consecutive failed generations after which waiting requests are failed rather than retried forever. */
const MAX_FAILURES = 3;
const MODULUS_LENGTH = 3072;

export class KeyPoolClosedError extends Error {
  override name = 'KeyPoolClosedError';
  constructor() {
    super('the RSA key pool is closed');
  }
}

export class RsaKeyPool {
  readonly size: number;
  readonly #threads: number;
  readonly #logger: Logger | undefined;
  readonly #ready: KeyPair[] = [];
  readonly #waiters: Waiter[] = [];
  readonly #workers: PoolWorker[] = [];
  #generating = 0;
  #failures = 0;
  #closed = false;
  #generated = 0;
  #handedOut = 0;
  #waited = 0;
  #fullListeners: { wanted: number; resolve: () => void }[] = [];

  constructor(options: RsaKeyPoolOptions) {
    if (!Number.isInteger(options.size) || options.size < 0)
      throw new RangeError('key pool size must be a non-negative integer');
    this.size = options.size;
    this.#threads = Math.max(1, options.threads ?? Math.min(2, availableParallelism() - 1));
    this.#logger = options.logger;
    this.#pump();
  }

  /** A fresh RSA-3072 key pair that nobody else gets; waits for a generation only when the pool is empty. */
  take(): Promise<KeyPair> {
    if (this.#closed) return Promise.reject(new KeyPoolClosedError());
    const keys = this.#ready.shift();
    if (keys) {
      this.#handedOut++;
      this.#pump();
      return Promise.resolve(keys);
    }
    this.#waited++;
    // with size 0 waiting is the configured behaviour, not news
    if (this.size > 0)
      this.#logger?.warn(
        { event: 'keys.pool_empty', size: this.size },
        'RSA key pool empty: the request waits for a key generation',
      );
    return new Promise<KeyPair>((resolve, reject) => {
      this.#waiters.push({ resolve, reject });
      this.#pump();
    });
  }

  /** Resolves when the pool holds `count` keys (default: all of them), or is closed (tests, benchmarks). */
  filled(count = this.size): Promise<void> {
    const wanted = Math.min(count, this.size);
    if (this.#ready.length >= wanted || this.#closed) return Promise.resolve();
    return new Promise((resolve) => {
      this.#fullListeners.push({ wanted, resolve });
      this.#updateRefs();
    });
  }

  stats(): RsaKeyPoolStats {
    return {
      ready: this.#ready.length,
      generating: this.#generating,
      waiting: this.#waiters.length,
      generated: this.#generated,
      handedOut: this.#handedOut,
      waited: this.#waited,
      threads: this.#workers.length,
    };
  }

  /** Stops the workers, fails waiting requests and drops the keys nobody took. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const waiter of this.#waiters.splice(0)) waiter.reject(new KeyPoolClosedError());
    this.#ready.length = 0;
    this.#generating = 0; // generations in progress are abandoned with their workers
    this.#notifyFull();
    await Promise.all(this.#workers.splice(0).map((w) => w.worker.terminate()));
  }

  /** Keys still needed: one per waiting request plus the gap to a full pool, minus those being generated. */
  #missing(): number {
    return this.#waiters.length + this.size - this.#ready.length - this.#generating;
  }

  /** Starts generations on idle workers (spawning up to #threads) while keys are missing. */
  #pump(): void {
    if (this.#closed) return;
    while (this.#missing() > 0) {
      if (this.#failures >= MAX_FAILURES && this.#waiters.length === 0) return; // refill paused until a request asks
      const idle =
        this.#workers.find((w) => !w.busy) ?? (this.#workers.length < this.#threads ? this.#spawn() : undefined);
      if (!idle) break;
      idle.busy = true;
      this.#generating++;
      idle.worker.postMessage(null);
    }
    this.#updateRefs();
  }

  /** A worker keeps the process alive only while someone waits for it: an idle pool never holds up exit. */
  #updateRefs(): void {
    const awaited = this.#waiters.length > 0 || this.#fullListeners.length > 0;
    for (const w of this.#workers) {
      if (awaited) w.worker.ref();
      else w.worker.unref();
    }
  }

  #spawn(): PoolWorker {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { modulusLength: MODULUS_LENGTH },
      name: 'rsa-key-pool',
    });
    const entry: PoolWorker = { worker, busy: false };
    worker.on('message', (reply: WorkerReply) => {
      if (this.#closed) return; // a key finished while closing: dropped
      entry.busy = false;
      this.#generating--;
      this.#delivered(reply);
    });
    worker.on('error', (err) => this.#lost(entry, err));
    worker.on('exit', (code) => {
      if (!this.#closed) this.#lost(entry, new Error(`key generation worker exited with code ${code}`));
    });
    this.#workers.push(entry);
    return entry;
  }

  #delivered(reply: WorkerReply): void {
    if ('error' in reply) {
      this.#failed(new Error(`RSA key generation failed: ${reply.error}`));
      return;
    }
    this.#failures = 0;
    this.#generated++;
    const keys: KeyPair = { algorithm: 'RSA-3072', privateKey: reply.privateKey, publicKey: reply.publicKey };
    const waiter = this.#waiters.shift();
    if (waiter) {
      this.#handedOut++;
      waiter.resolve(keys);
    } else {
      this.#ready.push(keys);
      this.#notifyFull();
    }
    this.#pump();
  }

  /** A worker died: forget it (its generation is lost) and carry on with a new one. */
  #lost(entry: PoolWorker, err: Error): void {
    const index = this.#workers.indexOf(entry);
    if (index === -1) return; // 'error' is followed by 'exit'
    this.#workers.splice(index, 1);
    if (entry.busy) this.#generating--;
    this.#failed(err);
  }

  #failed(err: Error): void {
    this.#failures++;
    this.#logger?.error(
      { event: 'keys.generation_failed', failures: this.#failures, err: err.message },
      'RSA key generation failed',
    );
    if (this.#failures >= MAX_FAILURES) {
      for (const waiter of this.#waiters.splice(0)) waiter.reject(err);
    }
    this.#pump();
  }

  #notifyFull(): void {
    const waiting = this.#fullListeners.splice(0);
    for (const listener of waiting) {
      if (this.#closed || this.#ready.length >= listener.wanted) listener.resolve();
      else this.#fullListeners.push(listener);
    }
    this.#updateRefs();
  }
}

/** Where signDoc gets its per-request key pairs (step 7). */
export interface SignerKeySource {
  /**
   * Whether the keys handed out are generated in, and stay in, a token the configuration declares a qualified
   * signature creation device: what the signer certificate may claim (QcSSCD, QCP-n-qscd). Software keys: false.
   */
  readonly keysInQscd: boolean;
  /** a fresh key pair, never handed out before */
  take(algorithm: KeyAlgorithm): Promise<KeyPair>;
  close(): Promise<void>;
}

export interface SignerKeys extends SignerKeySource {
  readonly rsa: RsaKeyPool;
}

export function createSignerKeys(options: { rsaPoolSize: number; threads?: number; logger?: Logger }): SignerKeys {
  const rsa = new RsaKeyPool({
    size: options.rsaPoolSize,
    ...(options.threads ? { threads: options.threads } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
  });
  return {
    rsa,
    keysInQscd: false, // keys in process memory: never a QSCD
    take: (algorithm) => (algorithm === 'RSA-3072' ? rsa.take() : Promise.resolve(generateKeyPair(algorithm))),
    close: () => rsa.close(),
  };
}
