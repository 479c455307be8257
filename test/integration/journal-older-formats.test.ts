/**
 * Signing entries of formats 1 and 2, as stores written before format 3 hold them (the JWT, the certificate,
 * the signatures and the revocationInfo inside the entries; format 1 with a revocationInfo per signature), still
 * audit, export and give evidence records as before, beside format-3 entries in the same store, on SQLite and
 * PostgreSQL: clean as written; a JWT, certificate, signature or revocationInfo row rewritten is named as before;
 * the records and the export hand out the entries byte for byte as sealed, with the files they did before
 * (BouncyCastle validates a format-1 record against our root). The older bodies are built here as the code of
 * those formats built them (git history of src/store/journal.ts), and put in place of the entries the store
 * wrote before the seal, as a store of that time holds them. This file runs unchanged against the code before
 * format 3 (it reads only what both have).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash, randomUUID } from 'node:crypto';
import { loadCaMaterial } from '../../src/ca/material.ts';
import { auditJournal, describeFinding } from '../../src/journal/audit.ts';
import { recordsOf } from '../../src/journal/records.ts';
import { sealJournal } from '../../src/journal/seal.ts';
import { exportEvidence } from '../../src/retention/export.ts';
import type { KeptSignature, RecordSigningInput, Store } from '../../src/store/types.ts';
import type { LocalTsa } from '../../src/timestamping/tsa.ts';
import { canonicalJson, type CanonicalValue } from '../../src/util/canonical-json.ts';
import { bouncyCastleVerdict, rootFileOf, testTrust, testTsa } from '../helpers/journal.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { postgresDialect, sqliteDialect, type Raw, type TamperDialect } from '../helpers/tamper.ts';
import { claimFor, signing } from '../store/store-contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'qtsp-journal-older-'));
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

const b64 = (text: string) => Buffer.from(text).toString('base64');

/** a signing with its first document's signature kept, returned with revocationInfo */
interface Kept {
  readonly input: RecordSigningInput;
  readonly kept: KeptSignature;
  /** the entries' format: 1, 2, or the format the code writes (undefined) */
  readonly format: 1 | 2 | undefined;
}

/** the signing.authorized data of formats 1 and 2 (they differ only in signing.returned) */
function authorizedData(input: RecordSigningInput): CanonicalValue {
  const t = input.transaction;
  return {
    txn: t.txn,
    iss: t.iss,
    sub: t.sub,
    clientId: t.clientId,
    clientState: t.clientState,
    introspectionJwt: t.introspectionJwt,
    hashAlgorithmOid: t.hashAlgorithmOid,
    hashes: [...t.hashes],
    signatureFormat: t.signatureFormat,
    conformanceLevel: t.conformanceLevel,
    keySource: t.keySource!,
    keyCustody: t.keyCustody!,
    certificate: input.certificate.der.toString('base64'),
  };
}

/** the signing.returned data: format 1 with each signature's revocationInfo, format 2 with it once */
function returnedData(k: Kept): CanonicalValue {
  const t = k.input.transaction;
  const revocation = { ocsp: [...k.kept.revocation!.ocsp], crl: [...k.kept.revocation!.crl] };
  const head = { iss: t.iss, txn: t.txn, hashAlgorithmOid: t.hashAlgorithmOid };
  return k.format === 1
    ? { ...head, signatures: [{ hash: k.kept.hash, signature: k.kept.signature, revocation }] }
    : { ...head, signatures: [{ hash: k.kept.hash, signature: k.kept.signature }], revocationInfo: revocation };
}

/** Puts the older bodies in place of the entries the store wrote for `k`: what a store of that time holds. */
async function olderEntries(raw: Raw, k: Kept): Promise<string[]> {
  const rows = await raw.all(
    'SELECT seq, kind, body FROM journal_entries WHERE ref = ? ORDER BY seq',
    k.input.certificate.serialHex,
  );
  const bodies: string[] = [];
  for (const row of rows) {
    const written = JSON.parse(String(row.body)) as { kind: string; ref: string; at: string };
    const data = written.kind === 'signing.authorized' ? authorizedData(k.input) : returnedData(k);
    const body = canonicalJson({ v: k.format!, kind: written.kind, ref: written.ref, at: written.at, data });
    const leaf = createHash('sha256').update(body, 'utf8').digest('hex');
    await raw.run('UPDATE journal_entries SET body = ?, leaf_hash = ? WHERE seq = ?', body, leaf, row.seq);
    bodies.push(body);
  }
  assert.equal(bodies.length, 2);
  return bodies;
}

async function keepOne(store: Store, input: RecordSigningInput, n: number): Promise<KeptSignature> {
  const hash = input.transaction.hashes[0]!;
  const claim = claimFor(input, [hash]);
  assert.equal((await store.claimDocuments(claim, new Date(0))).kind, 'claimed');
  const revocation = { ocsp: [b64(`OCSP response ${n}`), b64(`OCSP response ${n} of the CA`)], crl: [b64('CRL')] };
  const kept = { hash, signature: b64(`a signature object ${n}`), revocation };
  await store.keepSignatures({ claim, signatures: [kept], evidenceSerialHex: input.certificate.serialHex, outbox: [] });
  return kept;
}

