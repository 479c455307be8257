/**
 * The retention purge (src/retention/purge.ts, src/store/retention.ts) on SQLite and PostgreSQL: it deletes
 * exactly what is past its period and delivered, keeps the rest (an outbox entry not delivered; evidence whose
 * mediation record is pending, queued or failed; what is newer than the cutoff; our own service certificates),
 * and signings written while it runs lose nothing. A signing goes with its journal entries, each leaving a
 * tombstone, and only once they are sealed: before, it waits for a later purge.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/load.ts';
import { MEDIATION_TOPIC, referenceId } from '../../src/mediation/record.ts';
import { auditJournal } from '../../src/journal/audit.ts';
import { sealJournal } from '../../src/journal/seal.ts';
import { cutoffs, purgeExpired, startRetention } from '../../src/retention/purge.ts';
import { openPostgresStore, openSqliteStore } from '../../src/store/open.ts';
import type { DocumentClaim, OutboxState, RecordSigningInput, Store } from '../../src/store/types.ts';
import type { LocalTsa } from '../../src/timestamping/tsa.ts';
import { testTrust, testTsa } from '../helpers/journal.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { certificate, claimFor, signing } from '../store/store-contract.ts';

/** a signing with its kept signatures and (unless `record` is false) its mediation record, as signDoc writes them */
async function signed(
  store: Store,
  record: OutboxState | false,
  at: Date = new Date(),
): Promise<{ input: RecordSigningInput; claim: DocumentClaim; recordId: string }> {
  const input = signing(randomUUID(), { createdAt: at });
  const t = input.transaction;
  const claim = claimFor(input, t.hashes, { claimedAt: at });
  assert.deepEqual(await store.claimDocuments(claim, new Date(0)), { kind: 'claimed' });
  await store.recordSigning(input);
  const recordId = referenceId(t.txn, t.certificateSerialHex);
  const outbox = record === false ? [] : [{ id: recordId, topic: MEDIATION_TOPIC, payload: { n: 1 } }];
  const signatures = t.hashes.map((hash) => ({
    hash,
    signature: randomBytes(64).toString('base64'),
    revocation: null,
  }));
  await store.keepSignatures({ claim, signatures, evidenceSerialHex: t.certificateSerialHex, outbox });
  if (record !== false && record !== 'pending') assert.ok(await store.markOutbox(recordId, record));
  return { input, claim, recordId };
}

/** what the store still holds of a signing: transaction, certificate, documents */
async function held(store: Store, s: { input: RecordSigningInput }): Promise<[number, boolean, number]> {
  const t = s.input.transaction;
  return [
    (await store.getTransaction(t.txn)).length,
    (await store.getCertificate(t.certificateSerialHex)) !== undefined,
    (await store.documentsOf(t.iss, t.txn)).length,
  ];
}

/** a later time than every row written so far (both databases keep milliseconds) */
async function cutoff(): Promise<Date> {
  await sleep(5);
  const at = new Date();
  await sleep(5);
  return at;
}

