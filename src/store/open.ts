/**
 * Choosing the store from the configuration (store.driver), and watching it for readiness.
 */
import { join } from 'node:path';
import type { Config } from '../config/schema.ts';
import { postgresDialect, sqliteDialect, type PostgresStoreOptions, type SqliteStoreOptions } from './dialects.ts';
import { createStore, type StoreOptions } from './store.ts';
import type { Store } from './types.ts';
import { ensurePrivateDir, ensurePrivateFile } from '../util/private-files.ts';

export type { PostgresStoreOptions } from './dialects.ts';

export const SQLITE_FILE = 'qtsp.sqlite';

/** the embedded store's one file in the data directory */
export function sqlitePath(dataDir: string): string {
  return join(dataDir, SQLITE_FILE);
}

/** Opens (creating or migrating) the SQLite store in `file`. */
export async function openSqliteStore(
  file: string,
  options: SqliteStoreOptions = {},
  storeOptions: StoreOptions = {},
): Promise<Store> {
  return createStore(await sqliteDialect(file, options), storeOptions);
}

/** Opens the PostgreSQL store and migrates its schema; rejects when the database cannot be reached. */
export async function openPostgresStore(
  options: PostgresStoreOptions,
  storeOptions: StoreOptions = {},
): Promise<Store> {
  return createStore(await postgresDialect(options), storeOptions);
}

/**
 * SQLite in `<dataDir>/qtsp.sqlite` (default) or PostgreSQL at store.url; the schema is created or migrated.
 * With journal.enabled false no journal entry is written (docs/evidence.md: only for measuring its cost).
 */
export async function openStore(
  config: Pick<Config, 'dataDir'> & {
    readonly store: Omit<Config['store'], 'sqliteMaxBytes'> & { readonly sqliteMaxBytes?: number };
    readonly journal?: Pick<Config['journal'], 'enabled'>;
  },
): Promise<Store> {
  const storeOptions: StoreOptions = { journal: config.journal?.enabled ?? true };
  switch (config.store.driver) {
    case 'sqlite': {
      const file = sqlitePath(config.dataDir);
      ensurePrivateDir(config.dataDir);
      ensurePrivateFile(file, [`${file}-wal`, `${file}-shm`]); // personal data: owner only (README: Files)
      return openSqliteStore(file, { maxBytes: config.store.sqliteMaxBytes ?? 0 }, storeOptions);
    }
    case 'postgres':
      // the schema refuses a postgres driver without url; this guards callers that build a config by hand
      if (!config.store.url) throw new Error('store.url is required when store.driver is postgres');
      return openPostgresStore({ url: config.store.url }, storeOptions);
  }
}

export interface StoreHealth {
  /** the result of the last ping */
  readonly healthy: boolean;
  /** why the last ping failed (the driver's message, no connection string) */
  readonly reason: string | undefined;
  /** pings now (after a ping already under way, whose answer may predate the call) and updates the state */
  check(): Promise<boolean>;
  stop(): void;
}

/**
 * Readiness must not wait for a database round trip (the HTTP layer's readiness check is synchronous, and a
 * hung database must not hang the probe), so the store is pinged every `intervalMs` in the background and
 * readiness reports the last answer. A ping that takes longer than the interval counts as a failure.
 */
export function watchStore(
  store: Store,
  intervalMs: number,
  onChange?: (healthy: boolean, reason: string | undefined) => void,
): StoreHealth {
  let healthy = true;
  let reason: string | undefined;
  let running: Promise<boolean> | undefined;
  const set = (ok: boolean, why: string | undefined) => {
    const changed = ok !== healthy;
    healthy = ok;
    reason = why;
    if (changed) onChange?.(ok, why);
  };
  const ping = async (): Promise<boolean> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${intervalMs} ms`)), intervalMs);
    });
    try {
      await Promise.race([store.ping(), timeout]);
      set(true, undefined);
    } catch (err) {
      set(false, (err as Error).message);
    } finally {
      clearTimeout(timer);
    }
    return healthy;
  };
  // the background tick joins a ping under way; an explicit check waits for it and pings again, so its answer
  // reflects the store as it is after the call (a ping started before a change may report the old state)
  const tick = () => (running ??= ping().finally(() => (running = undefined)));
  const check = async () => {
    await running;
    return tick();
  };
  const interval = setInterval(() => void tick(), intervalMs);
  interval.unref();
  return {
    get healthy() {
      return healthy;
    },
    get reason() {
      return reason;
    },
    check,
    stop: () => clearInterval(interval),
  };
}
