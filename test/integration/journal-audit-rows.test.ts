/**
 * `qtsp evidence audit` against a database administrator who rewrites the rows the service hands out, with no
 * key of the service (journal/audit-rows.ts): a revocation set back to good, a revocation made behind the
 * service's back, a kept signature or its revocationInfo changed, a signature forged onto a claim, a signing's
 * rows deleted while its entries stay, signing rows forged without entries, entries forged with seq 0 and -7
 * (which `qtsp evidence record` must not package), a renewal row deleted; and variants caught before (digests,
 * certificate, a batch deleted, a forged tombstone). Each on SQLite and PostgreSQL: the store is clean first,
 * then the audit names what changed. `qtsp evidence audit` as a process exits 1 naming it; a store of release 0.1
 * audits clean, its rows from before the journal counted.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { pkiPaths } from '../../src/ca/material.ts';
import { auditJournal, describeFinding } from '../../src/journal/audit.ts';
import { recordsOf } from '../../src/journal/records.ts';
import { renewTimeStamps } from '../../src/journal/renewal.ts';
import { sealJournal } from '../../src/journal/seal.ts';
import { encodeEntry } from '../../src/store/journal.ts';
import { openSqliteStore } from '../../src/store/open.ts';
import type { RecordSigningInput, Store } from '../../src/store/types.ts';
import type { LocalTsa } from '../../src/timestamping/tsa.ts';
import { testTrust, testTsa } from '../helpers/journal.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';
import { postgresDialect, sqliteDialect, type Raw, type TamperDialect } from '../helpers/tamper.ts';
import { claimFor, signing } from '../store/store-contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'qtsp-journal-audit-rows-'));
let tsa: LocalTsa;
let postgres: PostgresServer | undefined;
before(async () => {
  tsa = testTsa(join(dir, 'pki'));
  postgres = await startPostgres();
});
after(async () => {
  await postgres?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** what the store holds before the tampering */
interface Scene {
  /** a signing with one signature kept (with revocationInfo) and one document claimed, not signed */
  readonly kept: RecordSigningInput;
  /** a signing whose certificate was revoked through the service */
  readonly revoked: RecordSigningInput;
  /** a signing left alone, its certificate good */
  readonly good: RecordSigningInput;
}

const REVOCATION = { ocsp: [Buffer.from('an OCSP response').toString('base64')], crl: [] };

/** signDoc's step 10 for the first document, with revocationInfo; the second document stays a claim */
async function keepOne(store: Store, input: RecordSigningInput): Promise<void> {
  const [first, second] = input.transaction.hashes as [string, string];
  const claim = claimFor(input, [first]);
  assert.equal((await store.claimDocuments(claim, new Date(0))).kind, 'claimed');
  const signature = { hash: first, signature: Buffer.from('a signature').toString('base64'), revocation: REVOCATION };
  await store.keepSignatures({
    claim,
    signatures: [signature],
    evidenceSerialHex: input.certificate.serialHex,
    outbox: [],
  });
  assert.equal((await store.claimDocuments(claimFor(input, [second]), new Date(0))).kind, 'claimed');
}

/** three signings sealed in two batches, a revocation, a forced time-stamp renewal journaled and sealed */
async function populate(store: Store): Promise<Scene> {
  const scene = { kept: signing(), revoked: signing(), good: signing() };
  await store.recordSigning(scene.kept);
  await keepOne(store, scene.kept);
  await sealJournal(store, tsa);
  await store.recordSigning(scene.revoked);
  await store.recordSigning(scene.good);
  assert.equal(await store.revokeCertificate(scene.revoked.certificate.serialHex, 'keyCompromise', new Date()), true);
  await sealJournal(store, tsa);
  assert.equal((await renewTimeStamps(store, tsa, { marginMs: 0, force: true })).length, 1);
  await sealJournal(store, tsa);
  return scene;
}

interface Variant {
  readonly name: string;
  tamper(raw: Raw, scene: Scene, store: Store): Promise<void>;
  /** each must match a line of the audit's findings (describeFinding) */
  expect(scene: Scene): RegExp[];
}

