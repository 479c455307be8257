/**
 * A second, independent TSA per batch (journal.secondTsaUrl): another operator's RFC 3161 TSA on loopback
 * (`openssl ts -reply` with its own root, test/helpers/openssl-tsa.ts) time-stamps each batch's root besides ours.
 * Each entry then has a record per TSA, each validated by BouncyCastle and refusing a changed byte; the audit
 * checks both tokens and the second one's chain; a second TSA that fails leaves the batch unsealed, not sealed
 * with one token.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { loadCaMaterial } from '../../src/ca/material.ts';
import { loadConfig } from '../../src/config/load.ts';
import { auditJournal } from '../../src/journal/audit.ts';
import { groupRecordsOf, recordFileNames, recordsOf } from '../../src/journal/records.ts';
import { sealJournal } from '../../src/journal/seal.ts';
import { exportEvidence } from '../../src/retention/export.ts';
import { openSqliteStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/types.ts';
import { type LocalTsa, RemoteTsa } from '../../src/timestamping/tsa.ts';
import { startEnvironment } from '../helpers/environment.ts';
import { bouncyCastleVerdict, returnSignature, rootFileOf, testTrust, testTsa } from '../helpers/journal.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';
import { run, tsVerifyArgs } from '../helpers/openssl.ts';
import { type OpensslTsa, startOpensslTsa } from '../helpers/openssl-tsa.ts';
import { signing } from '../store/store-contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'qtsp-journal-tsa2-'));
const storeFile = join(dir, 'store', 'qtsp.sqlite');
let tsa: LocalTsa;
let other: OpensslTsa;
let second: RemoteTsa;
let store: Store;
/** the signing whose records the tests follow */
const followed = signing('txn-two-tsas');

before(async () => {
  tsa = testTsa(join(dir, 'pki'));
  other = await startOpensslTsa(join(dir, 'other-tsa'));
  second = new RemoteTsa({ url: other.url, timeoutMs: 30_000, retries: 0, chain: other.chain });
  store = await openSqliteStore(storeFile);
});
after(async () => {
  await store.close();
  await other.close();
  rmSync(dir, { recursive: true, force: true });
});

const file = (name: string, bytes: Buffer) => {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
};

/** BouncyCastle's verdict on `record` over `data` against `root`, and over `data` with one byte changed */
async function verdicts(name: string, record: Buffer, data: Buffer, root: string): Promise<void> {
  const good = await bouncyCastleVerdict(file(`${name}.ers`, record), file(`${name}.json`, data), { root });
  assert.ok(good.valid, `${name}: ${good.output}`);
  const changed = Buffer.from(data);
  changed[20] = changed[20]! ^ 0x01;
  const bad = await bouncyCastleVerdict(file(`${name}.ers`, record), file(`${name}-changed.json`, changed), { root });
  assert.equal(bad.valid, false, `${name} with a changed byte: ${bad.output}`);
}

