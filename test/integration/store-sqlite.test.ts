/**
 * The store contract on the embedded SQLite store (one file per test in a temp dir), plus what only SQLite
 * has: the file's place and journal mode, refusing a schema newer than the program, and a file written by
 * release 0.1 migrating forward with its rows.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openSqliteStore, openStore, sqlitePath } from '../../src/store/open.ts';
import { CHECKPOINT_IDLE_INTERVAL_MS, CHECKPOINT_INTERVAL_MS } from '../../src/store/sqlite-checkpoint-wait.ts';
import { registerReleaseMigration } from '../store/release-0.1/migration.ts';
import { MIGRATIONS, claimFor, registerStoreContract, signing } from '../store/store-contract.ts';
import { loadConfig } from '../../src/config/load.ts';
import { randomUUID } from 'node:crypto';
import { registerDocumentsContract } from '../store/documents-contract.ts';
import { registerJournalContract } from '../store/journal-contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'qtsp-store-'));
let n = 0;
after(() => rmSync(dir, { recursive: true, force: true }));

registerStoreContract('sqlite', {
  location: async () => join(dir, `store-${++n}`, 'qtsp.sqlite'),
  open: (file) => openSqliteStore(file),
});

registerJournalContract('sqlite', {
  location: async () => join(dir, `store-${++n}`, 'qtsp.sqlite'),
  open: (file) => openSqliteStore(file),
});

registerDocumentsContract('sqlite', {
  location: async () => join(dir, `store-${++n}`, 'qtsp.sqlite'),
  open: (file) => openSqliteStore(file),
});

registerReleaseMigration('sqlite', {
  location: async () => {
    const file = join(dir, `release-${++n}`, 'qtsp.sqlite');
    mkdirSync(join(file, '..'));
    copyFileSync(new URL('../store/release-0.1/qtsp.sqlite', import.meta.url), file);
    return file;
  },
  open: (file) => openSqliteStore(file),
});

describe('SQLite store file', () => {
  it('openStore puts one WAL-mode file at <dataDir>/qtsp.sqlite with migrations 0001 to 0008', async () => {
    const dataDir = join(dir, 'data-dir');
    const store = await openStore({ dataDir, store: { driver: 'sqlite', pingIntervalMs: 1000 } });
    await store.close();
    assert.equal(sqlitePath(dataDir), join(dataDir, 'qtsp.sqlite'));
    const db = new Database(sqlitePath(dataDir), { readonly: true });
    try {
      assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
      assert.deepEqual(db.prepare('SELECT name FROM kysely_migration ORDER BY name').all(), MIGRATIONS);
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all();
      assert.deepEqual(tables, [
        { name: 'certificates' },
        { name: 'health_probe' },
        { name: 'journal_batches' },
        { name: 'journal_entries' },
        { name: 'journal_purged' },
        { name: 'journal_renewals' },
        { name: 'kysely_migration' },
        { name: 'kysely_migration_lock' },
        { name: 'outbox' },
        { name: 'signed_documents' },
        { name: 'signing_transactions' },
        { name: 'sqlite_sequence' }, // the journal's AUTOINCREMENT
      ]);
    } finally {
      db.close();
    }
  });

  it('committed writes reach the database file while the store is open, from the checkpoint thread, also after it idled; the WAL is folded in at close', async () => {
    const file = join(dir, 'checkpoints', 'qtsp.sqlite');
    const store = await openSqliteStore(file);
    try {
      // long enough without writes for the checkpoint thread to back off to its idle interval
      await sleep(3 * CHECKPOINT_IDLE_INTERVAL_MS);
      const before = createHash('sha256').update(readFileSync(file)).digest('hex');
      const walBefore = statSync(`${file}-wal`).size;
      for (let i = 0; i < 20; i++) await store.ping(); // durable writes, far below the writer's own checkpoint threshold
      assert.ok(statSync(`${file}-wal`).size > walBefore, 'the writes went to the WAL');
      // the writer's connection checkpoints only past WRITER_AUTOCHECKPOINT_PAGES: a changed database file is
      // the checkpoint thread's doing
      const deadline = 10 * CHECKPOINT_IDLE_INTERVAL_MS;
      let changed = false;
      for (let waited = 0; !changed && waited < deadline; waited += CHECKPOINT_INTERVAL_MS / 4) {
        await sleep(CHECKPOINT_INTERVAL_MS / 4);
        changed = createHash('sha256').update(readFileSync(file)).digest('hex') !== before;
      }
      assert.ok(changed, `the database file unchanged ${deadline} ms after the writes`);
    } finally {
      await store.close();
    }
    assert.ok(
      !existsSync(`${file}-wal`) || statSync(`${file}-wal`).size === 0,
      'the WAL is folded into the file at close',
    );
  });

  it('refuses to open a database whose schema is newer than the program', async () => {
    const file = join(dir, 'newer', 'qtsp.sqlite');
    await (await openSqliteStore(file)).close();
    const db = new Database(file);
    db.prepare("INSERT INTO kysely_migration (name, timestamp) VALUES ('0099_from_the_future', ?)").run(
      new Date().toISOString(),
    );
    db.close();
    await assert.rejects(openSqliteStore(file), /migration 0099_from_the_future\) is newer than this program knows/);
  });
});

describe('journal.enabled', () => {
  it('is on by default; off, the store writes no journal entry for signings, revocations or events', async () => {
    const dataDir = join(dir, `journal-off-${++n}`);
    assert.equal(loadConfig({ dataDir }, {}).journal.enabled, true);
    const config = loadConfig({ dataDir }, { QTSP_JOURNAL_ENABLED: 'false' });
    assert.equal(config.journal.enabled, false);
    const store = await openStore(config);
    try {
      const input = signing(`txn-${randomUUID()}`);
      await store.recordSigning(input, 'ordered');
      const hash = input.transaction.hashes[0]!;
      const claim = claimFor(input, [hash]);
      assert.equal((await store.claimDocuments(claim, new Date(0))).kind, 'claimed');
      const signature = { hash, signature: 'c2ln', revocation: null };
      const serial = input.certificate.serialHex;
      await store.keepSignatures({ claim, signatures: [signature], evidenceSerialHex: serial, outbox: [] });
      assert.equal(await store.revokeCertificate(serial, 'keyCompromise', new Date()), true);
      await store.journal.append({ kind: 'service.started', ref: null, at: new Date(), data: {} });
      assert.equal((await store.getTransaction(input.transaction.txn)).length, 1, 'the evidence itself is kept');
      assert.equal(await store.journal.horizon(), 0, 'no journal entry');
    } finally {
      await store.close();
    }
  });
});
