/**
 * Where SQLite and PostgreSQL differ, and nowhere else (store.ts holds the one set of queries, schema.ts the one
 * schema):
 *
 * |                  | SQLite (embedded, default)                 | PostgreSQL (several instances)              |
 * |------------------|--------------------------------------------|---------------------------------------------|
 * | times            | INTEGER milliseconds (exact, sortable)     | TIMESTAMPTZ (microseconds: ms round-trip)   |
 * | bytes            | BLOB                                       | BYTEA                                       |
 * | insertion order  | the implicit rowid                         | a `seq` identity column                     |
 * | writes           | a writer thread, group commit (one fsync    | one transaction per write on a pooled client|
 * |                  | per batch), reads on the main thread        |                                             |
 * | migration lock   | the write lock of BEGIN IMMEDIATE          | Kysely's advisory lock                      |
 * | row locks        | none (one writer)                          | FOR SHARE NOWAIT (a write in flight)        |
 *
 * SQLite: WAL journal (readers, e.g. `qtsp evidence show` in another process, never block the writer);
 * synchronous=FULL (a commit is on disk before signDoc goes on: with WAL, NORMAL may lose the last commits on
 * power loss, and evidence backing a signature already handed out must not be lost); busy_timeout (several
 * processes on one file wait for each other instead of failing at once).
 *
 * PostgreSQL: bounded waits (a database that stops answering fails the request, 503, instead of holding it).
 */
import { mkdirSync } from 'node:fs';
import { isIP, Socket } from 'node:net';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import {
  CompiledQuery,
  Kysely,
  PostgresDialect,
  SqliteAdapter,
  SqliteDialect,
  SqliteDriver,
  sql,
  type DatabaseConnection,
  type SqliteDatabase,
} from 'kysely';
import pg from 'pg';
import type { Statement, Writer } from './group-commit.ts';
import { startWriterThread } from './sqlite-writer.ts';
import { migrate, type SchemaShape, type Tables, type Time } from './schema.ts';
import { hostLookup, type HostLookup } from '../util/host-lookup.ts';

export interface StoreDialect {
  readonly driver: 'sqlite' | 'postgres';
  /** reads, and compiling the writes */
  readonly db: Kysely<Tables>;
  readonly writer: Writer;
  /** the column that orders rows as they were inserted (schema.ts) */
  readonly insertionOrder: SchemaShape['insertionOrder'];
  /** a Date as this database keeps it (reading: `new Date(value)` serves both) */
  time(date: Date): Time;
  /**
   * what readiness' write probe writes beside its row: on SQLite, 8 KiB that need fresh (overflow) pages, so
   * a file at its size cap fails the probe with SQLITE_FULL as an evidence record would; none on PostgreSQL
   * (a commit there is a WAL flush, which fails on a full disk by itself)
   */
  readonly probeFiller: Buffer | undefined;
  /**
   * whether a read can lock its rows (SELECT ... FOR SHARE NOWAIT) and so tell a write still in flight on them
   * from one that ended: PostgreSQL, where a transaction whose COMMIT lost its answer may still be committing
   * on the server; not SQLite, whose one writer, in this process, has ended a write when it answers
   */
  readonly rowLocks: boolean;
  close(): Promise<void>;
}

/**
 * Kysely's SQLite dialect with two changes, both for migrations: its transactions BEGIN IMMEDIATE (a second
 * process waits for the write lock up front instead of failing on a stale read snapshot), and it runs
 * migrations inside one (Kysely assumes SQLite has no transactional DDL; it has, and a migration cut short
 * must leave nothing behind).
 */
