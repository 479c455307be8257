/**
 * One serving process per data directory: two instances on one directory would write the same key-archive
 * clone and caches (and, with SQLite, only one of them could be told apart in the logs). The lock is an
 * exclusive SQLite lock on <dataDir>/instance.lock, held for the life of the process. SQLite takes it with
 * POSIX advisory locks, which the kernel drops when the process ends, SIGKILL included: there is no stale lock
 * file to clean up after a crash (a pid file could not tell a live owner from a dead one across containers).
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';

export class DataDirInUseError extends Error {
  override name = 'DataDirInUseError';
}

export interface InstanceLock {
  readonly file: string;
  release(): void;
}

export function lockDataDir(dataDir: string): InstanceLock {
  const file = join(dataDir, 'instance.lock');
  const db = new Database(file, { timeout: 0 });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE'); // SQLITE_BUSY at once when another process holds it
  } catch (err) {
    db.close();
    if ((err as { code?: string }).code === 'SQLITE_BUSY') {
      throw new DataDirInUseError(
        `setting dataDir (QTSP_DATA_DIR): ${dataDir} is in use by another running qtsp instance (it holds ${file}); ` +
          'each instance needs its own data directory: instances share PostgreSQL and Redis, not files',
      );
    }
    throw err;
  }
  return {
    file,
    release: () => {
      if (db.open) db.close();
    },
  };
}
