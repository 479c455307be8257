/**
 * `qtsp evidence audit` (journal/audit.ts) on SQLite and on PostgreSQL: an untouched store is clean; a stored
 * JWT altered, an entry altered, one deleted, two swapped and one inserted are each named with their batch;
 * entries purged by retention are reported as purged by policy. On PostgreSQL, two instances writing and
 * sealing at the same time leave one chain with every entry in exactly one batch.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { auditJournal, type Finding } from '../../src/journal/audit.ts';
import { sealJournal } from '../../src/journal/seal.ts';
import { encodeEntry } from '../../src/store/journal.ts';
import { openPostgresStore, openSqliteStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/types.ts';
import type { LocalTsa } from '../../src/timestamping/tsa.ts';
import { testTrust, testTsa } from '../helpers/journal.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { signing } from '../store/store-contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'qtsp-journal-audit-'));
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

/** what a database administrator can do behind the service's back: SQL with `?` placeholders */
interface Raw {
  run(sql: string, ...params: unknown[]): Promise<void>;
  body(seq: number): Promise<string>;
  /** the recorded_at value of a time, as the database keeps it */
  time(date: Date): unknown;
  close(): Promise<void>;
}

interface Dialect {
  open(): Promise<{ store: Store; raw: Raw; again(): Promise<Store> }>;
}

const sqlite: Dialect = {
  async open() {
    const file = join(dir, randomUUID(), 'qtsp.sqlite');
    const store = await openSqliteStore(file);
    const db = new Database(file);
    const raw: Raw = {
      run: async (sql, ...params) => void db.prepare(sql).run(...params),
      body: async (seq) =>
        (db.prepare('SELECT body FROM journal_entries WHERE seq = ?').get(seq) as { body: string }).body,
      time: (date) => date.getTime(),
      close: async () => {
        db.close();
      },
    };
    return { store, raw, again: () => openSqliteStore(file) };
  },
};

const postgresql: Dialect = {
  async open() {
    const url = await postgres!.freshSchemaUrl();
    const store = await openPostgresStore({ url });
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const numbered = (sql: string) => {
      let n = 0;
      return sql.replace(/\?/g, () => `$${++n}`);
    };
    const raw: Raw = {
      run: async (sql, ...params) => void (await client.query(numbered(sql), params)),
      body: async (seq) => (await client.query('SELECT body FROM journal_entries WHERE seq = $1', [seq])).rows[0].body,
      time: (date) => date,
      close: () => client.end(),
    };
    return { store, raw, again: () => openPostgresStore({ url }) };
  },
};

const named = (findings: readonly Finding[]) =>
  findings.map((f) => `${f.kind} ${'seq' in f ? f.seq : ''} ${'batch' in f ? f.batch : ''}`.trim()).sort();

