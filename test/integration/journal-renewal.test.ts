/**
 * Renewal of the journal's evidence records (RFC 4998 section 5, journal/renewal.ts), checked by BouncyCastle
 * (test/oracles/ErsChecker.java): a time-stamp renewal adds an ArchiveTimeStamp to each current chain when the
 * TSA certificate of its newest time-stamp ends within the margin, and only with a TSA certificate that ends
 * later; a hash-tree renewal with SHA-512 starts a new chain per entry. Records carry every renewal, pass
 * BouncyCastle, and fail it for a changed byte of the data object; the audit checks the renewals too.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { hashByName } from '../../src/crypto/algorithms.ts';
import { auditJournal } from '../../src/journal/audit.ts';
import { evidenceRecord } from '../../src/journal/evidence-record.ts';
import { renewHashTree, renewTimeStamps, tsaCertificateEnd } from '../../src/journal/renewal.ts';
import { sealJournal } from '../../src/journal/seal.ts';
import { openSqliteStore } from '../../src/store/open.ts';
import type { StoredJournalEntry, Store } from '../../src/store/types.ts';
import type { LocalTsa } from '../../src/timestamping/tsa.ts';
import { bouncyCastleVerdict, renewedTsa, rootFileOf, testTrust, testTsa } from '../helpers/journal.ts';
import { signing } from '../store/store-contract.ts';

const YEAR_MS = 365 * 86_400_000;
const dir = mkdtempSync(join(tmpdir(), 'qtsp-journal-renewal-'));
let older: LocalTsa;
let newer: LocalTsa;
let store: Store;

before(async () => {
  older = testTsa(join(dir, 'pki'));
  await sleep(1100); // certificate times are whole seconds: the newer TSA certificate ends later
  newer = renewedTsa(join(dir, 'pki')); // renewed at a ceremony: a fresh key, certified by the same root
  store = await openSqliteStore(join(dir, 'store', 'qtsp.sqlite'));
});
after(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** BouncyCastle's verdict on the current record of `entry` over `body` */
async function verdict(entry: StoredJournalEntry, body = entry.body): Promise<{ valid: boolean; output: string }> {
  const batch = (await store.journal.batchOf(entry.seq))!;
  const name = `entry-${entry.seq}-${Math.random().toString(36).slice(2)}`;
  writeFileSync(join(dir, `${name}.ers`), evidenceRecord(batch, entry.seq, await store.journal.renewals()));
  writeFileSync(join(dir, `${name}.json`), body);
  return bouncyCastleVerdict(join(dir, `${name}.ers`), join(dir, `${name}.json`), {
    root: rootFileOf(join(dir, 'pki')),
  });
}

async function assertValid(entry: StoredJournalEntry, what: string): Promise<void> {
  const good = await verdict(entry);
  assert.ok(good.valid, `${what}, entry ${entry.seq}: ${good.output}`);
}

async function assertChangedByteRefused(entry: StoredJournalEntry): Promise<void> {
  const changed = Buffer.from(entry.body);
  changed[20] = changed[20]! ^ 0x01;
  const bad = await verdict(entry, changed);
  assert.equal(bad.valid, false, `a changed byte passed: ${bad.output}`);
}

describe('renewal of evidence records', () => {
  it('time-stamp renewals when due, a SHA-512 hash-tree renewal, all passing BouncyCastle and the audit', async () => {
    for (let i = 0; i < 3; i++) await store.recordSigning(signing(`txn-a-${i}`));
    await sealJournal(store, older);
    for (let i = 0; i < 2; i++) await store.recordSigning(signing(`txn-b-${i}`));
    await sealJournal(store, older);
    const entries = await store.journal.entries(0, await store.journal.horizon());
    const [first, , third] = entries;
    const last = entries.at(-1)!;

    // not due: the TSA certificate ends in ten years
    assert.deepEqual(await renewTimeStamps(store, newer, { marginMs: 86_400_000 }), []);
    // due with a margin past its end; the newer TSA certificate ends later
    assert.ok(tsaCertificateEnd((await store.journal.lastBatch())!.token).getTime() < Date.now() + 11 * YEAR_MS);
    const [renewal] = await renewTimeStamps(store, newer, { marginMs: 11 * YEAR_MS });
    assert.equal(renewal?.kind, 'timestamp');
    assert.equal(renewal!.leaves.length, 2, 'one leaf per batch chain');
    await assertValid(first!, 'after a time-stamp renewal');
    await assertValid(last, 'after a time-stamp renewal');
    await assertChangedByteRefused(third!);
    // due again by the margin, but the same certificate would renew nothing
    await assert.rejects(renewTimeStamps(store, newer, { marginMs: 11 * YEAR_MS }), /renew the TSA certificate first/);
    // on request: a third time-stamp in each chain, which must cover both earlier ones
    assert.equal((await renewTimeStamps(store, older, { marginMs: 0, force: true })).length, 1);
    await assertValid(third!, 'after two time-stamp renewals');

    const sha512 = hashByName('SHA-512')!;
    const hashRenewal = await renewHashTree(store, older, sha512);
    assert.equal(hashRenewal?.leaves.length, entries.length, 'one leaf per entry');
    await assertValid(first!, 'after a hash-tree renewal');
    await assertChangedByteRefused(first!);
    await assert.rejects(renewHashTree(store, older, sha512), /is the hash of a current chain/);

    // a batch sealed afterwards has a SHA-256 chain of its own: a forced renewal renews both kinds of chain
    await store.recordSigning(signing('txn-c'));
    await sealJournal(store, older);
    const forced = await renewTimeStamps(store, newer, { marginMs: 0, force: true });
    assert.deepEqual(forced.map((r) => r.hashOid).sort(), [sha512.oid, hashByName('SHA-256')!.oid].sort());
    const newest = (await store.journal.entries(last.seq, await store.journal.horizon())).at(0)!;
    await assertValid(first!, 'SHA-512 chain renewed');
    await assertValid(newest, 'a batch after the hash-tree renewal, renewed');

    const report = await auditJournal(store, { trust: testTrust(join(dir, 'pki'), newer.chain[0]!) });
    assert.deepEqual(report.findings, []);
    assert.equal(report.renewals, 5);

    // a database administrator swaps a renewal's token for another one: the audit names the renewal
    const db = new Database(join(dir, 'store', 'qtsp.sqlite'));
    try {
      db.prepare(
        'UPDATE journal_renewals SET token = (SELECT token FROM journal_batches WHERE batch_no = 1) WHERE renewal_no = 2',
      ).run();
    } finally {
      db.close();
    }
    const tampered = await auditJournal(store, { trust: testTrust(join(dir, 'pki'), newer.chain[0]!) });
    const named = tampered.findings.map((f) => (f.kind === 'renewal' ? `${f.renewal}: ${f.detail}` : f.kind));
    assert.match(named[0] ?? '', /^2: the time-stamp covers another hash than the root/, named.join('\n'));
    // the swapped token's genTime is not the renewal's renewed_at
    assert.match(named[1] ?? '', /^2: its renewed_at .* is not its time-stamp's genTime /, named.join('\n'));
    assert.ok(
      named.slice(2).every((n) => n.startsWith('3: ')),
      `the later hash-tree renewal covered the chains with the original token: ${named.join('\n')}`,
    );
  });
});
