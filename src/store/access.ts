/**
 * What every part of the store (certificates.ts, evidence.ts, outbox.ts, documents.ts) works with: the
 * dialect's reads and its atomic writer, a Date as the database keeps it, and whether the store is still open.
 */
import { CompiledQuery, sql, type Compilable, type Kysely, type RawBuilder } from 'kysely';
import type { StoreDialect } from './dialects.ts';
import type { Durability, Statement } from './group-commit.ts';
import type { Tables, Time } from './schema.ts';

export interface StoreAccess {
  /** reads, and building the writes */
  readonly db: Kysely<Tables>;
  /** one atomic write (durable unless asked 'ordered'); the rows each statement changed */
  write(queries: readonly (Compilable | Statement)[], durability?: Durability): Promise<number[]>;
  /** a read compiled once (prepared.ts): its rows */
  read<R>(statement: Statement): Promise<R[]>;
  /** a Date as this database keeps it (reading: `new Date(value)` serves both) */
  time(date: Date): Time;
  /** the column that orders rows as they were inserted (schema.ts), for `orderBy` and `select` */
  readonly insertionOrder: RawBuilder<unknown>;
  /** whether reads can lock rows (dialects.ts) */
  readonly rowLocks: boolean;
  /** every method's first step: throws once the store is closed (in an async method: a rejection) */
  ensureOpen(): void;
}

/** The store's access to its dialect, and closing it: once, after the writes already asked for. */
export function storeAccess(dialect: StoreDialect): StoreAccess & { close(): Promise<void> } {
  const { db } = dialect;
  let closed = false;
  return {
    db,
    time: dialect.time,
    insertionOrder: sql.ref(dialect.insertionOrder),
    rowLocks: dialect.rowLocks,
    write: (queries, durability) =>
      dialect.writer.write(
        queries.map((q) => ('compile' in q ? q.compile() : q)),
        durability,
      ),
    read: async <R>(statement: Statement) =>
      (await db.executeQuery<R>(CompiledQuery.raw(statement.sql, [...statement.parameters]))).rows,
    ensureOpen: () => {
      if (closed) throw new Error('store is closed');
    },
    async close() {
      if (closed) return;
      closed = true;
      await dialect.close(); // writes already asked for are committed first
    },
  };
}
