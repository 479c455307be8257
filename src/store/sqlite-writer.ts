/**
 * The SQLite store's writes off the main thread (issue 12: no fsync on the event loop). better-sqlite3 is
 * synchronous, so a COMMIT with synchronous=FULL blocks its thread for the fsync (1-2 ms, FIELD-NOTES): on
 * the main thread every request waits behind it. Here a worker thread owns the writing connection
 * (sqlite-writer-thread.ts) and runs the group commit; the main thread only ships the compiled statements of
 * each write ({sql, parameters}, store.ts) and awaits the answer, which comes after the batch's COMMIT: the
 * evidence is durable before signDoc responds, as before. Reads stay on the main thread's own connection
 * (WAL: a reader never waits for the writer and sees every committed write).
 *
 * What crossing threads costs the main thread is kept small (issue 12: postMessage was ~0.17 ms of each
 * signDoc): the writes asked for during one turn of the event loop travel in one message, and a statement's
 * SQL text (Kysely's, up to a kilobyte, the same for each shape of a query) crosses once; after that only its
 * number and parameters do.
 */
import { Worker } from 'node:worker_threads';
import type { Durability, Statement, Writer } from './group-commit.ts';

export interface WriterThreadData {
  readonly file: string;
  /** PRAGMA max_page_count from this (per connection: the writing one is the one that must obey it) */
  readonly maxBytes: number;
}

/** a statement as it crosses: its SQL text, or the number of a text sent before (`text` defines that number) */
export interface WireStatement {
  readonly sql?: string;
  readonly text?: number;
  readonly parameters: readonly unknown[];
}

export interface WireWrite {
  readonly id: number;
  readonly statements: WireStatement[];
  readonly durability: Durability;
}

export type ThreadRequest = { readonly kind: 'writes'; readonly writes: WireWrite[] } | { readonly kind: 'close' };

/** how many distinct SQL texts get a number (shapes of the store's queries: a few per row count) */
const NUMBERED_TEXTS = 4096;

interface PlainError {
  readonly name: string;
  readonly message: string;
  readonly code?: string;
}

export type ThreadReply =
  | { readonly kind: 'ready' }
  | { readonly kind: 'failed'; readonly error: PlainError }
  | { readonly kind: 'closed' }
  | {
      readonly kind: 'results';
      readonly results: readonly (
        | { readonly id: number; readonly ok: true; readonly changes: number[] }
        | { readonly id: number; readonly ok: false; readonly error: PlainError }
      )[];
    };

/**
 * Bytes as their own copy: a message carries a typed array's whole ArrayBuffer, and a small Buffer is a view
 * into Node's shared 8 KiB pool
 */
function compact(parameter: unknown): unknown {
  return parameter instanceof Uint8Array && parameter.byteLength !== parameter.buffer.byteLength
    ? new Uint8Array(parameter)
    : parameter;
}

function toError(e: PlainError): Error {
  return Object.assign(new Error(e.message), { name: e.name, ...(e.code ? { code: e.code } : {}) });
}

/**
 * The thread runs TypeScript: it registers tsx itself, as bin/qtsp.js does for the main thread (a process
 * started with `node --import tsx` would pass that on, one started by bin/qtsp.js would not).
 */
const BOOT = `
const { workerData } = require('node:worker_threads');
import(workerData.tsx).then(({ register }) => { register(); return import(workerData.entry); });
`;

/** Starts the writer thread on `file` (already created and migrated) and resolves once it has opened it. */
export async function startWriterThread(data: WriterThreadData): Promise<Writer> {
  const worker = new Worker(BOOT, {
    eval: true,
    execArgv: [],
    name: 'sqlite-writer',
    workerData: {
      ...data,
      tsx: import.meta.resolve('tsx/esm/api'),
      entry: new URL('./sqlite-writer-thread.ts', import.meta.url).href,
    },
  });
  const waiting = new Map<number, { resolve: (changes: number[]) => void; reject: (err: unknown) => void }>();
  let nextId = 0;
  const textNumbers = new Map<string, number>();
  let outgoing: WireWrite[] = [];
  const post = () => {
    const writes = outgoing;
    outgoing = [];
    if (writes.length > 0 && !stopped) worker.postMessage({ kind: 'writes', writes } satisfies ThreadRequest);
  };
  const wire = (s: Statement): WireStatement => {
    const parameters = s.parameters.map(compact);
    const known = textNumbers.get(s.sql);
    if (known !== undefined) return { text: known, parameters };
    if (textNumbers.size >= NUMBERED_TEXTS) return { sql: s.sql, parameters };
    const text = textNumbers.size;
    textNumbers.set(s.sql, text);
    return { sql: s.sql, text, parameters }; // defines the number (messages arrive in order)
  };
  let stopped: Error | undefined;
  let onClosed: (() => void) | undefined;
  // an idle writer never holds the process up (as the RSA key pool's workers)
  const updateRef = () => (waiting.size > 0 || onClosed ? worker.ref() : worker.unref());

  const stop = (err: Error) => {
    stopped ??= err;
    for (const w of waiting.values()) w.reject(stopped);
    waiting.clear();
    onClosed?.();
  };
  await new Promise<void>((resolve, reject) => {
    const started = (reply: ThreadReply) => {
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
    const settle = () => worker.off('message', started).off('error', failed).off('exit', exited);
    worker.on('message', started).on('error', failed).on('exit', exited);
  });
  worker.on('message', (reply: ThreadReply) => {
    if (reply.kind === 'results') {
      for (const r of reply.results) {
        const w = waiting.get(r.id);
        waiting.delete(r.id);
        if (r.ok) w?.resolve(r.changes);
        else w?.reject(toError(r.error));
      }
      updateRef();
    } else if (reply.kind === 'closed') stop(new Error('store is closed'));
  });
  worker.on('error', (err) => stop(new Error(`store writer thread failed: ${err.message}`)));
  worker.on('exit', (code) => stop(new Error(`store writer thread exited with code ${code}`)));
  updateRef();

  return {
    write(statements, durability = 'durable') {
      if (stopped) return Promise.reject(stopped);
      const id = nextId++;
      const answer = new Promise<number[]>((resolve, reject) => waiting.set(id, { resolve, reject }));
      outgoing.push({ id, durability, statements: statements.map(wire) });
      if (outgoing.length === 1) setImmediate(post); // the rest of this turn's writes join the message
      updateRef();
      return answer;
    },
    async close() {
      if (stopped) return;
      const closed = new Promise<void>((resolve) => (onClosed = resolve));
      updateRef();
      post();
      worker.postMessage({ kind: 'close' } satisfies ThreadRequest); // after every write already asked for
      await closed;
      await worker.terminate().catch(() => undefined);
    },
  };
}