/** a format-1, a format-2 and a current signing, sealed; the older ones' entries as their code wrote them */
async function populate(store: Store, raw: Raw): Promise<{ signings: Kept[]; bodies: Map<string, string[]> }> {
  const signings: Kept[] = [];
  const bodies = new Map<string, string[]>();
  for (const [n, format] of ([1, 2, undefined] as const).entries()) {
    const input = signing();
    await store.recordSigning(input);
    const k = { input, kept: await keepOne(store, input, n), format };
    if (format) bodies.set(input.certificate.serialHex, await olderEntries(raw, k));
    signings.push(k);
  }
  await sealJournal(store, tsa);
  return { signings, bodies };
}

const findings = async (store: Store) =>
  (await auditJournal(store, { trust: testTrust(join(dir, 'pki')) })).findings.map(describeFinding);

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/** a row of `k` a DBA rewrites (column, key), its value as kept, the value written, and the finding it gave before */
const rewrites = (k: Kept) => {
  const serial = k.input.certificate.serialHex;
  const txn = k.input.transaction.txn;
  const document = `${literal(txn)} ${literal(k.kept.hash)}`;
  const kept = 'txn = ? AND signature IS NOT NULL';
  return [
    {
      at: ['signing_transactions', 'introspection_jwt', 'certificate_serial_hex = ?', serial],
      values: [k.input.transaction.introspectionJwt, 'a.b.c'],
      expect: new RegExp(`altered: the stored evidence of signing ${serial} differs .*: introspection JWT$`),
    },
    {
      at: ['certificates', 'der', 'serial_hex = ?', serial],
      values: [k.input.certificate.der, Buffer.from('not a certificate')],
      expect: new RegExp(`altered: the stored evidence of signing ${serial} differs .*: certificate$`),
    },
    {
      at: ['signed_documents', 'signature', kept, txn],
      values: [k.kept.signature, b64('forged')],
      expect: new RegExp(`^signed_documents ${document}: differs from entry \\d+: signature$`),
    },
    {
      at: ['signed_documents', 'revocation', kept, txn],
      values: [JSON.stringify(k.kept.revocation), JSON.stringify({ ocsp: [b64('another response')], crl: [] })],
      expect: new RegExp(`^signed_documents ${document}: differs from entry \\d+: revocationInfo$`),
    },
  ] as const;
};

function registerOlder(dialect: TamperDialect): void {
  describe(`journal entries of formats 1 and 2: ${dialect.name}`, () => {
    it('audit clean and name each rewritten row as before', async () => {
      const { store, raw } = await dialect.open();
      try {
        const { signings } = await populate(store, raw);
        assert.deepEqual(await findings(store), []);
        for (const k of signings.filter((s) => s.format))
          for (const r of rewrites(k)) {
            const [table, column, where, key] = r.at;
            const set = (value: unknown) => raw.run(`UPDATE ${table} SET ${column} = ? WHERE ${where}`, value, key);
            await set(r.values[1]);
            const lines = await findings(store);
            await set(r.values[0]);
            assert.ok(
              lines.some((l) => r.expect.test(l)),
              `format ${k.format}: no finding matches ${r.expect}:\n${lines.join('\n')}`,
            );
            assert.equal(lines.length, 1, lines.join('\n'));
          }
        assert.deepEqual(await findings(store), []);
      } finally {
        await raw.close();
        await store.close();
      }
    });

    it('hand out the entries as sealed, with the records and archive files they had', async () => {
      const { store, raw } = await dialect.open();
      try {
        const { signings, bodies } = await populate(store, raw);
        for (const k of signings.filter((s) => s.format)) {
          const records = await recordsOf(store, k.input.certificate.serialHex);
          assert.deepEqual(
            records.map((r) => r.entry.body.toString('utf8')),
            bodies.get(k.input.certificate.serialHex),
          );
          assert.ok(
            records.every((r) => r.record),
            'sealed: each has its record',
          );
        }
        const first = (await recordsOf(store, signings[0]!.input.certificate.serialHex))[1]!;
        const files = join(dir, randomUUID());
        writeFileSync(`${files}.json`, first.entry.body);
        writeFileSync(`${files}.ers`, first.record!);
        const verdict = await bouncyCastleVerdict(`${files}.ers`, `${files}.json`, {
          root: rootFileOf(join(dir, 'pki')),
        });
        assert.ok(verdict.valid, verdict.output);

        const out = join(dir, randomUUID());
        const summary = await exportEvidence(store, {
          from: new Date(Date.now() - 3_600_000),
          to: new Date(Date.now() + 60_000),
          out,
          tsa,
          caCertificates: [{ name: 'root', der: loadCaMaterial(join(dir, 'pki')).root.der }],
          qtspId: 'qtsp-journal-test',
        });
        assert.deepEqual((summary as { differs?: readonly unknown[] }).differs ?? [], []);
        for (const k of signings.filter((s) => s.format)) {
          const signingDir = readdirSync(join(out, 'signings')).find((d) => d.endsWith(k.input.certificate.serialHex))!;
          const names = readdirSync(join(out, 'signings', signingDir)).map((f) =>
            f.replace(/^journal-\d+-(\d+-)?/, 'journal-'),
          );
          assert.deepEqual(names.sort(), [
            'certificate.pem',
            'introspection.jwt',
            'journal-signing.authorized.ers',
            'journal-signing.authorized.json',
            'journal-signing.group.ers',
            'journal-signing.returned.ers',
            'journal-signing.returned.json',
            'signature-1.p7s',
            'signing.json',
          ]);
        }
      } finally {
        await raw.close();
        await store.close();
      }
    });
  });
}

registerOlder(sqliteDialect(dir));
registerOlder(postgresDialect(dir, () => postgres!));
