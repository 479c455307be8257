/**
 * What a database administrator can do behind the service's back: SQL on the store's own database, beside a
 * store opened on it, on SQLite (a second connection to the file) and PostgreSQL (a fresh schema of the test
 * server, test/helpers/postgres.ts).
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { openPostgresStore, openSqliteStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/types.ts';
import type { PostgresServer } from './postgres.ts';

/** SQL with `?` placeholders, as a DBA runs it */
export interface Raw {
  run(sql: string, ...params: unknown[]): Promise<void>;
  /** the rows of a query */
  all(sql: string, ...params: unknown[]): Promise<Record<string, unknown>[]>;
  /** a time as the database keeps it */
  time(date: Date): unknown;
  /** how an insert names an explicit value of an identity column (PostgreSQL's GENERATED ALWAYS) */
  readonly overriding: string;
  close(): Promise<void>;
}

export interface TamperDialect {
  readonly name: string;
  /** a fresh store, a raw connection to its database, and its settings for `qtsp` (env) */
  open(): Promise<{ store: Store; raw: Raw; env: Record<string, string>; dataDir: string }>;
}

export function sqliteDialect(dir: string): TamperDialect {
  return {
    name: 'SQLite',
    async open() {
      const dataDir = join(dir, randomUUID());
      const file = join(dataDir, 'qtsp.sqlite');
      const store = await openSqliteStore(file);
      const db = new Database(file);
      const raw: Raw = {
        run: async (sql, ...params) => void db.prepare(sql).run(...params),
        all: async (sql, ...params) => db.prepare(sql).all(...params) as Record<string, unknown>[],
        time: (date) => date.getTime(),
        overriding: '',
        close: async () => void db.close(),
      };
      return { store, raw, env: {}, dataDir };
    },
  };
}

export function postgresDialect(dir: string, server: () => PostgresServer): TamperDialect {
  return {
    name: 'PostgreSQL',
    async open() {
      const url = await server().freshSchemaUrl();
      const store = await openPostgresStore({ url });
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      const numbered = (sql: string) => {
        let n = 0;
        return sql.replace(/\?/g, () => `$${++n}`);
      };
      const raw: Raw = {
        run: async (sql, ...params) => void (await client.query(numbered(sql), params)),
        all: async (sql, ...params) => (await client.query(numbered(sql), params)).rows,
        time: (date) => date,
        overriding: 'OVERRIDING SYSTEM VALUE',
        close: () => client.end(),
      };
      const env = { QTSP_STORE_DRIVER: 'postgres', QTSP_STORE_URL: url };
      return { store, raw, env, dataDir: join(dir, randomUUID()) };
    },
  };
}
