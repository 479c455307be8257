/**
 * SQLite group commit. With synchronous=FULL each commit is an fsync: one per write would cap signDoc at the
 * disk's flush rate. So the writes waiting together (signDoc's evidence and outbox rows, the relay's outbox
 * marks) share one transaction and one fsync; each still runs in its own SAVEPOINT, so one failing write rolls
 * back alone and rejects only its caller. A write is answered only after the shared COMMIT, so the evidence is
 * durable before signDoc answers. The batch runs in the writer thread (sqlite-writer-thread.ts), off the
 * main thread.
 *
 * The statements arrive compiled (Kysely's SQL and parameters, store.ts): this module knows no query, only how
 * to run a batch of writes on one connection.
 */
import type Database from 'better-sqlite3';

/** one compiled statement (Kysely's CompiledQuery carries these two) */
export interface Statement {
  readonly sql: string;
  readonly parameters: readonly unknown[];
}

/**
 * How a write must reach the disk. `durable` (the default): on disk when the call resolves. `ordered`: committed
 * and visible to every reader when it resolves, on disk no later than the next durable write (SQLite's WAL
 * and PostgreSQL's WAL are both appended in commit order, and a durable commit flushes everything before it):
 * for rows that matter only once a later durable write exists, such as a document claim, which the evidence
 * write follows before any signature is made.
 */
export type Durability = 'durable' | 'ordered';

/** the database's writes: each call is one atomic write of its statements */
export interface Writer {
  /** runs the statements atomically (durably unless asked otherwise); resolves with the rows each one changed */
  write(statements: readonly Statement[], durability?: Durability): Promise<number[]>;
  /** writes already asked for are committed, then no more are taken */
  close(): Promise<void>;
}

export type Outcome =
  | { readonly ok: true; readonly changes: number[] }
  | { readonly ok: false; readonly error: unknown };

/** how many distinct statement texts stay prepared (Kysely's SQL is the same for each shape of a query) */
const PREPARED_CACHE = 256;

/**
 * Runs a batch of writes in one IMMEDIATE transaction (one fsync). Returns each write's outcome; throws when the
 * commit itself failed (then nothing of the batch is on disk).
 *
 * A write fails rarely (a guard that refuses a claim taken over, a full disk), so the batch first runs every
 * write straight in the transaction: a savepoint per write makes SQLite copy each page a write touches first
 * into its sub-journal. Only when a write fails is the whole transaction rolled back and the batch run again
 * with a savepoint per write, so that the failing write rolls back alone and rejects only its caller.
 */
export function runBatch(
  db: Database.Database,
  writes: readonly (readonly Statement[])[],
  prepared: Map<string, Database.Statement>,
): Outcome[] {
  const statement = (text: string) => {
    let s = prepared.get(text);
    if (!s) {
      if (prepared.size >= PREPARED_CACHE) prepared.clear();
      s = db.prepare(text);
      prepared.set(text, s);
    }
    return s;
  };
  const run = (statements: readonly Statement[]) =>
    statements.map((s) => statement(s.sql).run(s.parameters as unknown[]).changes);
  const straight = runStraight(db, writes, run);
  if (!('failed' in straight)) return straight;
  // a batch of one write: its failure is the outcome; else find the failing write among the others
  return writes.length === 1 ? [{ ok: false, error: straight.failed }] : runIsolated(db, writes, run);
}

/** A write's error, carried out of the transaction it rolled back. */
class WriteFailed {
  constructor(readonly error: unknown) {}
}

/** every write straight in one transaction: their outcomes, or the error of the one that failed (nothing committed) */
function runStraight(
  db: Database.Database,
  writes: readonly (readonly Statement[])[],
  run: (statements: readonly Statement[]) => number[],
): Outcome[] | { readonly failed: unknown } {
  try {
    return db
      .transaction(() =>
        writes.map((statements): Outcome => {
          try {
            return { ok: true, changes: run(statements) };
          } catch (error) {
            throw new WriteFailed(error ?? new Error('write failed')); // rolls the whole transaction back
          }
        }),
      )
      .immediate();
  } catch (err) {
    if (err instanceof WriteFailed) return { failed: err.error };
    throw err; // the commit itself failed
  }
}

/** each write in its own savepoint: one failing write rolls back alone */
function runIsolated(
  db: Database.Database,
  writes: readonly (readonly Statement[])[],
  run: (statements: readonly Statement[]) => number[],
): Outcome[] {
  const one = db.transaction(run);
  const outcomes: Outcome[] = [];
  db.transaction(() => {
    for (const statements of writes) {
      try {
        outcomes.push({ ok: true, changes: one(statements) }); // nested: a savepoint
      } catch (error) {
        // SQLITE_FULL, an I/O error and the like may roll back the whole transaction, not just the savepoint:
        // then the writes before this one are gone too, and the batch fails as one
        if (!db.inTransaction) throw error;
        outcomes.push({ ok: false, error: error ?? new Error('write failed') });
      }
    }
  }).immediate();
  return outcomes;
}