function registerRetention(name: string, open: () => Promise<Store>): void {
  describe(`retention purge: ${name}`, () => {
    let store: Store;
    before(async () => {
      store = await open();
    });
    after(async () => {
      await store?.close();
    });

    it('deletes delivered outbox entries past their period, and keeps the rest', async () => {
      const add = async (state: OutboxState) => {
        const id = `rsc-${randomUUID()}`;
        await store.addOutbox([{ id, topic: MEDIATION_TOPIC, payload: { state } }]);
        if (state !== 'pending') assert.ok(await store.markOutbox(id, state));
        return id;
      };
      const old = { delivered: await add('delivered'), pending: await add('pending') };
      const queued = await add('queued');
      const failed = await add('failed');
      const cut = await cutoff();
      const fresh = await add('delivered');
      const purged = await purgeExpired(store, { outboxDeliveredBefore: cut, evidenceBefore: undefined, batchSize: 2 });
      assert.equal(await store.getOutbox(old.delivered), undefined, 'delivered before the cutoff: deleted');
      for (const id of [old.pending, queued, failed, fresh]) assert.ok(await store.getOutbox(id), `${id} kept`);
      assert.ok(purged.outbox >= 1);
      assert.equal(purged.signings + purged.documents, 0, 'no evidence period: no evidence deleted');
    });

    it('deletes evidence past its period whose record was delivered or never existed; keeps the rest', async () => {
      const delivered = await signed(store, 'delivered');
      const demo = await signed(store, false);
      const pending = await signed(store, 'pending');
      const queued = await signed(store, 'queued');
      const failed = await signed(store, 'failed');
      const service = certificate(null); // a TSA or OCSP responder certificate: no txn
      await store.addCertificate(service);
      const cut = await cutoff();
      const fresh = await signed(store, 'delivered');
      await sealJournal(store, tsa);
      // batches of 2: the three blocked signings fill more than a batch, and the purge goes past them
      const purged = await purgeExpired(store, { outboxDeliveredBefore: undefined, evidenceBefore: cut, batchSize: 2 });
      assert.deepEqual(await held(store, delivered), [0, false, 0]);
      assert.deepEqual(await held(store, demo), [0, false, 0]);
      for (const kept of [pending, queued, failed, fresh]) assert.deepEqual(await held(store, kept), [1, true, 2]);
      assert.ok(await store.getCertificate(service.serialHex), 'our own certificates stay');
      assert.ok(await store.getOutbox(delivered.recordId), 'the outbox has a period of its own');
      assert.ok(purged.signings >= 2 && purged.documents >= 4, JSON.stringify(purged));
    });

    it('once the delivered record is purged from the outbox, its evidence goes too', async () => {
      const s = await signed(store, 'delivered');
      const cut = await cutoff();
      await purgeExpired(store, { outboxDeliveredBefore: cut, evidenceBefore: undefined, batchSize: 10 });
      assert.equal(await store.getOutbox(s.recordId), undefined);
      assert.deepEqual(await held(store, s), [1, true, 2], 'evidence has a period of its own');
      await sealJournal(store, tsa);
      await purgeExpired(store, { outboxDeliveredBefore: undefined, evidenceBefore: cut, batchSize: 10 });
      assert.deepEqual(await held(store, s), [0, false, 0]);
    });

    it('signings written while the purge runs lose nothing', async () => {
      const old = [];
      for (let i = 0; i < 60; i++) old.push(await signed(store, i % 2 === 0 ? 'delivered' : false));
      const cut = await cutoff();
      await sealJournal(store, tsa);
      const purge = purgeExpired(store, { outboxDeliveredBefore: cut, evidenceBefore: cut, batchSize: 5 });
      const fresh = await Promise.all(Array.from({ length: 30 }, () => signed(store, 'delivered')));
      const purged = await purge;
      assert.ok(purged.signings >= old.length, JSON.stringify(purged));
      for (const s of old) assert.deepEqual(await held(store, s), [0, false, 0]);
      for (const s of fresh) {
        assert.deepEqual(await held(store, s), [1, true, 2], 'a signing written during the purge is whole');
        assert.equal((await store.getOutbox(s.recordId))?.state, 'delivered');
      }
    });

    it('a signing is purged once its entries are sealed, with them and their tombstones; the audit stays clean', async () => {
      const s = await signed(store, 'delivered');
      const serial = s.input.transaction.certificateSerialHex;
      const cut = await cutoff();
      const evidence = { outboxDeliveredBefore: undefined, evidenceBefore: cut, batchSize: 10 };
      await purgeExpired(store, evidence);
      assert.deepEqual(await held(store, s), [1, true, 2], 'its entries are not sealed yet: the signing waits');
      const seqs = (await store.journal.entriesOf(serial)).map((e) => e.seq);
      assert.equal(seqs.length, 2);
      await sealJournal(store, tsa);
      await purgeExpired(store, evidence);
      assert.deepEqual(await held(store, s), [0, false, 0], 'sealed: purged at the next purge');
      assert.deepEqual(await store.journal.entriesOf(serial), [], 'and its entries with it');
      const report = await auditJournal(store, { trust: testTrust(join(dir, 'pki')) });
      assert.equal(report.clean, true, JSON.stringify(report.findings));
      const purged = report.findings.filter((f) => f.kind === 'purged' && seqs.includes(f.seq));
      assert.equal(purged.length, 2, 'signing.authorized and signing.returned: purged by policy');
    });
  });
}

