/**
 * The store contract on the embedded SQLite store (one file per test in a temp dir), plus what only SQLite
 * has: the file's place and journal mode, and refusing a schema newer than the program.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openStore } from '../../src/store/open.ts';
import { openSqliteStore, sqlitePath } from '../../src/store/sqlite.ts';
import { registerStoreContract } from '../store/store-contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'qtsp-store-'));
let n = 0;
after(() => rmSync(dir, { recursive: true, force: true }));

registerStoreContract('sqlite', {
  location: async () => join(dir, `store-${++n}`, 'qtsp.sqlite'),
  open: async (file) => openSqliteStore(file),
});

describe('SQLite store file', () => {
  it('openStore puts one WAL-mode file at <dataDir>/qtsp.sqlite with schema version 2', async () => {
    const dataDir = join(dir, 'data-dir');
    const store = await openStore({ dataDir, store: { driver: 'sqlite', pingIntervalMs: 1000 } });
    await store.close();
    assert.equal(sqlitePath(dataDir), join(dataDir, 'qtsp.sqlite'));
    const db = new Database(sqlitePath(dataDir), { readonly: true });
    try {
      assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
      assert.deepEqual(db.prepare('SELECT version FROM schema_version').all(), [{ version: 1 }, { version: 2 }]);
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all();
      assert.deepEqual(tables, [{ name: 'certificates' }, { name: 'outbox' }, { name: 'schema_version' }, { name: 'signing_transactions' }]);
    } finally {
      db.close();
    }
  });

  it('refuses to open a database whose schema is newer than the program', async () => {
    const file = join(dir, 'newer', 'qtsp.sqlite');
    await openSqliteStore(file).close();
    const db = new Database(file);
    db.prepare('INSERT INTO schema_version (version, applied_at) VALUES (99, 0)').run();
    db.close();
    assert.throws(() => openSqliteStore(file), /schema version 99 is newer/);
  });
});
