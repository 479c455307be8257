/**
 * One consent, one signature per document (signing/once.ts), as every Store implementation must keep it:
 * claims on (iss, txn, hash algorithm, hash) decided by the database, kept signatures returned in request
 * order, abandoned claims taken over, signatures kept only together with their mediation record. Run by the
 * SQLite and PostgreSQL test files with the same factory as the store contract; the races run concurrent
 * claims on one store and on two stores opened on the same location (two instances sharing the database).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { DocumentClaim, KeptSignature, NewOutboxEntry, Store } from '../../src/store/types.ts';
import { signing, storeOpener, type StoreFactory } from './store-contract.ts';

const SHA256 = '2.16.840.1.101.3.4.2.1';
const hash = () => randomBytes(32).toString('base64');

function claimOf(hashes: string[], extra: Partial<DocumentClaim> = {}): DocumentClaim {
  return {
    iss: 'https://bank.sandbox.localhost',
    txn: randomUUID(),
    hashAlgorithmOid: SHA256,
    hashes,
    claimId: randomUUID(),
    requestKey: 'C AdES-B-B ECDSA-P256',
    claimedAt: new Date(),
    ...extra,
  };
}

/** the same documents asked by another request (a retry, or a concurrent call) */
function again(claim: DocumentClaim, extra: Partial<DocumentClaim> = {}): DocumentClaim {
  return { ...claim, claimId: randomUUID(), claimedAt: new Date(), ...extra };
}

function signatures(claim: DocumentClaim): KeptSignature[] {
  return claim.hashes.map((h) => ({
    hash: h,
    signature: randomBytes(64).toString('base64'),
    revocation: { ocsp: [randomBytes(8).toString('base64')], crl: [] },
  }));
}

/** keeps signatures as signDoc does: after the evidence of its signer certificate was recorded */
async function keep(
  store: Store,
  claim: DocumentClaim,
  kept: readonly KeptSignature[],
  outbox: readonly NewOutboxEntry[] = [],
): Promise<void> {
  const evidence = signing(claim.txn, { iss: claim.iss });
  await store.recordSigning(evidence, 'ordered');
  await store.keepSignatures({ claim, signatures: kept, evidenceSerialHex: evidence.certificate.serialHex, outbox });
}

const FRESH = () => new Date(Date.now() - 120_000); // staleBefore: claims younger than two minutes are live
const EVERYTHING_STALE = () => new Date(Date.now() + 60_000);

