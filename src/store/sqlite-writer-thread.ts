/**
 * The SQLite store's writer thread (sqlite-writer.ts starts it): it owns the one writing connection and runs
 * the group commit here, off the main thread. Writes that arrive while a batch commits form the next batch,
 * so under load one fsync serves every write that waited for it; each write still runs in its own savepoint
 * (group-commit.ts runBatch). A write is answered only after its batch's COMMIT returned: on disk.
 */
import { writeFileSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { runBatch, type Durability, type Statement } from './group-commit.ts';
import { startCheckpointer, WRITER_AUTOCHECKPOINT_PAGES, type Checkpointer } from './sqlite-checkpointer.ts';
import type { ThreadReply, ThreadRequest, WireStatement, WriterThreadData } from './sqlite-writer.ts';

const port = parentPort!;
const { file, maxBytes } = workerData as WriterThreadData;

/** what crosses back to the main thread of an error (SqliteError's code, e.g. SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_FULL) */
function plain(err: unknown): { name: string; message: string; code?: string } {
  const e = err instanceof Error ? err : new Error(String(err));
  const code = (e as { code?: unknown }).code;
  return { name: e.name, message: e.message, ...(typeof code === 'string' ? { code } : {}) };
}

// the thread's name for `top -H`, `ps -L` and the benchmark's CPU split (Linux; 15 characters at most)
try {
  writeFileSync('/proc/thread-self/comm', 'qtsp-store');
} catch {
  // not Linux, or /proc not mounted: only the name is missing
}

let db: Database.Database;
let checkpointer: Checkpointer | undefined;
try {
  db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL'); // a COMMIT is on disk when it returns (dialects.ts)
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  if (maxBytes)
    db.pragma(
      `max_page_count = ${Math.max(1, Math.floor(maxBytes / (db.pragma('page_size', { simple: true }) as number)))}`,
    );
  // checkpoints on their own thread (sqlite-checkpointer.ts); if it stops, this connection checkpoints again as SQLite does by default
  db.pragma(`wal_autocheckpoint = ${WRITER_AUTOCHECKPOINT_PAGES}`);
  checkpointer = await startCheckpointer(file, () => {
    checkpointer = undefined;
    db.pragma('wal_autocheckpoint = 1000');
  });
  port.postMessage({ kind: 'ready' } satisfies ThreadReply);
} catch (err) {
  port.postMessage({ kind: 'failed', error: plain(err) } satisfies ThreadReply);
  process.exit(1);
}

const prepared = new Map<string, Database.Statement>();
let queue: { id: number; statements: Statement[]; durability: Durability }[] = [];

function flush(): void {
  const jobs = queue;
  queue = [];
  if (jobs.length === 0) return;
  // a batch of ordered writes only commits without its fsync (synchronous=NORMAL in WAL mode): the next durable
  // commit's fsync of the WAL carries it too (group-commit.ts Durability)
  const relaxed = jobs.every((j) => j.durability === 'ordered');
  try {
    if (relaxed) db.pragma('synchronous = NORMAL');
    const outcomes = runBatch(
      db,
      jobs.map((j) => j.statements),
      prepared,
    );
    const results = jobs.map((job, i) => {
      const o = outcomes[i]!;
      return o.ok
        ? { id: job.id, ok: true as const, changes: o.changes }
        : { id: job.id, ok: false as const, error: plain(o.error) };
    });
    port.postMessage({ kind: 'results', results } satisfies ThreadReply);
  } catch (err) {
    // the commit itself failed: nothing of the batch is on disk
    port.postMessage({
      kind: 'results',
      results: jobs.map((job) => ({ id: job.id, ok: false as const, error: plain(err) })),
    } satisfies ThreadReply);
  } finally {
    if (relaxed) db.pragma('synchronous = FULL');
  }
}

/** the SQL texts by number (sqlite-writer.ts WireStatement) */
const texts = new Map<number, string>();

function statementOf(s: WireStatement): Statement {
  if (s.sql !== undefined) {
    if (s.text !== undefined) texts.set(s.text, s.sql);
    return { sql: s.sql, parameters: s.parameters };
  }
  const sql = texts.get(s.text!);
  if (sql === undefined) throw new Error(`statement text ${s.text} was never sent`); // cannot happen: messages arrive in order
  return { sql, parameters: s.parameters };
}

port.on('message', (request: ThreadRequest) => {
  if (request.kind === 'writes') {
    const first = queue.length === 0;
    for (const w of request.writes)
      queue.push({ id: w.id, durability: w.durability, statements: w.statements.map(statementOf) });
    // the messages that are already waiting are delivered before this runs: they join the batch
    if (first && queue.length > 0) setImmediate(flush);
    return;
  }
  flush(); // close: what was asked for is committed first
  void (checkpointer?.close() ?? Promise.resolve()).then(() => {
    db.close(); // the last connection: SQLite checkpoints the WAL into the file
    port.postMessage({ kind: 'closed' } satisfies ThreadReply);
    port.close();
  });
});
