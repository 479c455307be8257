/**
 * The journal's part of the store contract (both databases run it): signing evidence becomes an entry in the
 * write that stores it, one canonical encoding with its SHA-256; a write that fails leaves no entry; batches
 * are inserted once per number.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { canonicalJson } from '../../src/util/canonical-json.ts';
import type { JournalBatch, JournalRenewal, Store } from '../../src/store/types.ts';
import { claimFor, signing, storeOpener, type StoreFactory } from './store-contract.ts';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest();

function parsed(body: Buffer): {
  v: number;
  kind: string;
  ref: string | null;
  at: string;
  data: Record<string, unknown>;
} {
  const value = JSON.parse(body.toString('utf8'));
  assert.equal(canonicalJson(value), body.toString('utf8'), 'the body is canonical JSON');
  return value;
}

function batch(no: number, firstSeq: number, throughSeq: number): JournalBatch {
  return {
    batchNo: no,
    firstSeq,
    throughSeq,
    hashOid: '2.16.840.1.101.3.4.2.1',
    prevRoot: null,
    root: randomBytes(32),
    leaves: [{ seq: firstSeq, hash: randomBytes(32) }],
    token: randomBytes(100),
    sealedAt: new Date(Math.floor(Date.now() / 1000) * 1000),
  };
}

export function registerJournalContract(name: string, factory: StoreFactory): void {
  describe(`Journal contract: ${name}`, () => {
    const open = storeOpener(factory);

    it('recordSigning and keepSignatures each write one entry with the evidence, in the same write', async () => {
      const store: Store = await open();
      const input = signing(`txn-${randomUUID()}`);
      const serial = input.certificate.serialHex;
      await store.recordSigning(input, 'ordered');
      const hash = input.transaction.hashes[0]!;
      const claim = claimFor(input, [hash]);
      assert.equal((await store.claimDocuments(claim, new Date(0))).kind, 'claimed');
      const signature = { hash, signature: randomBytes(64).toString('base64'), revocation: null };
      await store.keepSignatures({ claim, signatures: [signature], evidenceSerialHex: serial, outbox: [] });
      const entries = await store.journal.entriesOf(serial);
      assert.deepEqual(
        entries.map((e) => e.kind),
        ['signing.authorized', 'signing.returned'],
      );
      for (const e of entries) assert.deepEqual(e.leafHash, sha256(e.body), 'leaf hash = SHA-256 of the body');
      const authorized = parsed(entries[0]!.body);
      assert.equal(authorized.ref, serial);
      // format 3: the SHA-256 (hex) of what the rows keep, not copies of it
      const hex = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');
      assert.equal(authorized.data.introspectionJwtSha256, hex(input.transaction.introspectionJwt));
      assert.deepEqual(authorized.data.hashes, input.transaction.hashes);
      assert.equal(authorized.data.certificateSha256, hex(input.certificate.der));
      const returned = parsed(entries[1]!.body).data;
      const bytes = Buffer.from(signature.signature, 'base64');
      assert.deepEqual(returned.signatures, [{ hash, signatureSha256: hex(bytes) }]);
      assert.equal(returned.revocationInfoSha256, null, 'a B-B signature returned no revocationInfo');
      assert.ok(entries[1]!.seq > entries[0]!.seq);
    });

    it('a write that fails leaves no entry (nothing half-written)', async () => {
      const store = await open();
      const input = signing();
      await store.recordSigning(input);
      const again = { ...input, transaction: { ...input.transaction, createdAt: new Date(Date.now() + 5) } };
      await assert.rejects(store.recordSigning(again)); // the certificate serial exists
      assert.equal((await store.journal.entriesOf(input.certificate.serialHex)).length, 1);
    });

    it('a revocation is journaled with it; a second revocation, which changes nothing, is not', async () => {
      const store = await open();
      const input = signing();
      const serial = input.certificate.serialHex;
      await store.recordSigning(input);
      const at = new Date(Math.floor(Date.now() / 1000) * 1000);
      assert.equal(await store.revokeCertificate(serial, 'keyCompromise', at), true);
      assert.equal(await store.revokeCertificate(serial, 'superseded', new Date(at.getTime() + 1000)), false);
      const revoked = (await store.journal.entriesOf(serial)).filter((e) => e.kind === 'certificate.revoked');
      assert.equal(revoked.length, 1);
      assert.deepEqual(parsed(revoked[0]!.body).data, { serialHex: serial, reason: 'keyCompromise' });
      assert.equal(revoked[0]!.recordedAt.getTime(), at.getTime());
    });

    it('horizon, entries by range, and one batch per number', async () => {
      const store = await open();
      assert.equal(await store.journal.horizon(), 0);
      await store.journal.append({ kind: 'service.started', ref: null, at: new Date(), data: { n: 1 } });
      await store.recordSigning(signing());
      const horizon = await store.journal.horizon();
      const entries = await store.journal.entries(0, horizon);
      assert.equal(entries.length, 2);
      assert.equal(entries.at(-1)!.seq, horizon);
      const first = batch(1, 1, horizon);
      assert.equal(await store.journal.addBatch(first), true);
      assert.equal(await store.journal.addBatch({ ...batch(1, 1, horizon) }), false, 'batch 1 exists');
      assert.equal(await store.journal.addBatch(batch(2, 1, horizon)), false, 'its entries are sealed');
      assert.deepEqual(await store.journal.lastBatch(), first);
      assert.deepEqual(await store.journal.batchOf(horizon), first);
      assert.deepEqual(await store.journal.batches(1, 10), [first]);
    });

    it('renewals: inserted once per number, read back by number with their leaves', async () => {
      const store = await open();
      assert.deepEqual(await store.journal.renewals(), []);
      const renewal = (no: number, kind: 'timestamp' | 'hashtree', bytes: number): JournalRenewal => ({
        renewalNo: no,
        kind,
        hashOid: bytes === 64 ? '2.16.840.1.101.3.4.2.3' : '2.16.840.1.101.3.4.2.1',
        chainOf: kind === 'timestamp' && bytes === 64 ? 1 : null,
        throughBatch: 7,
        leaves: [
          { key: 3, hash: randomBytes(bytes) },
          { key: 2 ** 40, hash: randomBytes(bytes) },
        ],
        root: randomBytes(bytes),
        token: randomBytes(100),
        renewedAt: new Date(Math.floor(Date.now() / 1000) * 1000),
      });
      const first = renewal(1, 'hashtree', 64);
      const second = renewal(2, 'timestamp', 64);
      assert.equal(await store.journal.addRenewal(first), true);
      assert.equal(await store.journal.addRenewal(renewal(1, 'timestamp', 32)), false, 'renewal 1 exists');
      assert.equal(await store.journal.addRenewal(second), true);
      assert.deepEqual(await store.journal.renewals(), [first, second]);
    });
  });
}
