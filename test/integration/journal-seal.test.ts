/**
 * Sealing the journal and its RFC 4998 evidence records, checked by BouncyCastle (test/oracles/ErsChecker.java):
 * batches chain (each tree's first leaf is the previous root), every entry lands in exactly one batch, and the
 * record of any entry validates over its data object and fails for a changed byte of it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadCaMaterial } from '../../src/ca/material.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkToken } from '../../src/journal/audit.ts';
import { evidenceRecord } from '../../src/journal/evidence-record.ts';
import { recoverRoot, reducedHashtree, sha256, treeRoot } from '../../src/journal/hash-tree.ts';
import { batchLeaves, sealJournal } from '../../src/journal/seal.ts';
import { exportEvidence } from '../../src/retention/export.ts';
import { openSqliteStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/types.ts';
import type { LocalTsa } from '../../src/timestamping/tsa.ts';
import { bouncyCastleVerdict, rootFileOf, testTsa } from '../helpers/journal.ts';
import { signing } from '../store/store-contract.ts';
import { run } from '../helpers/openssl.ts';

const dir = mkdtempSync(join(tmpdir(), 'qtsp-journal-'));
let tsa: LocalTsa;
let store: Store;

before(async () => {
  tsa = testTsa(join(dir, 'pki'));
  store = await openSqliteStore(join(dir, 'store', 'qtsp.sqlite'));
});
after(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('RFC 4998 hash trees', () => {
  it('every leaf of trees of 1 to 9 leaves leads to the root', () => {
    for (let n = 1; n <= 9; n++) {
      const leaves = Array.from({ length: n }, (_, i) => sha256(Buffer.from(`leaf ${i}`)));
      const root = treeRoot(sha256, leaves);
      for (const [i, leaf] of leaves.entries())
        assert.deepEqual(recoverRoot(sha256, leaf, reducedHashtree(sha256, leaves, i)), root);
    }
  });
});

/** BouncyCastle's verdict on the record of entry `seq` over `body` */
async function verdict(seq: number, body: Buffer): Promise<{ valid: boolean; output: string }> {
  const batch = (await store.journal.batchOf(seq))!;
  const record = join(dir, `entry-${seq}.ers`);
  const data = join(dir, `entry-${seq}.json`);
  writeFileSync(record, evidenceRecord(batch, seq));
  writeFileSync(data, body);
  return bouncyCastleVerdict(record, data, { root: rootFileOf(join(dir, 'pki')) });
}

describe('sealing and evidence records', () => {
  it('batches chain, hold every entry once, and their records pass BouncyCastle', async () => {
    await store.recordSigning(signing('txn-alone'));
    const [first] = await sealJournal(store, tsa);
    assert.equal(first!.leaves.length, 1, 'a batch of one entry: the token covers its leaf hash');
    assert.equal(first!.prevRoot, null);
    for (let i = 0; i < 6; i++) await store.recordSigning(signing(`txn-${i}`));
    const [second] = await sealJournal(store, tsa);
    assert.deepEqual(await sealJournal(store, tsa), [], 'nothing new, nothing sealed');
    assert.deepEqual(second!.prevRoot, first!.root, 'the chain: batch 2 covers batch 1');
    assert.equal(second!.firstSeq, first!.throughSeq + 1);
    assert.deepEqual(second!.root, treeRoot(sha256, batchLeaves(first!.root, second!.leaves)));
    const entries = await store.journal.entries(0, second!.throughSeq);
    assert.deepEqual(
      entries.map((e) => e.seq),
      [...first!.leaves, ...second!.leaves].map((l) => l.seq),
      'each entry in exactly one batch',
    );
    for (const entry of [entries[0]!, entries[1]!, entries.at(-1)!]) {
      const good = await verdict(entry.seq, entry.body);
      assert.ok(good.valid, `entry ${entry.seq}: ${good.output}`);
    }
    assert.equal(checkToken(second!.token, second!.root), undefined, 'the audit accepts the real token');
    assert.match(checkToken(second!.token, first!.root)!, /another hash than the root/);
    const forged = Buffer.from(second!.token);
    forged[forged.length - 10] = forged[forged.length - 10]! ^ 0x01; // inside the signature value
    assert.match(checkToken(forged, second!.root) ?? 'accepted', /signature does not verify|does not parse/);
    for (const at of [0, 40, entries[3]!.body.length - 2]) {
      const changed = Buffer.from(entries[3]!.body);
      changed[at] = changed[at]! ^ 0x01;
      const bad = await verdict(entries[3]!.seq, changed);
      assert.equal(bad.valid, false, `byte ${at} changed: ${bad.output}`);
    }
  });
});

describe('the export carries the chain of batches', () => {
  it('journal/batches.json: the batches of the period and the one before, each token checked by openssl', async () => {
    const from = new Date();
    await store.recordSigning(signing('txn-export'));
    const [sealed] = await sealJournal(store, tsa);
    const out = join(dir, 'export');
    const root = loadCaMaterial(join(dir, 'pki')).root.der;
    await exportEvidence(store, {
      from: new Date(from.getTime() - 1000),
      to: new Date(Date.now() + 60_000),
      out,
      tsa,
      caCertificates: [{ name: 'root', der: root }],
      qtspId: 'qtsp-journal-test',
    });
    const { batches } = JSON.parse(readFileSync(join(out, 'journal', 'batches.json'), 'utf8')) as {
      batches: { batchNo: number; prevRoot: string | null; root: string; token: string }[];
    };
    assert.deepEqual(
      batches.map((b) => b.batchNo),
      [sealed!.batchNo - 1, sealed!.batchNo],
      'the batch before the period links this archive to the one before',
    );
    assert.equal(batches[1]!.prevRoot, batches[0]!.root);
    for (const b of batches) {
      const verified = await run('openssl', [
        ...['ts', '-verify', '-digest', b.root, '-token_in', '-in', join(out, 'journal', b.token)],
        ...['-CAfile', join(out, 'ca', 'root.pem')],
      ]);
      assert.ok(verified.ok, `batch ${b.batchNo}: ${verified.output}`);
    }
  });
});
