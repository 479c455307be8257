/**
 * RSA-3072 key pairs made in worker threads, for the software custody's pool of signer keys. An RSA-3072
 * generation takes a long stretch of CPU, so it runs off the event loop, also when a request waits for it.
 *
 * Worker threads, not the async crypto.generateKeyPair: that one runs on libuv's small shared threadpool (four
 * threads by default), where each generation would hold up file system, DNS and other crypto work.
 *
 * Keys cross from the worker as KeyObjects (postMessage clones a KeyObject): the receiving thread gets a handle
 * to the same native key, so the private key is never serialised, neither as PKCS#8 DER nor otherwise. Either
 * way the key never leaves the process: worker threads share its address space.
 */
import type { KeyObject } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { extname } from 'node:path';
import type { Worker } from 'node:worker_threads';
import type { KeyPair } from '../../crypto/keys.ts';
import { startModuleWorker } from '../../util/ts-worker.ts';
import type { KeyMaker } from '../key-pool.ts';

const MODULUS_LENGTH = 3072;
/** the worker's module, with this module's own extension: .ts run through tsx, .js once compiled */
const THREAD_ENTRY = new URL(`./rsa-thread${extname(new URL(import.meta.url).pathname)}`, import.meta.url);

type WorkerReply = { privateKey: KeyObject; publicKey: KeyObject } | { error: string };

interface Generation {
  resolve(keys: KeyPair): void;
  reject(err: Error): void;
}

interface RsaThread {
  readonly worker: Worker;
  /** the generation it works on */
  current: Generation | undefined;
}

export class KeyThreadsClosedError extends Error {
  override name = 'KeyThreadsClosedError';
  constructor() {
    super('the RSA key generation threads are stopped');
  }
}

/** Up to `threads` worker threads, started when first needed, each making one key pair at a time. */
export class RsaThreads implements KeyMaker<KeyPair> {
  /** the most threads it runs: default one per spare core, at least one, at most two */
  readonly threads: number;
  readonly #running: RsaThread[] = [];
  readonly #queue: Generation[] = [];
  #awaited = false;
  #closed = false;

  constructor(threads?: number) {
    this.threads = Math.max(1, threads ?? Math.min(2, availableParallelism() - 1));
  }

  /** worker threads running now */
  get running(): number {
    return this.#running.length;
  }

  make(): Promise<KeyPair> {
    if (this.#closed) return Promise.reject(new KeyThreadsClosedError());
    return new Promise((resolve, reject) => {
      this.#queue.push({ resolve, reject });
      this.#dispatch();
    });
  }

  /** Dropping the last reference is all a software key needs. */
  async destroy(): Promise<void> {}

  /** A worker keeps the process alive only while a request waits for a key: an idle pool never holds up exit. */
  awaited(awaited: boolean): void {
    this.#awaited = awaited;
    for (const t of this.#running) this.#applyRef(t.worker);
  }

  /** Stops the threads; generations under way fail (their keys are abandoned with the threads). */
  async close(): Promise<void> {
    this.#closed = true;
    const running = this.#running.splice(0);
    for (const generation of [...this.#queue.splice(0), ...running.flatMap((t) => t.current ?? [])])
      generation.reject(new KeyThreadsClosedError());
    await Promise.all(running.map((t) => t.worker.terminate()));
  }

  /** Hands queued generations to idle threads, starting threads up to the limit. */
  #dispatch(): void {
    while (this.#queue.length > 0) {
      const idle =
        this.#running.find((t) => !t.current) ?? (this.#running.length < this.threads ? this.#spawn() : undefined);
      if (!idle) return;
      idle.current = this.#queue.shift();
      idle.worker.postMessage(null);
    }
  }

  #spawn(): RsaThread {
    const worker = startModuleWorker(THREAD_ENTRY, {
      workerData: { modulusLength: MODULUS_LENGTH },
      name: 'rsa-key-pool',
    });
    const thread: RsaThread = { worker, current: undefined };
    worker.on('message', (reply: WorkerReply) => this.#replied(thread, reply));
    worker.on('error', (err) => this.#lost(thread, err));
    worker.on('exit', (code) => this.#lost(thread, new Error(`key generation worker exited with code ${code}`)));
    this.#applyRef(worker);
    this.#running.push(thread);
    return thread;
  }

  #applyRef(worker: Worker): void {
    if (this.#awaited) worker.ref();
    else worker.unref();
  }

  #replied(thread: RsaThread, reply: WorkerReply): void {
    const generation = thread.current;
    thread.current = undefined;
    if (generation) {
      if ('error' in reply) generation.reject(new Error(`RSA key generation failed: ${reply.error}`));
      else generation.resolve({ algorithm: 'RSA-3072', privateKey: reply.privateKey, publicKey: reply.publicKey });
    }
    this.#dispatch();
  }

  /** A thread died: its generation fails, and a new thread takes over the queue. */
  #lost(thread: RsaThread, err: Error): void {
    const index = this.#running.indexOf(thread);
    if (index === -1) return; // 'error' is followed by 'exit'; close() let it go
    this.#running.splice(index, 1);
    thread.current?.reject(err);
    this.#dispatch();
  }
}