function registerAudit(name: string, dialect: Dialect): void {
  describe(`journal audit: ${name}`, () => {
    it('names a stored JWT altered, an entry altered, deleted, swapped, inserted; clean before', async () => {
      const { store, raw } = await dialect.open();
      try {
        const inputs = Array.from({ length: 8 }, (_, i) => signing(`txn-audit-${i}`));
        for (const input of inputs.slice(0, 4)) await store.recordSigning(input);
        await sealJournal(store, tsa);
        for (const input of inputs.slice(4)) await store.recordSigning(input);
        await sealJournal(store, tsa);
        const clean = await auditJournal(store, { trust: testTrust(join(dir, 'pki')) });
        assert.deepEqual(clean.findings, []);
        assert.equal(clean.clean, true);
        assert.deepEqual([clean.batches, clean.entries, clean.unsealed], [2, 8, 0]);

        // seq n is the entry of inputs[n - 1]
        await raw.run(
          "UPDATE signing_transactions SET introspection_jwt = introspection_jwt || 'x' WHERE certificate_serial_hex = ?",
          inputs[0]!.certificate.serialHex,
        );
        await raw.run("UPDATE journal_entries SET body = replace(body, 'user-4711', 'user-0815') WHERE seq = ?", 2);
        await raw.run('DELETE FROM journal_entries WHERE seq = ?', 3);
        const [five, seven] = [await raw.body(5), await raw.body(7)];
        await raw.run('UPDATE journal_entries SET body = ? WHERE seq = ?', seven, 5);
        await raw.run('UPDATE journal_entries SET body = ? WHERE seq = ?', five, 7);
        const hourAgo = new Date(Date.now() - 3_600_000);
        const forged = encodeEntry({ kind: 'certificate.revoked', ref: 'ab', at: hourAgo, data: { serialHex: 'ab' } });
        await raw.run(
          'INSERT INTO journal_entries (kind, ref, recorded_at, body, leaf_hash) VALUES (?, ?, ?, ?, ?)',
          'certificate.revoked',
          'ab',
          raw.time(hourAgo),
          forged.body,
          forged.leafHash,
        );

        const report = await auditJournal(store, { trust: testTrust(join(dir, 'pki')) });
        assert.equal(report.clean, false);
        assert.deepEqual(named(report.findings), [
          'altered 1 1',
          'altered 2 1',
          'deleted 3 1',
          'inserted 9 null',
          'moved 5 2',
          'moved 7 2',
          'row', // the signing of the deleted entry 3: its transaction and certificate have no entry left
          'row',
        ]);
        const jwt = report.findings.find((f) => f.kind === 'altered' && f.seq === 1);
        assert.match(jwt && 'detail' in jwt ? jwt.detail : '', /introspection JWT/);
        const moved = report.findings.find((f) => f.kind === 'moved' && f.seq === 5);
        assert.equal(moved && 'sealedAs' in moved ? moved.sealedAs : undefined, 7);
      } finally {
        await raw.close();
        await store.close();
      }
    });

    it('entries retention purged are reported as purged by policy, and the store stays clean', async () => {
      const { store, raw } = await dialect.open();
      try {
        const old = signing(`txn-old-${randomUUID()}`, { createdAt: new Date(Date.now() - 86_400_000) });
        await store.recordSigning(old);
        await store.recordSigning(signing());
        await sealJournal(store, tsa);
        const purge = await store.purgeEvidence(new Date(Date.now() - 3_600_000), 100, () => []);
        assert.equal(purge.deleted, 1);
        assert.deepEqual(await store.journal.entriesOf(old.certificate.serialHex), []);
        const report = await auditJournal(store, { trust: testTrust(join(dir, 'pki')) });
        assert.equal(report.clean, true, JSON.stringify(report.findings));
        assert.deepEqual(named(report.findings), ['purged 1 1']);
      } finally {
        await raw.close();
        await store.close();
      }
    });
  });
}

registerAudit('SQLite', sqlite);
registerAudit('PostgreSQL', postgresql);

describe('journal sealing: two instances on one PostgreSQL', () => {
  it('writing and sealing at the same time leave one chain, every entry in exactly one batch', async () => {
    const first = await postgresql.open();
    const second = await first.again();
    try {
      const instance = async (store: Store) => {
        for (let round = 0; round < 15; round++) {
          await Promise.all([1, 2, 3].map(() => store.recordSigning(signing())));
          await sealJournal(store, tsa);
        }
      };
      await Promise.all([instance(first.store), instance(second)]);
      await sealJournal(first.store, tsa);
      const entries = await first.store.journal.entries(0, Number.MAX_SAFE_INTEGER);
      assert.equal(entries.length, 90);
      const batches = await first.store.journal.batches(1, 1000);
      const sealed = batches.flatMap((b) => b.leaves.map((l) => l.seq));
      assert.deepEqual(
        sealed,
        entries.map((e) => e.seq),
        'each entry sealed once, in order',
      );
      const report = await auditJournal(first.store, { trust: testTrust(join(dir, 'pki')) });
      assert.equal(report.clean, true, JSON.stringify(report.findings));
      assert.equal(report.entries, 90);
    } finally {
      await first.raw.close();
      await first.store.close();
      await second.close();
    }
  });
});
