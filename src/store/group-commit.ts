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
 * Runs a batch of writes in one IMMEDIATE transaction (one fsync), each in its own savepoint. Returns each
 * write's outcome; throws when the commit itself failed (then nothing of the batch is on disk).
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
  const one = db.transaction((statements: readonly Statement[]) =>
    statements.map((s) => statement(s.sql).run(s.parameters as unknown[]).changes),
  );
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