class SqliteStoreDialect extends SqliteDialect {
  readonly #database: SqliteDatabase;
  constructor(database: SqliteDatabase) {
    super({ database });
    this.#database = database;
  }
  override createDriver() {
    return new ImmediateSqliteDriver({ database: this.#database });
  }
  override createAdapter() {
    return new TransactionalDdlSqliteAdapter();
  }
}

class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

/** statements the reading connection keeps at most (one per SQL text; reads of an IN list of n ids are n texts) */
const KEPT_STATEMENTS = 256;

/**
 * The reading connection as Kysely's SQLite driver sees it, keeping its prepared statements: the driver
 * prepares every query anew (better-sqlite3 prepare, SQLite's parse and plan, a good part of a short read),
 * while the store reads the same few SQL texts over and over. better-sqlite3 re-prepares a kept statement
 * by itself when the schema changes (sqlite3_prepare_v3), and a statement still iterating (a streamed query,
 * busy) is never handed out a second time. Kysely's driver uses nothing of the database but these two methods.
 */
function keepingStatements(database: Database.Database): SqliteDatabase {
  const kept = new Map<string, Database.Statement>();
  const prepare = (source: string): Database.Statement => {
    const statement = kept.get(source);
    if (statement && !statement.busy) return statement;
    const fresh = database.prepare(source);
    if (kept.size >= KEPT_STATEMENTS) kept.clear(); // shapes beyond the bound: start over rather than grow
    kept.set(source, fresh);
    return fresh;
  };
  return { prepare, close: () => database.close() };
}

export interface SqliteStoreOptions {
  /**
   * cap on the file size in bytes, 0 or absent for none (PRAGMA max_page_count): writes beyond it fail with
   * SQLITE_FULL exactly as on a full disk
   */
  readonly maxBytes?: number;
}

/**
 * Opens (creating or migrating) the SQLite store's database in `file`: this thread's connection migrates and
 * then only reads (query_only); the writer thread's connection writes (sqlite-writer.ts).
 */
export async function sqliteDialect(file: string, options: SqliteStoreOptions = {}): Promise<StoreDialect> {
  mkdirSync(dirname(file), { recursive: true });
  const database = new Database(file);
  const db = new Kysely<Tables>({ dialect: new SqliteStoreDialect(keepingStatements(database)) });
  let writer: Writer;
  try {
    database.pragma('journal_mode = WAL');
    database.pragma('foreign_keys = ON');
    database.pragma('busy_timeout = 5000');
    await migrate(db, { timeType: 'integer', bytesType: 'blob', insertionOrder: 'rowid', schema: undefined });
    database.pragma('query_only = ON');
    writer = await startWriterThread({ file, maxBytes: options.maxBytes ?? 0 });
  } catch (err) {
    await db.destroy();
    throw err;
  }
  return {
    driver: 'sqlite',
    db,
    writer,
    insertionOrder: 'rowid',
    time: (date) => date.getTime(),
    probeFiller: Buffer.alloc(8192),
    rowLocks: false,
    async close() {
      await db.destroy(); // the reader first: the writer's connection, closing last, folds the WAL into the file
      await writer.close(); // writes already asked for are committed first
    },
  };
}

export interface PostgresStoreOptions {
  /** postgres://user:password@host:port/database */
  readonly url: string;
  /**
   * most connections this instance opens, at least 2 (default 10): a third of them for ordered writes, the rest
   * for reads and durable writes
   */
  readonly maxConnections?: number;
}

/** Opens the PostgreSQL store's database and migrates its schema; rejects when it cannot be reached. */
export async function postgresDialect(options: PostgresStoreOptions): Promise<StoreDialect> {
  const budget = Math.max(2, options.maxConnections ?? 10);
  const orderedConnections = Math.max(1, Math.floor(budget / 3));
  const names = hostLookup();
  const db = await openMigrated(options.url, budget - orderedConnections, names).catch((err: unknown) => {
    names.close();
    throw err;
  });
  const ordered = orderedWrites(options.url, orderedConnections, names);
  const writer: Writer = {
    write: (statements, durability = 'durable') => runWrite(durability === 'ordered' ? ordered : db, statements),
    close: async () => undefined,
  };
  return {
    driver: 'postgres',
    db,
    writer,
    insertionOrder: 'seq',
    time: (date) => date,
    probeFiller: undefined,
    rowLocks: true,
    async close() {
      names.close(); // a connection asked for from now on fails at once, with no lookup
      await ordered.destroy();
      await db.destroy();
    },
  };
}

/**
 * How long the server lets one of our sessions sit idle inside a transaction before it ends the session (ms).
 * Our transactions send their statements back to back (runWrite), so only a stopped process waits this long.
 */
export const IDLE_IN_TRANSACTION_MS = 10_000;

/**
 * A pool of at most `max` connections, each query bounded. A client whose server went away (a restart, a
 * crash, `pg_ctl stop -m immediate`) emits 'error'; unhandled, that ends the process. pg-pool listens only
 * while a client is idle (and then re-emits on the pool), so every client gets a listener of its own for its
 * whole life, checked out too, also between two statements of a transaction. The error itself reaches the
 * request in flight as the rejection of its query (a 503 on signDoc); pg-pool drops a client that is no longer
 * queryable when it is released, and the next query connects anew.
 */
function postgresPool(url: string, max: number, names: HostLookup): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    connectionTimeoutMillis: 5000,
    query_timeout: 10_000,
    // a session left idle inside a transaction (its process frozen, or gone without closing) is ended by the
    // server: its row locks and its place in the journal's horizon (journal-horizon.ts) are not held for ever
    idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_MS,
    fallback_application_name: 'qtsp', // pg_stat_activity names our sessions (unless the URL names them)
    stream: () => socketResolvingWith(names),
  });
  pool.on('error', () => undefined); // an idle client lost: the next query (and readiness' ping) reports it
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
  });
  return pool;
}

