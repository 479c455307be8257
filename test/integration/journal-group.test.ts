/**
 * One evidence record over both entries of a signing (signing.authorized and signing.returned) as an RFC 4998
 * data group: `qtsp evidence record TXN` writes it, BouncyCastle (test/oracles/ErsChecker.java, ERSDataGroup)
 * validates it over the two data objects and refuses a changed byte in either; also when the two entries were
 * sealed in different batches, after a time-stamp renewal, after a hash-tree renewal (SHA-512) and a
 * time-stamp renewal after that. The audit checks each group's leaf, in the batches and in the renewals.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { hashByName } from '../../src/crypto/algorithms.ts';
import { auditJournal } from '../../src/journal/audit.ts';
import { renewHashTree, renewTimeStamps } from '../../src/journal/renewal.ts';
import { groupRecordsOf } from '../../src/journal/records.ts';
import { sealJournal } from '../../src/journal/seal.ts';
import { openSqliteStore, sqlitePath } from '../../src/store/open.ts';
import type { RecordSigningInput, Store } from '../../src/store/types.ts';
import type { LocalTsa } from '../../src/timestamping/tsa.ts';
import { bouncyCastleVerdict, returnSignature, rootFileOf, testTrust, testTsa } from '../helpers/journal.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';
import { signing } from '../store/store-contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'qtsp-journal-group-'));
const dataDir = join(dir, 'data');
let tsa: LocalTsa;
let store: Store;

before(async () => {
  tsa = testTsa(join(dir, 'pki'));
  store = await openSqliteStore(sqlitePath(dataDir));
});
after(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** signDoc's two writes of a signing: its evidence (step 6), then the signature returned (step 10) */
async function authorize(txn: string): Promise<RecordSigningInput> {
  const input = signing(txn);
  await store.recordSigning(input);
  return input;
}

/** the DER of an OBJECT IDENTIFIER's value (short form), to find an algorithm in a record */
const derOid = (dotted: string) => {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const bytes = [a! * 40 + b!];
  for (const n of rest) {
    const groups = [n & 0x7f];
    for (let v = n >>> 7; v > 0; v >>>= 7) groups.unshift((v & 0x7f) | 0x80);
    bytes.push(...groups);
  }
  return Buffer.from([0x06, bytes.length, ...bytes]);
};

const write = (name: string, bytes: Buffer) => {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
};

/** our root, which BouncyCastle chains each TSA certificate to */
const anchor = () => ({ root: rootFileOf(join(dir, 'pki')) });

/** BouncyCastle on the group record over both data objects, and with one byte changed in each in turn */
async function checkGroup(name: string, record: Buffer, authorized: Buffer, returned: Buffer): Promise<void> {
  const ers = write(`${name}.ers`, record);
  const objects = [write(`${name}-a.json`, authorized), write(`${name}-r.json`, returned)];
  const good = await bouncyCastleVerdict(ers, objects, anchor());
  assert.ok(good.valid, `${name}: ${good.output}`);
  for (const [which, body] of [
    ['authorized', authorized],
    ['returned', returned],
  ] as const) {
    const changed = Buffer.from(body);
    changed[30] = changed[30]! ^ 0x01;
    const objects =
      which === 'authorized'
        ? [write(`${name}-a-changed.json`, changed), write(`${name}-r.json`, returned)]
        : [write(`${name}-a.json`, authorized), write(`${name}-r-changed.json`, changed)];
    const bad = await bouncyCastleVerdict(ers, objects, anchor());
    assert.equal(bad.valid, false, `${name}, a byte of the ${which} entry changed: ${bad.output}`);
  }
}

