/**
 * store/group-commit.ts runBatch on a real SQLite file: the writes of a batch commit together; a write that
 * fails rolls back alone and only it is refused, wherever it is in the batch, also when it failed after its
 * first statement changed rows; a batch of one failing write commits nothing.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { runBatch, type Statement } from '../../../src/store/group-commit.ts';

const insert = (id: string, note = 'n'): Statement => ({
  sql: 'INSERT INTO t (id, note) VALUES (?, ?)',
  parameters: [id, note],
});

describe('runBatch', () => {
  let dir: string;
  let db: Database.Database;
  const prepared = new Map<string, Database.Statement>();
  const ids = () => (db.prepare('SELECT id FROM t ORDER BY id').all() as { id: string }[]).map((r) => r.id);

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'qtsp-group-commit-'));
    db = new Database(join(dir, 'db.sqlite'));
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE t (id TEXT PRIMARY KEY NOT NULL, note TEXT NOT NULL)');
  });
  after(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('every write of a batch commits, each with the rows its statements changed', () => {
    db.exec('DELETE FROM t');
    const outcomes = runBatch(
      db,
      [[insert('a')], [insert('b'), { sql: 'UPDATE t SET note = ? WHERE id IN (?, ?)', parameters: ['m', 'a', 'b'] }]],
      prepared,
    );
    assert.deepEqual(outcomes, [
      { ok: true, changes: [1] },
      { ok: true, changes: [1, 2] },
    ]);
    assert.deepEqual(ids(), ['a', 'b']);
    assert.equal(db.inTransaction, false);
  });

  test('a failing write in the middle rolls back alone, its first statement too; the others commit', () => {
    db.exec('DELETE FROM t');
    db.prepare('INSERT INTO t VALUES (?, ?)').run('taken', 'x');
    const outcomes = runBatch(db, [[insert('c')], [insert('d'), insert('taken')], [insert('e')]], prepared);
    assert.deepEqual(outcomes[0], { ok: true, changes: [1] });
    assert.equal(outcomes[1]!.ok, false);
    assert.match(String((outcomes[1] as { error: { code?: string } }).error.code), /SQLITE_CONSTRAINT/);
    assert.deepEqual(outcomes[2], { ok: true, changes: [1] });
    assert.deepEqual(ids(), ['c', 'e', 'taken']);
  });

  test('two failing writes of one batch are each refused; the write between them commits', () => {
    db.exec('DELETE FROM t');
    const outcomes = runBatch(db, [[insert('f'), insert('f')], [insert('g')], [insert('g')]], prepared);
    assert.deepEqual(
      outcomes.map((o) => o.ok),
      [false, true, false],
    );
    assert.deepEqual(ids(), ['g']);
  });

  test('a batch of one failing write commits nothing and gives its error', () => {
    db.exec('DELETE FROM t');
    const outcomes = runBatch(
      db,
      [[insert('h'), { sql: 'INSERT INTO t (id) VALUES (?)', parameters: ['i'] }]],
      prepared,
    );
    assert.equal(outcomes.length, 1);
    assert.equal(outcomes[0]!.ok, false);
    assert.match(String((outcomes[0] as { error: { code?: string } }).error.code), /SQLITE_CONSTRAINT_NOTNULL/);
    assert.deepEqual(ids(), []);
    assert.equal(db.inTransaction, false);
  });
});