/**
 * pg's socket, with the server's host name resolved by `names` (util/host-lookup.ts), not by Node's lookup,
 * which a process exit waits for: a stop with PostgreSQL and its DNS gone is not held by it. pg calls
 * connect(port, host), or connect(path) for a Unix socket.
 */
function socketResolvingWith(names: HostLookup): Socket {
  const socket = new Socket();
  const connect = socket.connect.bind(socket) as (port: number | string, host?: string) => Socket;
  socket.connect = ((port: number | string, host?: string) => {
    if (host === undefined || isIP(host)) return connect(port, host);
    names.addresses(host).then(
      ([first]) => {
        if (!socket.destroyed) connect(port, first!.address);
      },
      (err: Error) => socket.destroy(err),
    );
    return socket;
  }) as typeof socket.connect;
  return socket;
}

/** The connections for reads and durable writes, once the schema is migrated. */
async function openMigrated(url: string, max: number, names: HostLookup): Promise<Kysely<Tables>> {
  const db = new Kysely<Tables>({ dialect: new PostgresDialect({ pool: postgresPool(url, max, names) }) });
  try {
    // the version tables go where the store's tables go (search_path): stores may share one database
    const { rows } = await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db);
    await migrate(db, { timeType: 'timestamptz', bytesType: 'bytea', insertionOrder: 'seq', schema: rows[0]!.schema });
  } catch (err) {
    await db.destroy().catch(() => undefined);
    throw err;
  }
  return db;
}

/**
 * Ordered writes have connections of their own whose commits do not wait for their WAL flush
 * (synchronous_commit off for the session, set before the connection's first use: pg runs a client's queries
 * in order). A later durable commit, on any connection, flushes the WAL up to its own commit record and so
 * theirs too. A session setting rather than SET LOCAL in each write: that took a transaction, hence three more
 * round trips, even for a write of one statement.
 */
function orderedWrites(url: string, max: number, names: HostLookup): Kysely<Tables> {
  const pool = postgresPool(url, max, names);
  // a failure fails the client's next query too
  pool.on('connect', (client) => void client.query('SET synchronous_commit TO OFF').catch(() => undefined));
  return new Kysely<Tables>({ dialect: new PostgresDialect({ pool }) });
}

/** One atomic write: the rows each statement changed. */
async function runWrite(target: Kysely<Tables>, statements: readonly Statement[]): Promise<number[]> {
  const one = async (executor: Kysely<Tables>, s: Statement) =>
    Number((await executor.executeQuery(CompiledQuery.raw(s.sql, [...s.parameters]))).numAffectedRows ?? 0n);
  if (statements.length === 0) return [];
  // one statement is atomic on its own: no BEGIN and COMMIT round trips around it
  if (statements.length === 1) return [await one(target, statements[0]!)];
  // a failing statement rolls the transaction back; Kysely discards a client whose rollback failed
  return target.transaction().execute(async (trx) => {
    const changes: number[] = [];
    for (const s of statements) changes.push(await one(trx, s));
    return changes;
  });
}