export function registerDocumentsContract(name: string, factory: StoreFactory): void {
  describe(`Store contract, documents signed under a consent: ${name}`, () => {
    const open = storeOpener(factory);

    it('a new document is claimed; kept with its mediation record; a retry gets the kept signatures in its order', async () => {
      const store = await open();
      const claim = claimOf([hash(), hash()]);
      assert.deepEqual(await store.claimDocuments(claim, FRESH()), { kind: 'claimed' });
      const kept = signatures(claim);
      const record = { id: `rsc-${randomUUID()}`, topic: 'mediation', payload: { count: 2 } };
      await keep(store, claim, kept, [record]);
      assert.equal((await store.getOutbox(record.id))?.state, 'pending');
      const retry = await store.claimDocuments(again(claim), FRESH());
      assert.deepEqual(retry, { kind: 'signed', signatures: kept });
      const reversed = await store.claimDocuments(again(claim, { hashes: [...claim.hashes].reverse() }), FRESH());
      assert.deepEqual(reversed, { kind: 'signed', signatures: [...kept].reverse() });
      // a subset of the documents signed before: their signatures
      assert.deepEqual(await store.claimDocuments(again(claim, { hashes: [claim.hashes[1]!] }), FRESH()), {
        kind: 'signed',
        signatures: [kept[1]],
      });
    });

    it('documents are per consent and per hash algorithm: another txn or issuer claims the same hash afresh', async () => {
      const store = await open();
      const claim = claimOf([hash()]);
      assert.equal((await store.claimDocuments(claim, FRESH())).kind, 'claimed');
      assert.equal((await store.claimDocuments(again(claim, { txn: randomUUID() }), FRESH())).kind, 'claimed');
      assert.equal(
        (await store.claimDocuments(again(claim, { iss: 'https://other-bank.sandbox.localhost' }), FRESH())).kind,
        'claimed',
      );
      assert.equal(
        (await store.claimDocuments(again(claim, { hashAlgorithmOid: '2.16.840.1.101.3.4.2.8' }), FRESH())).kind,
        'claimed',
      );
    });

    it('a document being signed is in progress for others; another request key or a partial overlap is refused', async () => {
      const store = await open();
      const [a, b] = [hash(), hash()];
      const claim = claimOf([a, b]);
      assert.equal((await store.claimDocuments(claim, FRESH())).kind, 'claimed');
      assert.deepEqual(await store.claimDocuments(again(claim, { hashes: [b, a] }), FRESH()), {
        kind: 'in_progress',
        index: 0,
      });
      assert.deepEqual(await store.claimDocuments(again(claim, { requestKey: 'X AdES-B-T RSA-3072' }), FRESH()), {
        kind: 'other_request',
        index: 0,
        requestKey: claim.requestKey,
      });
      assert.deepEqual(await store.claimDocuments(again(claim, { hashes: [hash(), b] }), FRESH()), {
        kind: 'mixed',
        index: 1,
      });
      // nothing of the refused claims was written: the new hash is still free
      await keep(store, claim, signatures(claim));
      assert.deepEqual(await store.claimDocuments(again(claim, { hashes: [hash(), b] }), FRESH()), {
        kind: 'mixed',
        index: 1,
      });
    });

    it('signatures whose evidence is missing are not kept, and their record is not written', async () => {
      const store = await open();
      const claim = claimOf([hash()]);
      assert.equal((await store.claimDocuments(claim, FRESH())).kind, 'claimed');
      const record = { id: `rsc-${randomUUID()}`, topic: 'mediation', payload: {} };
      const unrecorded = signing(claim.txn).certificate.serialHex; // evidence lost in a database crash
      await assert.rejects(
        store.keepSignatures({ claim, signatures: signatures(claim), evidenceSerialHex: unrecorded, outbox: [record] }),
      );
      assert.equal(await store.getOutbox(record.id), undefined, 'a record was written without evidence');
      assert.deepEqual(
        await store.claimDocuments(again(claim), FRESH()),
        { kind: 'in_progress', index: 0 },
        'the claim holds no signature',
      );
      const kept = signatures(claim);
      await keep(store, claim, kept);
      assert.deepEqual(await store.claimDocuments(again(claim), FRESH()), { kind: 'signed', signatures: kept });
    });

    it('a released claim is free again; an abandoned one is taken over, and its old holder can no longer keep', async () => {
      const store = await open();
      const claim = claimOf([hash()]);
      assert.equal((await store.claimDocuments(claim, FRESH())).kind, 'claimed');
      await store.releaseDocuments(claim);
      const second = again(claim);
      assert.equal((await store.claimDocuments(second, FRESH())).kind, 'claimed');
      const third = again(claim);
      assert.equal(
        (await store.claimDocuments(third, EVERYTHING_STALE())).kind,
        'claimed',
        'an abandoned claim is taken over',
      );
      const record = { id: `rsc-${randomUUID()}`, topic: 'mediation', payload: {} };
      await assert.rejects(keep(store, second, signatures(second), [record]));
      assert.equal(
        await store.getOutbox(record.id),
        undefined,
        'the record was written although the signatures were not kept',
      );
      await store.releaseDocuments(second); // not its claim anymore: no effect
      const kept = signatures(third);
      await keep(store, third, kept);
      assert.deepEqual(
        await store.claimDocuments(again(claim), EVERYTHING_STALE()),
        { kind: 'signed', signatures: kept },
        'a kept signature is never taken over',
      );
    });

    it('concurrent claims of one document, on one store and on two stores sharing the database: exactly one wins', async () => {
      const location = await factory.location();
      const stores = [await open(location), await open(location)];
      for (let round = 0; round < 5; round++) {
        const claim = claimOf([hash(), hash()]);
        const outcomes = await Promise.all(
          Array.from({ length: 8 }, (_, i) => stores[i % 2]!.claimDocuments(again(claim), FRESH())),
        );
        assert.equal(outcomes.filter((o) => o.kind === 'claimed').length, 1, JSON.stringify(outcomes));
        assert.ok(
          outcomes.every((o) => o.kind === 'claimed' || o.kind === 'in_progress'),
          JSON.stringify(outcomes),
        );
      }
    });
  });
}
