/**
 * checkAnchor (journal/anchor.ts) in-process over a SQLite store: a batch gone from the middle of the store is
 * missing, gone from its end a truncated tail, one with another token re-sealed; an anchor's records are
 * checked field by field, and one number held twice with two roots is refused.
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { AnchorError, anchorRecord, checkAnchor, loadAnchor, parseAnchorText } from '../../../src/journal/anchor.ts';
import { sealJournal } from '../../../src/journal/seal.ts';
import { openSqliteStore, sqlitePath } from '../../../src/store/open.ts';
import type { Store } from '../../../src/store/types.ts';
import { testTsa } from '../../helpers/journal.ts';

const dir = mkdtempSync(join(tmpdir(), 'qtsp-anchor-unit-'));
const file = sqlitePath(join(dir, 'data'));
let store: Store;

before(async () => {
  const tsa = testTsa(join(dir, 'pki'));
  store = await openSqliteStore(file);
  for (let i = 0; i < 4; i++) {
    await store.journal.append({ kind: 'test.note', ref: null, at: new Date(), data: { i } });
    await sealJournal(store, tsa);
  }
});
after(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

it('names a missing batch, a truncated tail and a re-sealed batch', async () => {
  const anchor = new Map((await store.journal.batches(1, 10)).map((b) => [b.batchNo, anchorRecord(b)]));
  assert.equal(anchor.size, 4);
  assert.deepEqual(await checkAnchor(store, anchor), []);
  const db = new Database(file);
  db.prepare('DELETE FROM journal_batches WHERE batch_no IN (2, 4)').run();
  db.prepare('UPDATE journal_batches SET token = ? WHERE batch_no = 3').run(Buffer.from('not the token'));
  db.close();
  const found = await checkAnchor(store, anchor);
  assert.deepEqual(
    found.map((f) => [f.batchNo, f.kind, f.fields]),
    [
      [2, 'missing', []],
      [3, 'resealed', ['token']],
      [4, 'truncated', []],
    ],
  );
});

it('refuses malformed records and one number held twice with two roots', async () => {
  const record = anchorRecord((await store.journal.batches(1, 1))[0]!);
  assert.equal(parseAnchorText(JSON.stringify(record), 'one').batches.length, 1);
  for (const bad of [
    { ...record, root: 'ABC' },
    { ...record, prevRoot: 7 },
    { ...record, token: 'not base64!' },
    { ...record, batchNo: 1.5 },
    [record],
  ])
    assert.throws(() => parseAnchorText(JSON.stringify(bad), 'bad'), AnchorError);
  const twice = join(dir, 'twice.json');
  writeFileSync(twice, JSON.stringify({ batches: [record, { ...record, root: 'ab' }], next: null }));
  await assert.rejects(loadAnchor(twice, 1000), /batch 1 appears twice/);
});