let dir: string;
let tsa: LocalTsa;
let pgServer: PostgresServer | undefined;
let pgUnavailable: Error | undefined;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'qtsp-retention-'));
  tsa = testTsa(join(dir, 'pki'));
  try {
    pgServer = await startPostgres();
  } catch (err) {
    pgUnavailable = err as Error; // reported by the PostgreSQL tests, so the failure shows in the counts
  }
});
after(async () => {
  await pgServer?.stop();
  rmSync(dir, { recursive: true, force: true });
});

registerRetention('sqlite', () => openSqliteStore(join(dir, `${randomUUID()}.sqlite`)));
registerRetention('postgres', async () => {
  if (!pgServer) throw pgUnavailable ?? new Error('PostgreSQL did not start');
  return openPostgresStore({ url: await pgServer.freshSchemaUrl() });
});

describe('the scheduled purge', () => {
  it('runs every purgeIntervalSeconds with the configured periods, and stops on close', async () => {
    const store = await openSqliteStore(join(dir, `${randomUUID()}.sqlite`));
    const job = startRetention(
      loadConfig({ retention: { evidenceDays: 1, purgeIntervalSeconds: 1 } }, {}),
      store,
      pino({ level: 'silent' }),
    );
    try {
      const old = signing(randomUUID(), { createdAt: new Date(Date.now() - 2 * 86_400_000) });
      const recent = signing(randomUUID(), { createdAt: new Date(Date.now() - 3_600_000) });
      await store.recordSigning(old);
      await store.recordSigning(recent);
      await sealJournal(store, tsa); // a signing goes once its entries are sealed
      // bounded wait for a pass (the first comes one interval after the start)
      const deadline = Date.now() + 30_000;
      while ((await store.getTransaction(old.transaction.txn)).length > 0 && Date.now() < deadline) await sleep(100);
      assert.equal((await store.getTransaction(old.transaction.txn)).length, 0, 'two days old: purged');
      assert.equal((await store.getTransaction(recent.transaction.txn)).length, 1, 'an hour old: kept');
    } finally {
      await job.close();
      await store.close();
    }
  });
});

describe('retention settings', () => {
  it('keep evidence for ever and delivered outbox entries for 90 days unless set; QTSP_RETENTION_* set them', () => {
    const now = new Date('2030-01-01T00:00:00Z');
    const defaults = loadConfig({}, {});
    assert.deepEqual(cutoffs(defaults.retention, now), {
      outboxDeliveredBefore: new Date('2029-10-03T00:00:00Z'),
      evidenceBefore: undefined,
      batchSize: 200,
    });
    const set = loadConfig(
      {},
      {
        QTSP_RETENTION_EVIDENCE_DAYS: '3650',
        QTSP_RETENTION_OUTBOX_DELIVERED_DAYS: '0',
        QTSP_RETENTION_PURGE_BATCH_SIZE: '50',
        QTSP_RETENTION_PURGE_INTERVAL_SECONDS: '600',
      },
    );
    assert.equal(set.retention.purgeIntervalSeconds, 600);
    assert.deepEqual(cutoffs(set.retention, now), {
      outboxDeliveredBefore: undefined,
      evidenceBefore: new Date('2020-01-04T00:00:00Z'),
      batchSize: 50,
    });
  });
});
