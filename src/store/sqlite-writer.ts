/**
 * The SQLite store's writes off the main thread: better-sqlite3 is synchronous, so a COMMIT with
 * synchronous=FULL blocks its thread for the fsync, and on the main thread every request would wait behind
 * it. Here a worker thread owns the writing connection (sqlite-writer-thread.ts) and runs the group commit;
 * the main thread only ships the compiled statements of each write ({sql, parameters}, store.ts) and awaits
 * the answer, which comes after the batch's COMMIT: the evidence is durable before signDoc responds. Reads
 * stay on the main thread's own connection (WAL: a reader never waits for the writer and sees every committed
 * write).
 *
 * What crossing threads costs the main thread is kept small: the writes asked for during one turn of the
 * event loop travel in one message, and a statement's SQL text crosses once (sqlite-writer-wire.ts).
 */
import type { Worker } from 'node:worker_threads';
import { startModuleWorker } from '../util/ts-worker.ts';
import type { Durability, Statement, Writer } from './group-commit.ts';
import {
  statementSender,
  type ThreadReply,
  type ThreadRequest,
  toError,
  type WireWrite,
  type WriteResult,
  type WriterThreadData,
} from './sqlite-writer-wire.ts';

/** Starts the writer thread on `file` (already created and migrated) and resolves once it has opened it. */
export async function startWriterThread(data: WriterThreadData): Promise<Writer> {
  const worker = startModuleWorker(new URL('./sqlite-writer-thread.ts', import.meta.url), {
    name: 'sqlite-writer',
    workerData: data,
  });
  await started(worker);
  return new ThreadWriter(worker);
}

/** Resolves on the thread's 'ready'; rejects with why it did not start. */
function started(worker: Worker): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const answered = (reply: ThreadReply) => {
      settle();
      if (reply.kind === 'ready') resolve();
      else reject(reply.kind === 'failed' ? toError(reply.error) : new Error('store writer thread did not start'));
    };
    const failed = (err: Error) => {
      settle();
      reject(err);
    };
    const exited = (code: number) => {
      settle();
      reject(new Error(`store writer thread exited with code ${code}`));
    };
    const settle = () => worker.off('message', answered).off('error', failed).off('exit', exited);
    worker.on('message', answered).on('error', failed).on('exit', exited);
  });
}

interface Waiting {
  resolve(changes: number[]): void;
  reject(err: unknown): void;
}

/** The main thread's side of a started writer thread: writes out, answers back. */
class ThreadWriter implements Writer {
  private readonly waiting = new Map<number, Waiting>();
  private nextId = 0;
  private outgoing: WireWrite[] = [];
  private readonly wire = statementSender();
  private stopped: Error | undefined;
  private onClosed: (() => void) | undefined;

  constructor(private readonly worker: Worker) {
    worker.on('message', (reply: ThreadReply) => this.received(reply));
    worker.on('error', (err) => this.stop(new Error(`store writer thread failed: ${err.message}`)));
    worker.on('exit', (code) => this.stop(new Error(`store writer thread exited with code ${code}`)));
    this.updateRef();
  }

  write(statements: readonly Statement[], durability: Durability = 'durable'): Promise<number[]> {
    if (this.stopped) return Promise.reject(this.stopped);
    const id = this.nextId++;
    const answer = new Promise<number[]>((resolve, reject) => this.waiting.set(id, { resolve, reject }));
    this.outgoing.push({ id, durability, statements: statements.map(this.wire) });
    if (this.outgoing.length === 1) setImmediate(() => this.post()); // the rest of this turn's writes join the message
    this.updateRef();
    return answer;
  }

  async close(): Promise<void> {
    if (this.stopped) return;
    const closed = new Promise<void>((resolve) => {
      this.onClosed = resolve;
    });
    this.updateRef();
    this.post();
    this.worker.postMessage({ kind: 'close' } satisfies ThreadRequest); // after every write already asked for
    await closed;
    await this.worker.terminate().catch(() => undefined);
  }

  /** sends the writes asked for so far, in one message */
  private post(): void {
    const writes = this.outgoing;
    this.outgoing = [];
    if (writes.length > 0 && !this.stopped) this.worker.postMessage({ kind: 'writes', writes } satisfies ThreadRequest);
  }

  private received(reply: ThreadReply): void {
    if (reply.kind === 'results') this.answer(reply.results);
    else if (reply.kind === 'closed') this.stop(new Error('store is closed'));
  }

  private answer(results: readonly WriteResult[]): void {
    for (const r of results) {
      const w = this.waiting.get(r.id);
      this.waiting.delete(r.id);
      if (r.ok) w?.resolve(r.changes);
      else w?.reject(toError(r.error));
    }
    this.updateRef();
  }

  /** no more writes: those still waiting fail with `err` */
  private stop(err: Error): void {
    this.stopped ??= err;
    for (const w of this.waiting.values()) w.reject(this.stopped);
    this.waiting.clear();
    this.onClosed?.();
  }

  /** an idle writer never holds the process up (as the RSA key pool's workers) */
  private updateRef(): void {
    if (this.waiting.size > 0 || this.onClosed) this.worker.ref();
    else this.worker.unref();
  }
}