describe("one evidence record over a signing's two entries", () => {
  it('qtsp evidence record TXN writes it; BouncyCastle validates it over both and refuses a changed byte', async () => {
    const input = await authorize('txn-group-one-batch');
    await returnSignature(store, input);
    const [batch] = await sealJournal(store, tsa);
    assert.equal(batch?.groups?.length, 1, 'a data group for the signing');
    const out = join(dir, 'records');
    const root = rootFileOf(join(dir, 'pki'));
    const run = await qtsp([
      'evidence',
      'record',
      'txn-group-one-batch',
      '--out',
      out,
      '--data-dir',
      dataDir,
      '--root',
      root,
    ]);
    assert.equal(run.code, 0, run.output);
    const signingDir = join(out, input.certificate.serialHex);
    const files = readdirSync(signingDir);
    const group = files.find((f) => f.endsWith('-signing.group.ers'));
    assert.ok(group, `the group record among ${files.join(', ')}`);
    const body = (kind: string) => readFileSync(join(signingDir, files.find((f) => f.endsWith(`-${kind}.json`))!));
    await checkGroup(
      'one-batch',
      readFileSync(join(signingDir, group)),
      body('signing.authorized'),
      body('signing.returned'),
    );
  });

  it('covers both also when they were sealed in different batches, and after a time-stamp renewal', async () => {
    const input = await authorize('txn-group-two-batches');
    const [first] = await sealJournal(store, tsa);
    await returnSignature(store, input);
    const [second] = await sealJournal(store, tsa);
    assert.ok(first && second && first.batchNo < second.batchNo);
    assert.equal(second.groups?.length, 1);
    const [group] = await groupRecordsOf(store, input.certificate.serialHex);
    assert.ok(group, 'a group record');
    assert.ok(group.authorized.seq <= first.throughSeq && group.returned.seq > first.throughSeq);
    await checkGroup('two-batches', group.record, group.authorized.body, group.returned.body);

    assert.equal((await renewTimeStamps(store, tsa, { force: true, marginMs: 0 })).length, 1);
    const [renewed] = await groupRecordsOf(store, input.certificate.serialHex);
    assert.ok(renewed && renewed.record.length > group.record.length, 'the renewal joins the chain');
    await checkGroup('renewed', renewed.record, renewed.authorized.body, renewed.returned.body);
  });

  it('follows a hash-tree renewal, and a time-stamp renewal after it, in qtsp evidence record TXN', async () => {
    const sha512 = hashByName('SHA-512')!;
    assert.ok(await renewHashTree(store, tsa, sha512), 'a hash-tree renewal');
    const recorded = async (txn: string) => {
      const out = mkdtempSync(join(dir, 'records-'));
      const root = rootFileOf(join(dir, 'pki'));
      const run = await qtsp(['evidence', 'record', txn, '--out', out, '--data-dir', dataDir, '--root', root]);
      assert.equal(run.code, 0, run.output);
      const serial = readdirSync(out).find((f) => f !== 'tsa-chain.pem');
      const files = readdirSync(join(out, serial!));
      const file = (end: string) => readFileSync(join(out, serial!, files.find((f) => f.endsWith(end))!));
      return {
        record: file('-signing.group.ers'),
        authorized: file('-signing.authorized.json'),
        returned: file('-signing.returned.json'),
      };
    };
    for (const [txn, name] of [
      ['txn-group-one-batch', 'hash-renewed-one'],
      ['txn-group-two-batches', 'hash-renewed-two'],
    ] as const) {
      const group = await recorded(txn);
      assert.ok(group.record.includes(derOid(sha512.oid)), `${name}: a chain with ${sha512.name}`);
      await checkGroup(name, group.record, group.authorized, group.returned);
    }

    const renewed = await renewTimeStamps(store, tsa, { force: true, marginMs: 0 });
    assert.ok(
      renewed.some((r) => r.hashOid === sha512.oid && r.chainOf !== null),
      'the new chain is renewed',
    );
    const group = await recorded('txn-group-two-batches');
    await checkGroup('hash-then-time-renewed', group.record, group.authorized, group.returned);
    const audit = await auditJournal(store, { trust: testTrust(join(dir, 'pki')) });
    assert.equal(audit.clean, true, JSON.stringify(audit.findings));

    // a group's leaf dropped from the hash-tree renewal: the audit names the group (and the root it changes)
    const hashRenewal = (await store.journal.renewals()).find((r) => r.kind === 'hashtree')!;
    const grouped = (await store.journal.batches(1, 100)).find((b) => b.groups?.length)!;
    const g = grouped.groups![0]!;
    const key = Buffer.alloc(8);
    key.writeBigUInt64BE(2n ** 52n + BigInt(g.returnedSeq));
    const db = new Database(sqlitePath(dataDir));
    try {
      const { leaves } = db
        .prepare('SELECT leaves FROM journal_renewals WHERE renewal_no = ?')
        .get(hashRenewal.renewalNo) as { leaves: Buffer };
      const size = 8 + 64;
      const kept = [];
      for (let at = 0; at < leaves.length; at += size)
        if (!leaves.subarray(at, at + 8).equals(key)) kept.push(leaves.subarray(at, at + size));
      assert.equal(kept.length, leaves.length / size - 1, "the group's leaf among the renewal's");
      const update = db.prepare('UPDATE journal_renewals SET leaves = ? WHERE renewal_no = ?');
      update.run(Buffer.concat(kept), hashRenewal.renewalNo);
      const report = await auditJournal(store, { trust: testTrust(join(dir, 'pki')) });
      update.run(leaves, hashRenewal.renewalNo);
      assert.ok(
        report.findings.some(
          (f) =>
            'detail' in f &&
            f.detail === `the data group of entries ${g.authorizedSeq} and ${g.returnedSeq} has no leaf`,
        ),
        JSON.stringify(report.findings),
      );
    } finally {
      db.close();
    }
    assert.equal((await auditJournal(store, { trust: testTrust(join(dir, 'pki')) })).clean, true, 'clean again');
  });

  it('the audit accepts the groups, and names one whose hash is not that of its leaves', async () => {
    const clean = await auditJournal(store, { trust: testTrust(join(dir, 'pki')) });
    assert.equal(clean.clean, true, JSON.stringify(clean.findings));
    const last = (await store.journal.lastBatch())!;
    const grouped = (await store.journal.batches(1, 100)).find((b) => b.groups?.length)!;
    const returnedSeq = grouped.groups![0]!.returnedSeq;
    const forged = Buffer.alloc(48); // the same hash, said to be of a later entry
    forged.writeBigUInt64BE(BigInt(returnedSeq + 1), 0);
    forged.writeBigUInt64BE(BigInt(returnedSeq), 8);
    grouped.groups![0]!.hash.copy(forged, 16);
    const db = new Database(sqlitePath(dataDir));
    try {
      db.prepare('UPDATE journal_batches SET groups = ? WHERE batch_no = ?').run(forged, grouped.batchNo);
    } finally {
      db.close();
    }
    const report = await auditJournal(store, { trust: testTrust(join(dir, 'pki')) });
    assert.ok(last.batchNo >= grouped.batchNo);
    assert.deepEqual(
      report.findings.map((f) => ('detail' in f ? f.detail : f.kind)),
      [`its data group of entries ${returnedSeq + 1} and ${returnedSeq} is not the hash of their leaves`],
    );
  });
});