const serial = (input: RecordSigningInput) => input.certificate.serialHex;
const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
const forgedAt = () => new Date(Date.now() - 60_000);

/** a copy of the good signing's certificate and transaction under serial ab12, written by SQL */
async function forgeSigning(raw: Raw, scene: Scene): Promise<void> {
  const certificateColumns = 'issuer_key_id, subject, not_before, not_after, issued_at, txn, der, status';
  await raw.run(
    `INSERT INTO certificates (serial_hex, ${certificateColumns}) SELECT 'ab12', ${certificateColumns} FROM certificates WHERE serial_hex = ?`,
    serial(scene.good),
  );
  const columns =
    'txn, iss, sub, client_id, client_state, introspection_jwt, hash_algorithm_oid, hashes, hash_count, ' +
    'signature_format, conformance_level, created_at';
  await raw.run(
    `INSERT INTO signing_transactions (certificate_serial_hex, ${columns}) SELECT 'ab12', ${columns} FROM signing_transactions WHERE certificate_serial_hex = ?`,
    serial(scene.good),
  );
}

/** entries with seq 0 and -7: copies of the kept signing's signing.authorized entry */
async function forgeOutsideEntries(raw: Raw, scene: Scene): Promise<void> {
  const [row] = await raw.all(
    "SELECT body, recorded_at FROM journal_entries WHERE kind = 'signing.authorized' AND ref = ?",
    serial(scene.kept),
  );
  const forged = encodeEntry({
    kind: 'signing.authorized',
    ref: serial(scene.kept),
    at: new Date(),
    data: { forged: true },
  });
  for (const seq of [0, -7])
    await raw.run(
      `INSERT INTO journal_entries (seq, kind, ref, recorded_at, body, leaf_hash) ${raw.overriding} VALUES (?, ?, ?, ?, ?, ?)`,
      seq,
      'signing.authorized',
      serial(scene.kept),
      row!.recorded_at,
      seq === 0 ? forged.body : row!.body,
      forged.leafHash,
    );
}

