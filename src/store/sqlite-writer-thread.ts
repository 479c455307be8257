/**
 * The SQLite store's writer thread (sqlite-writer.ts starts it): it owns the one writing connection and runs
 * the group commit here, off the main thread. Writes that arrive while a batch commits form the next batch,
 * so under load one fsync serves every write that waited for it; each write still runs in its own savepoint
 * (group-commit.ts runBatch). A write is answered only after its batch's COMMIT returned: on disk.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { type Durability, runBatch, type Statement } from './group-commit.ts';
import { type Checkpointer, startCheckpointer, WRITER_AUTOCHECKPOINT_PAGES } from './sqlite-checkpointer.ts';
import {
  plainError,
  statementReceiver,
  type ThreadReply,
  type ThreadRequest,
  type WriterThreadData,
} from './sqlite-writer-wire.ts';
import { nameThread } from './thread-name.ts';

/** SQLite's own default automatic checkpoint (pages), back when the checkpoint thread stops */
const SQLITE_DEFAULT_AUTOCHECKPOINT = 1000;

interface Job {
  readonly id: number;
  readonly statements: Statement[];
  readonly durability: Durability;
}

const port = parentPort!;
const reply = (message: ThreadReply) => port.postMessage(message);

/** The writing connection: WAL, every COMMIT on disk when it returns (dialects.ts), at most `maxBytes`. */
function openConnection({ file, maxBytes }: WriterThreadData): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  if (maxBytes) {
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    db.pragma(`max_page_count = ${Math.max(1, Math.floor(maxBytes / pageSize))}`);
  }
  return db;
}

/**
 * Checkpoints on their own thread (sqlite-checkpointer.ts); if it stops, this connection checkpoints again as
 * SQLite does by default.
 */
async function startCheckpoints(db: Database.Database, file: string): Promise<() => Promise<void>> {
  db.pragma(`wal_autocheckpoint = ${WRITER_AUTOCHECKPOINT_PAGES}`);
  let checkpointer: Checkpointer | undefined = await startCheckpointer(file, () => {
    checkpointer = undefined;
    db.pragma(`wal_autocheckpoint = ${SQLITE_DEFAULT_AUTOCHECKPOINT}`);
  });
  return () => checkpointer?.close() ?? Promise.resolve();
}

/**
 * Commits the jobs as one batch and answers each. A batch of ordered writes only commits without its fsync
 * (synchronous=NORMAL in WAL mode): the next durable commit's fsync of the WAL carries it too
 * (group-commit.ts Durability).
 */
function commit(db: Database.Database, jobs: readonly Job[], prepared: Prepared): void {
  const relaxed = jobs.every((j) => j.durability === 'ordered');
  try {
    if (relaxed) prepared.synchronous.NORMAL.run();
    const outcomes = runBatch(
      db,
      jobs.map((j) => j.statements),
      prepared.writes,
    );
    const results = jobs.map((job, i) => {
      const o = outcomes[i]!;
      return o.ok
        ? { id: job.id, ok: true as const, changes: o.changes }
        : { id: job.id, ok: false as const, error: plainError(o.error) };
    });
    reply({ kind: 'results', results });
  } catch (err) {
    // the commit itself failed: nothing of the batch is on disk
    reply({
      kind: 'results',
      results: jobs.map((job) => ({ id: job.id, ok: false as const, error: plainError(err) })),
    });
  } finally {
    if (relaxed) prepared.synchronous.FULL.run();
  }
}

/** the writes' statements by SQL text (group-commit.ts), and the two PRAGMA synchronous switches */
interface Prepared {
  readonly writes: Map<string, Database.Statement>;
  /** prepared once: db.pragma prepares its text on every call */
  readonly synchronous: Readonly<Record<'NORMAL' | 'FULL', Database.Statement>>;
}

/** Takes the main thread's writes in batches until it asks to close; then commits what is left and closes. */
function serve(db: Database.Database, stopCheckpoints: () => Promise<void>): void {
  const prepared: Prepared = {
    writes: new Map(),
    synchronous: { NORMAL: db.prepare('PRAGMA synchronous = NORMAL'), FULL: db.prepare('PRAGMA synchronous = FULL') },
  };
  const statementOf = statementReceiver();
  let queue: Job[] = [];
  const flush = () => {
    const jobs = queue;
    queue = [];
    if (jobs.length > 0) commit(db, jobs, prepared);
  };
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
    void stopCheckpoints().then(() => {
      db.close(); // the last connection: SQLite checkpoints the WAL into the file
      reply({ kind: 'closed' });
      port.close();
    });
  });
}

const data = workerData as WriterThreadData;
let db: Database.Database;
let stopCheckpoints: () => Promise<void>;
try {
  db = openConnection(data);
  stopCheckpoints = await startCheckpoints(db, data.file);
  // named only now: a new thread takes the name of the thread that starts it, and the checkpoint thread's
  // module loader thread (tsx) keeps that name for good
  nameThread('qtsp-store');
  reply({ kind: 'ready' });
} catch (err) {
  reply({ kind: 'failed', error: plainError(err) });
  process.exit(1);
}
serve(db, stopCheckpoints);
