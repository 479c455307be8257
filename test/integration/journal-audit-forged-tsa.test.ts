/**
 * The journal audit trusts only what the operator trusts (journal/token-trust.ts), against an attacker with
 * write access to the store and no key of the service, on SQLite and on PostgreSQL, through `qtsp evidence
 * audit` as a process:
 *
 * - a consented digest changed, its entry rewritten and batches 3 to 9 sealed again, row by row in SQL, with
 *   time-stamps of a TSA the attacker made (`openssl req`/`x509`, EKU critical timeStamping, `openssl ts
 *   -reply`): the audit names every re-sealed batch, its token neither chaining to our root nor naming a TSA
 *   certificate of ours; `qtsp evidence record` of that store then writes a record BouncyCastle accepts
 *   against the attacker's root and refuses against ours;
 * - a changed byte in the TSA certificate a token carries (its signature still verifies with the key);
 * - an entry inserted with a time before the batch ahead of it was sealed, hidden by moving that batch's
 *   sealed_at back: judged by the token's genTime, and the moved column named.
 *
 * In process (SQLite): an earlier TSA certificate, replaced in pki/ by a renewal, is ours through the store's
 * record of it; a token after its key usage period, or after its certificate was revoked, is named.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID, X509Certificate } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { caKeyId } from '../../src/ca/certificate-list.ts';
import { SHA256 } from '../../src/crypto/algorithms.ts';
import { auditJournal } from '../../src/journal/audit.ts';
import { treeRoot } from '../../src/journal/hash-tree.ts';
import { batchLeaves, sealJournal } from '../../src/journal/seal.ts';
import { encodeEntry, encodeLeaves } from '../../src/store/journal.ts';
import { openPostgresStore, openSqliteStore, sqlitePath } from '../../src/store/open.ts';
import type { IssuedCertificate, JournalBatch, Store } from '../../src/store/types.ts';
import { genTimeOf, type LocalTsa, RemoteTsa } from '../../src/timestamping/tsa.ts';
import { partsOf } from '../../src/util/der.ts';
import { bouncyCastleVerdict, renewedTsa, rootFileOf, testTsa } from '../helpers/journal.ts';
import { type OpensslTsa, startOpensslTsa } from '../helpers/openssl-tsa.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';
import { signing } from '../store/store-contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'qtsp-audit-forged-'));
let postgres: PostgresServer | undefined;
/** the attacker's TSA: a root and a TSA certificate of its own, EKU critical timeStamping */
let forger: OpensslTsa;
let forged: RemoteTsa;
before(async () => {
  postgres = await startPostgres();
  forger = await startOpensslTsa(join(dir, 'forger'));
  forged = new RemoteTsa({ url: forger.url, timeoutMs: 30_000, retries: 0, chain: forger.chain });
});
after(async () => {
  await forger?.close();
  await postgres?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** what someone with write access to the database can do: SQL with `?` placeholders */
interface Raw {
  run(sql: string, ...params: unknown[]): Promise<void>;
  one(sql: string, ...params: unknown[]): Promise<Record<string, unknown>>;
  /** a time as the database keeps it */
  time(date: Date): unknown;
  close(): Promise<void>;
}

/** A data directory with fresh CA material, its store, SQL on that store, and the CLI's environment for it. */
interface Opened {
  readonly dataDir: string;
  readonly store: Store;
  readonly raw: Raw;
  readonly env: NodeJS.ProcessEnv;
  /** our TSA over that material */
  readonly tsa: LocalTsa;
}

interface Dialect {
  open(): Promise<Opened>;
}

const sqlite: Dialect = {
  async open() {
    const dataDir = join(dir, randomUUID());
    const tsa = testTsa(dataDir); // the key ceremony's material in dataDir/pki
    const store = await openSqliteStore(sqlitePath(dataDir));
    const db = new Database(sqlitePath(dataDir));
    const raw: Raw = {
      run: async (sql, ...params) => void db.prepare(sql).run(...params),
      one: async (sql, ...params) => db.prepare(sql).get(...params) as Record<string, unknown>,
      time: (date) => date.getTime(),
      close: async () => void db.close(),
    };
    return { dataDir, store, raw, env: {}, tsa };
  },
};

const numbered = (sql: string) => {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
};

const postgresql: Dialect = {
  async open() {
    const dataDir = join(dir, randomUUID());
    const tsa = testTsa(dataDir);
    const url = await postgres!.freshSchemaUrl();
    const store = await openPostgresStore({ url });
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const raw: Raw = {
      run: async (sql, ...params) => void (await client.query(numbered(sql), params)),
      one: async (sql, ...params) => (await client.query(numbered(sql), params)).rows[0],
      time: (date) => date,
      close: () => client.end(),
    };
    return { dataDir, store, raw, env: { QTSP_STORE_DRIVER: 'postgres', QTSP_STORE_URL: url }, tsa };
  },
};

/** `count` signings, each sealed into a batch of its own by our TSA: entry n is the signing.authorized of txn n */
async function sealedSignings(o: Opened, count: number): Promise<void> {
  for (let i = 1; i <= count; i++) {
    await o.store.recordSigning(signing(`txn-${i}`));
    await sealJournal(o.store, o.tsa);
  }
}

const audit = (o: Opened) => qtsp(['evidence', 'audit', '--data-dir', o.dataDir], o.env);

/** One consented digest of txn `n` changed in its evidence row and in its journal entry (seq n). */
async function changeDigest(o: Opened, n: number): Promise<void> {
  const row = await o.raw.one('SELECT hashes FROM signing_transactions WHERE txn = ?', `txn-${n}`);
  const hashes = JSON.parse(String(row.hashes)) as string[];
  const forgedDigest = randomBytes(32).toString('base64');
  await o.raw.run(
    'UPDATE signing_transactions SET hashes = ? WHERE txn = ?',
    JSON.stringify([forgedDigest, hashes[1]]),
    `txn-${n}`,
  );
  const entry = await o.raw.one('SELECT body FROM journal_entries WHERE seq = ?', n);
  const body = String(entry.body).replace(hashes[0]!, forgedDigest);
  assert.notEqual(body, String(entry.body), 'the entry holds the digest');
  const leafHash = createHash('sha256').update(body, 'utf8').digest('hex');
  await o.raw.run('UPDATE journal_entries SET body = ?, leaf_hash = ? WHERE seq = ?', body, leafHash, n);
}

/** Batches `from` to the last sealed again over the entries as they are now, with the attacker's TSA. */
async function resealWithForgedTsa(o: Opened, from: number): Promise<number[]> {
  const batches = await o.store.journal.batches(1, 100);
  let prevRoot = batches[from - 2]?.root ?? null;
  const resealed: number[] = [];
  for (const b of batches.filter((x: JournalBatch) => x.batchNo >= from)) {
    const entries = await o.store.journal.entries(b.firstSeq - 1, b.throughSeq);
    const leaves = entries.map((e) => ({ seq: e.seq, hash: createHash('sha256').update(e.body).digest() }));
    const root = treeRoot((x) => createHash('sha256').update(x).digest(), batchLeaves(prevRoot, leaves));
    const token = await forged.timestamp(root, SHA256);
    await o.raw.run(
      'UPDATE journal_batches SET prev_root = ?, root = ?, leaves = ?, token = ?, sealed_at = ? WHERE batch_no = ?',
      prevRoot,
      root,
      encodeLeaves(leaves),
      token,
      o.raw.time(genTimeOf(token)),
      b.batchNo,
    );
    prevRoot = root;
    resealed.push(b.batchNo);
  }
  return resealed;
}

/** the findings of an audit's output about batch `n` */
const aboutBatch = (stdout: string, n: number) => stdout.split('\n').filter((l) => l.startsWith(`batch ${n}: `));

function registerForgedTsa(name: string, dialect: Dialect): void {
  describe(`journal audit against a forged TSA: ${name}`, () => {
    it('names every batch re-sealed with a self-made TSA; BouncyCastle refuses its record against our root', async () => {
      const o = await dialect.open();
      try {
        await sealedSignings(o, 9);
        const clean = await audit(o);
        assert.equal(clean.code, 0, clean.output);
        assert.match(clean.stdout, /9 batch\(es\).*: clean/);
        // judged against another root (--root), our own tokens are not trusted
        const elsewhere = await qtsp(['evidence', 'audit', '--data-dir', o.dataDir, '--root', forger.rootFile], o.env);
        assert.equal(elsewhere.code, 1, elsewhere.output);
        assert.equal(aboutBatch(elsewhere.stdout, 1).length > 0 && aboutBatch(elsewhere.stdout, 9).length > 0, true);

        await changeDigest(o, 3);
        const resealed = await resealWithForgedTsa(o, 3);
        assert.deepEqual(resealed, [3, 4, 5, 6, 7, 8, 9]);
        const report = await audit(o);
        assert.equal(report.code, 1, report.output);
        for (const n of resealed) {
          const lines = aboutBatch(report.stdout, n).join('\n');
          assert.match(
            lines,
            /the time-stamp is not ours: its TSA certificate \(.*Other Operator TSA.*\) does not chain to our root/,
          );
          assert.match(lines, /the time-stamp is not ours: it names no TSA certificate of ours/);
        }
        assert.deepEqual([...aboutBatch(report.stdout, 1), ...aboutBatch(report.stdout, 2)], [], report.stdout);

        // the record of the rewritten entry: well formed under the attacker's root, refused under ours
        const out = join(dir, `records-${randomUUID()}`);
        const written = await qtsp(['evidence', 'record', 'txn-3', '--out', out, '--data-dir', o.dataDir], o.env);
        assert.equal(written.code, 0, written.output);
        const signingDir = join(out, readdirSync(out).find((f) => f !== 'tsa-chain.pem')!);
        const record = join(signingDir, 'journal-3-signing.authorized.ers');
        const data = join(signingDir, 'journal-3-signing.authorized.json');
        const chain = join(out, 'tsa-chain.pem');
        const byForger = await bouncyCastleVerdict(record, data, { root: forger.rootFile });
        assert.ok(byForger.valid, `the forged record is well formed: ${byForger.output}`);
        const byOurs = await bouncyCastleVerdict(record, data, { root: rootFileOf(o.dataDir), chain });
        assert.equal(byOurs.valid, false, byOurs.output);
        assert.match(byOurs.output, /does not chain to the root/);
      } finally {
        await o.raw.close();
        await o.store.close();
      }
    });

    it('names a changed byte in the TSA certificate a token carries', async () => {
      const o = await dialect.open();
      try {
        await sealedSignings(o, 2);
        const first = (await o.store.journal.batches(1, 1))[0]!;
        const tsaDer = o.tsa.chain[0]!;
        const at = first.token.indexOf(tsaDer);
        assert.ok(at > 0, 'the token carries our TSA certificate');
        // a letter of its subject's common name: the key, and so the token's signature, unchanged
        const name = first.token.indexOf(Buffer.from('Time-Stamping Unit'), at);
        assert.ok(name > at && name < at + tsaDer.length);
        const token = Buffer.from(first.token);
        token[name] = token[name]! ^ 0x20;
        await o.raw.run('UPDATE journal_batches SET token = ? WHERE batch_no = ?', token, 1);
        const report = await audit(o);
        assert.equal(report.code, 1, report.output);
        assert.match(aboutBatch(report.stdout, 1).join('\n'), /certificate/);
        assert.deepEqual(aboutBatch(report.stdout, 2), [], report.stdout);
      } finally {
        await o.raw.close();
        await o.store.close();
      }
    });

    it('judges a backdated entry by the genTime, not by a sealed_at moved back to hide it', async () => {
      const o = await dialect.open();
      try {
        await sealedSignings(o, 1);
        const first = (await o.store.journal.batches(1, 1))[0]!;
        const sealed = genTimeOf(first.token);
        const hourBefore = new Date(sealed.getTime() - 3_600_000);
        const entry = encodeEntry({
          kind: 'certificate.revoked',
          ref: 'ab',
          at: hourBefore,
          data: { serialHex: 'ab' },
        });
        await o.raw.run(
          'INSERT INTO journal_entries (kind, ref, recorded_at, body, leaf_hash) VALUES (?, ?, ?, ?, ?)',
          'certificate.revoked',
          'ab',
          o.raw.time(hourBefore),
          entry.body,
          entry.leafHash,
        );
        await sealJournal(o.store, o.tsa); // the service seals it with the next batch
        const moved = new Date(sealed.getTime() - 2 * 3_600_000);
        await o.raw.run('UPDATE journal_batches SET sealed_at = ? WHERE batch_no = ?', o.raw.time(moved), 1);
        const report = await audit(o);
        assert.equal(report.code, 1, report.output);
        assert.match(
          report.stdout,
          /entry 2 \(batch 2\): inserted: recorded at .* before the batch ahead of it was sealed/,
        );
        assert.match(aboutBatch(report.stdout, 1).join('\n'), /its sealed_at .* is not its time-stamp's genTime/);
      } finally {
        await o.raw.close();
        await o.store.close();
      }
    });
  });
}

registerForgedTsa('SQLite', sqlite);
registerForgedTsa('PostgreSQL', postgresql);

/** the store's record of a certificate our root issued, as the service registers its TSA certificate */
function rootIssued(der: Buffer, root: Buffer): IssuedCertificate {
  const x = new X509Certificate(der);
  return {
    serialHex: partsOf(der).serialHex,
    issuerKeyId: caKeyId(root).toString('hex'),
    subject: x.subject.split('\n').join(', '),
    notBefore: new Date(x.validFrom),
    notAfter: new Date(x.validTo),
    issuedAt: new Date(),
    txn: null,
    der,
  };
}

describe('journal audit: our TSA certificates across renewals, their key usage and revocation', () => {
  it('knows an earlier generation through the store; names a token after its key usage period or revocation', async () => {
    const o = await sqlite.open();
    try {
      await sealedSignings(o, 1);
      const older = o.tsa.chain[0]!;
      const root = o.tsa.chain[1]!;
      const newer = renewedTsa(o.dataDir); // a ceremony renewed the TSA: pki/tsa.pem is the newer one now
      await o.store.recordSigning(signing('txn-after-renewal'));
      await sealJournal(o.store, newer);
      const afterRenewal = { ours: { root, certificates: [newer.chain[0]!], keyUsageDays: 365 } };
      const unknown = await auditJournal(o.store, { trust: afterRenewal });
      assert.deepEqual(
        unknown.findings.map((f) => [f.kind, 'batch' in f ? f.batch : null, 'detail' in f ? f.detail : '']),
        [['chain', 1, 'the time-stamp is not ours: it names no TSA certificate of ours']],
      );
      // the service registered the older certificate in the store when it used it
      await o.store.addCertificate(rootIssued(older, root));
      assert.deepEqual((await auditJournal(o.store, { trust: afterRenewal })).findings, []);

      const expired = await auditJournal(o.store, { trust: { ours: { ...afterRenewal.ours, keyUsageDays: 0 } } });
      assert.equal(expired.findings.length, 2, JSON.stringify(expired.findings));
      assert.match(JSON.stringify(expired.findings), /after its TSA key's usage period/);

      // revoked a second before batch 1's genTime (its journal entry then still within the audit's tolerance)
      const first = (await o.store.journal.batches(1, 1))[0]!;
      const revokedAt = new Date(genTimeOf(first.token).getTime() - 1000);
      await o.store.revokeCertificate(partsOf(older).serialHex, 'keyCompromise', revokedAt);
      const revoked = await auditJournal(o.store, { trust: afterRenewal });
      assert.deepEqual(
        revoked.findings.map((f) => ('batch' in f ? f.batch : null)),
        [1],
      );
      assert.match(JSON.stringify(revoked.findings), /its TSA certificate was revoked at .*, before its genTime/);
    } finally {
      await o.raw.close();
      await o.store.close();
    }
  });
});