const variants: Variant[] = [
  {
    name: 'a revocation set back to good',
    tamper: (raw, s) =>
      raw.run(
        "UPDATE certificates SET status = 'good', revoked_at = NULL, revocation_reason = NULL WHERE serial_hex = ?",
        serial(s.revoked),
      ),
    expect: (s) => [
      new RegExp(`^certificates ${serial(s.revoked)}: status good, but entry \\d+ journaled its revocation`),
    ],
  },
  {
    name: "a certificate revoked behind the service's back",
    tamper: (raw, s) =>
      raw.run(
        "UPDATE certificates SET status = 'revoked', revoked_at = ?, revocation_reason = 'keyCompromise' WHERE serial_hex = ?",
        raw.time(forgedAt()),
        serial(s.good),
      ),
    expect: (s) => [new RegExp(`^certificates ${serial(s.good)}: revoked .* with no certificate.revoked entry`)],
  },
  {
    name: "a revocation's reason changed",
    tamper: (raw, s) =>
      raw.run(
        "UPDATE certificates SET revocation_reason = 'affiliationChanged' WHERE serial_hex = ?",
        serial(s.revoked),
      ),
    expect: (s) => [
      new RegExp(`^certificates ${serial(s.revoked)}: revoked .* entry \\d+ journaled another revocation`),
    ],
  },
  {
    name: 'a kept signature changed',
    tamper: (raw) =>
      raw.run(
        'UPDATE signed_documents SET signature = ? WHERE signature IS NOT NULL',
        Buffer.from('forged').toString('base64'),
      ),
    expect: (s) => [
      new RegExp(`^signed_documents ${literal(s.kept.transaction.txn)} .*differs from entry \\d+: signature$`),
    ],
  },
  {
    name: "a kept signature's revocationInfo changed",
    tamper: (raw) =>
      raw.run(
        'UPDATE signed_documents SET revocation = ? WHERE signature IS NOT NULL',
        JSON.stringify({ ocsp: [Buffer.from('another response').toString('base64')], crl: [] }),
      ),
    expect: () => [/^signed_documents .*differs from entry \d+: revocationInfo$/],
  },
  {
    name: 'a signature forged onto a claimed document',
    tamper: (raw) =>
      raw.run(
        'UPDATE signed_documents SET signature = ?, signed_at = ? WHERE signature IS NULL',
        Buffer.from('forged').toString('base64'),
        raw.time(new Date()),
      ),
    expect: () => [/^signed_documents .*: a kept signature with no signing.returned entry$/],
  },
  {
    name: "a signing's evidence rows deleted while its entries stay",
    async tamper(raw, s) {
      await raw.run('DELETE FROM signed_documents WHERE txn = ?', s.kept.transaction.txn);
      await raw.run('DELETE FROM signing_transactions WHERE certificate_serial_hex = ?', serial(s.kept));
      await raw.run('DELETE FROM certificates WHERE serial_hex = ?', serial(s.kept));
    },
    expect: (s) => [
      new RegExp(`^signing_transactions ${serial(s.kept)}: deleted: the signing's entry \\d+ stays`),
      new RegExp(`^certificates ${serial(s.kept)}: deleted: the signing's entry \\d+ stays`),
      new RegExp(
        `^signed_documents ${literal(s.kept.transaction.txn)} .*: deleted: entry \\d+ returned this signature`,
      ),
    ],
  },
  {
    name: 'a signing forged without entries',
    tamper: forgeSigning,
    expect: () => [
      /^signing_transactions ab12: a signing with no signing.authorized entry/,
      /^certificates ab12: a signing with no signing.authorized entry/,
    ],
  },
  {
    name: 'entries forged with seq 0 and -7',
    async tamper(raw, s, store) {
      await forgeOutsideEntries(raw, s);
      // `qtsp evidence record` packages no entry that no batch sealed
      const seqs = (await recordsOf(store, serial(s.kept))).map((r) => r.entry.seq);
      assert.ok(seqs.length === 2 && seqs.every((q) => q > 0), `records of seqs ${seqs.join(', ')}`);
    },
    expect: () => [/^entry 0 .*outside every batch's seq range/, /^entry -7 .*outside every batch's seq range/],
  },
  {
    name: 'a renewal row deleted',
    tamper: (raw) => raw.run('DELETE FROM journal_renewals WHERE renewal_no = 1'),
    expect: () => [/^renewal 1: gone, while entry \d+ journaled it$/],
  },
  // caught before these checks, tested here
  {
    name: "a signing's consented digests changed",
    tamper: (raw, s) =>
      raw.run(
        'UPDATE signing_transactions SET hashes = ? WHERE certificate_serial_hex = ?',
        JSON.stringify([Buffer.alloc(32).toString('base64')]),
        serial(s.good),
      ),
    expect: () => [/altered: the stored evidence of signing .* consented digests/],
  },
  {
    name: "a signing's certificate changed",
    tamper: (raw, s) =>
      raw.run('UPDATE certificates SET der = ? WHERE serial_hex = ?', Buffer.from('not a certificate'), serial(s.good)),
    expect: () => [/altered: the stored evidence of signing .*: certificate$/],
  },
  {
    name: 'the first batch deleted',
    tamper: (raw) => raw.run('DELETE FROM journal_batches WHERE batch_no = 1'),
    expect: () => [/^batch 2: chain broken: batch 1 is missing/, /^entry 1 .*outside every batch's seq range/],
  },
  {
    name: 'an entry deleted behind a forged tombstone',
    async tamper(raw) {
      await raw.run('DELETE FROM journal_entries WHERE seq = 1');
      await raw.run(
        "INSERT INTO journal_purged (seq, leaf_hash, purged_by) VALUES (1, ?, 'retention before 2020-01-01')",
        '00'.repeat(32),
      );
    },
    expect: () => [/^entry 1 \(batch 1\): deleted$/],
  },
];

/** the report's count of rows from before the journal (read structurally: the test also runs on older code) */
const rowsBeforeJournal = (report: object) => (report as { rowsBeforeJournal?: number }).rowsBeforeJournal ?? 0;

function assertNamed(lines: readonly string[], expected: readonly RegExp[]): void {
  for (const pattern of expected)
    assert.ok(
      lines.some((l) => pattern.test(l)),
      `no finding matches ${pattern}:\n${lines.join('\n')}`,
    );
}

function registerVariants(dialect: TamperDialect): void {
  describe(`journal audit of the rows: ${dialect.name}`, () => {
    for (const variant of variants)
      it(variant.name, async () => {
        const { store, raw } = await dialect.open();
        try {
          const scene = await populate(store);
          const clean = await auditJournal(store, { trust: testTrust(join(dir, 'pki')) });
          assert.deepEqual(clean.findings.map(describeFinding), []);
          await variant.tamper(raw, scene, store);
          const report = await auditJournal(store, { trust: testTrust(join(dir, 'pki')) });
          assert.equal(report.clean, false);
          assertNamed(report.findings.map(describeFinding), variant.expect(scene));
        } finally {
          await raw.close();
          await store.close();
        }
      });

    it('`qtsp evidence audit` exits 1 naming a revocation set back to good and a changed signature', async () => {
      const { store, raw, env, dataDir } = await dialect.open();
      let scene: Scene;
      try {
        scene = await populate(store);
      } finally {
        await store.close();
      }
      try {
        mkdirSync(dataDir, { recursive: true });
        // the data directory holds the CA material whose root and TSA the audit trusts, as a service's does
        cpSync(pkiPaths(join(dir, 'pki')).dir, pkiPaths(dataDir).dir, { recursive: true });
        const clean = await qtsp(['evidence', 'audit', '--data-dir', dataDir], env);
        assert.equal(clean.code, 0, clean.output);
        for (const variant of [variants[0]!, variants[3]!]) await variant.tamper(raw, scene, store);
        const run = await qtsp(['evidence', 'audit', '--data-dir', dataDir], env);
        assert.equal(run.code, 1, run.output);
        assertNamed(run.stdout.split('\n'), [...variants[0]!.expect(scene), ...variants[3]!.expect(scene)]);
        assert.match(run.stdout, /2 finding\(s\)/);
      } finally {
        await raw.close();
      }
    });
  });
}

registerVariants(sqliteDialect(dir));
registerVariants(postgresDialect(dir, () => postgres!));

describe('journal audit of a store made by release 0.1', () => {
  it('audits clean with its rows from before the journal counted, and names a row forged afterwards', async () => {
    const file = join(dir, 'release-0.1', 'qtsp.sqlite');
    mkdirSync(join(dir, 'release-0.1'));
    copyFileSync(new URL('../store/release-0.1/qtsp.sqlite', import.meta.url), file);
    const store = await openSqliteStore(file);
    try {
      await store.journal.append({ kind: 'service.started', ref: null, at: new Date(), data: {} });
      await store.recordSigning(signing());
      await sealJournal(store, tsa);
      const report = await auditJournal(store, { trust: testTrust(join(dir, 'pki')) });
      assert.deepEqual(report.findings.map(describeFinding), []);
      assert.ok(rowsBeforeJournal(report) > 0, 'the rows of release 0.1 are counted');
      const db = new Database(file);
      try {
        db.prepare(
          "UPDATE certificates SET status = 'revoked', revoked_at = ?, revocation_reason = 'keyCompromise' " +
            "WHERE status = 'good' AND txn IS NOT NULL AND serial_hex NOT IN (SELECT ref FROM journal_entries WHERE ref IS NOT NULL)",
        ).run(Date.now());
      } finally {
        db.close();
      }
      const tampered = await auditJournal(store, { trust: testTrust(join(dir, 'pki')) });
      assertNamed(tampered.findings.map(describeFinding), [
        /^certificates \w+: revoked .* with no certificate.revoked entry/,
      ]);
    } finally {
      await store.close();
    }
  });
});