describe('a second TSA of another operator per batch', () => {
  it('wants the chain of that TSA with its URL', () => {
    assert.throws(
      () => loadConfig({ dataDir: dir, journal: { secondTsaUrl: other.url } }, {}),
      /QTSP_JOURNAL_SECOND_TSA_CHAIN_FILE/,
    );
    const config = loadConfig(
      { dataDir: dir, journal: { secondTsaUrl: other.url, secondTsaChainFile: other.chainFile } },
      {},
    );
    assert.equal(config.journal.secondTsaUrl, other.url);
  });

  it('time-stamps the root by both; a record per TSA passes BouncyCastle; the audit checks both', async () => {
    const input = followed;
    await store.recordSigning(input);
    await store.recordSigning(signing('txn-two-tsas-other'));
    await returnSignature(store, input);
    const [batch] = await sealJournal(store, { tsa, second });
    assert.ok(batch?.secondToken, 'the batch carries the second token');
    const stored = (await store.journal.lastBatch())!;
    assert.deepEqual(stored.secondToken, batch.secondToken, 'stored with the batch');

    // openssl, with each operator's own root: the second token is not ours and is over the same root
    const token = file('second.tst', stored.secondToken!);
    const ourRoot = join(dir, 'pki', 'pki', 'root-ca.pem');
    const digestHex = stored.root.toString('hex');
    const byOther = await run('openssl', tsVerifyArgs(token, { digestHex }, other.rootFile));
    assert.ok(byOther.ok, byOther.output);
    const byOurs = await run('openssl', tsVerifyArgs(token, { digestHex }, ourRoot));
    assert.equal(byOurs.ok, false, 'the second TSA does not chain to our root');

    const [entry] = await recordsOf(store, input.certificate.serialHex);
    assert.ok(entry?.record && entry.secondRecord, 'a record per TSA');
    await verdicts('ours', entry.record, entry.entry.body, rootFileOf(join(dir, 'pki')));
    await verdicts('second', entry.secondRecord, entry.entry.body, other.rootFile);
    const elsewhere = await bouncyCastleVerdict(
      file('second.ers', entry.secondRecord),
      file('second.json', entry.entry.body),
      {
        root: rootFileOf(join(dir, 'pki')),
      },
    );
    assert.equal(elsewhere.valid, false, `the second record against our root: ${elsewhere.output}`);
    // the signing's two entries as one data group, under the second token too
    const [group] = await groupRecordsOf(store, input.certificate.serialHex);
    assert.ok(group?.secondRecord, 'a group record under the second token');
    const objects = [file('group-a.json', group.authorized.body), file('group-r.json', group.returned.body)];
    const grouped = await bouncyCastleVerdict(file('group.tsa2.ers', group.secondRecord), objects, {
      root: other.rootFile,
    });
    assert.ok(grouped.valid, grouped.output);

    const clean = await auditJournal(store, { trust: { ...testTrust(join(dir, 'pki')), second: other.chain } });
    assert.equal(clean.clean, true, JSON.stringify(clean.findings));
    assert.equal(clean.secondTimeStamps, 1);
    const wrongAnchor = await auditJournal(store, {
      trust: { ...testTrust(join(dir, 'pki')), second: [loadCaMaterial(join(dir, 'pki')).root.der] },
    });
    assert.match(JSON.stringify(wrongAnchor.findings), /does not chain to that TSA's configured chain/);
  });

  it('a second TSA that fails leaves the entries unsealed and says so; the next seal takes them', async () => {
    const before = (await store.journal.lastBatch())!;
    await store.recordSigning(signing('txn-second-down'));
    other.refuse(1);
    await assert.rejects(sealJournal(store, { tsa, second }), /the second TSA: .*HTTP 503/);
    assert.equal((await store.journal.lastBatch())!.batchNo, before.batchNo, 'no batch with one token');
    const [sealed] = await sealJournal(store, { tsa, second });
    assert.equal(sealed?.batchNo, before.batchNo + 1);
    assert.equal(sealed.firstSeq, before.throughSeq + 1, 'the waiting entries are in the next batch');
    assert.ok(sealed.secondToken);
  });

  it('the audit names a second token that is not over its root', async () => {
    const last = (await store.journal.lastBatch())!;
    const first = (await store.journal.batches(1, 1))[0]!;
    const db = new Database(storeFile);
    try {
      db.prepare('UPDATE journal_batches SET second_token = ? WHERE batch_no = ?').run(first.secondToken, last.batchNo);
    } finally {
      db.close();
    }
    const report = await auditJournal(store, { trust: { ...testTrust(join(dir, 'pki')), second: other.chain } });
    assert.deepEqual(
      report.findings.map((f) => [f.kind, 'batch' in f ? f.batch : null, 'detail' in f ? f.detail : null]),
      [['chain', last.batchNo, 'second time-stamp: the time-stamp covers another hash than the root']],
    );
  });

  it('the service seals with both TSAs; qtsp evidence audit checks both against the configured chain', async () => {
    const env = await startEnvironment({
      // no timer: the service seals when asked (QtspService.sealJournal, as the bench asks it)
      journal: { secondTsaUrl: other.url, secondTsaChainFile: other.chainFile, sealIntervalSeconds: 0 },
    });
    try {
      const journal = env.qtsp.deps.store.journal;
      assert.equal(await journal.lastBatch(), undefined, 'nothing sealed before it is asked');
      await env.qtsp.sealJournal();
      const batch = await journal.lastBatch();
      assert.ok(batch?.secondToken, 'the service sealed a batch with the second token');
      const env2 = { QTSP_JOURNAL_SECOND_TSA_CHAIN_FILE: other.chainFile };
      const audit = await qtsp(['evidence', 'audit', '--data-dir', env.dataDir], env2);
      assert.equal(audit.code, 0, audit.output);
      assert.match(audit.stdout, /\((\d+) also time-stamped by the second TSA\)/);
      assert.doesNotMatch(audit.stdout, /\(0 also time-stamped/);
    } finally {
      await env.close();
    }
  });

  it('the export carries the second token and the records of both TSAs', async () => {
    const out = join(dir, 'export');
    await exportEvidence(store, {
      from: new Date(Date.now() - 3_600_000),
      to: new Date(Date.now() + 60_000),
      out,
      tsa,
      caCertificates: [{ name: 'root', der: loadCaMaterial(join(dir, 'pki')).root.der }],
      qtspId: 'qtsp-journal-test',
    });
    const [entry] = await store.journal.entriesOf(followed.certificate.serialHex);
    const names = recordFileNames(entry!);
    const signingDir = join(out, 'signings');
    const found = (await run('find', [signingDir, '-name', names.secondRecord])).output.trim();
    assert.ok(found && existsSync(found), `${names.secondRecord} in the archive`);
    assert.ok(existsSync(join(out, 'journal', 'batch-1.tsa2.tst')));
  });
});
