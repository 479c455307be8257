/**
 * A store written by release 0.1 (fdcfad6, schema_version 2) opens with today's store, migrates, keeps every
 * row, and goes on working. Each driver's test file calls this with a fresh copy of its fixture.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Store } from '../../../src/store/types.ts';
import { signing, type StoreFactory } from '../store-contract.ts';
import {
  ISSUER,
  olderCertificate,
  outbox,
  revocation,
  revokedCertificate,
  signerCertificate,
  transactions,
} from './rows.ts';

export function registerReleaseMigration(name: string, factory: StoreFactory): void {
  describe(`Store migration from release 0.1: ${name}`, () => {
    const opened: Store[] = [];
    const open = async (location: string) => {
      const store = await factory.open(location);
      opened.push(store);
      return store;
    };
    after(async () => {
      for (const s of opened) await s.close();
    });

    it('keeps the transactions, certificates, revocations and outbox of release 0.1', async () => {
      const store = await open(await factory.location());
      assert.deepEqual(await store.getTransaction('txn-release-0.1'), transactions);
      assert.deepEqual(await store.getCertificate(signerCertificate.serialHex), {
        ...signerCertificate,
        status: { status: 'good' },
      });
      assert.deepEqual(await store.getCertificate(olderCertificate.serialHex), {
        ...olderCertificate,
        status: { status: 'good' },
      });
      assert.deepEqual(await store.getCertificate(revokedCertificate.serialHex), {
        ...revokedCertificate,
        status: { status: 'revoked', ...revocation },
      });
      assert.deepEqual(await store.certificateStatus(ISSUER, revokedCertificate.serialHex), {
        status: 'revoked',
        ...revocation,
      });
      assert.deepEqual(await store.revokedCertificates(ISSUER), [
        { serialHex: revokedCertificate.serialHex, ...revocation },
      ]);
      for (const expected of outbox) {
        const got = (await store.getOutbox(expected.id))!;
        assert.deepEqual(
          {
            id: got.id,
            topic: got.topic,
            payload: got.payload,
            state: got.state,
            attempts: got.attempts,
            lastError: got.lastError,
          },
          expected,
        );
      }
      assert.deepEqual(await store.outboxCounts('mediation'), { pending: 1, queued: 0, delivered: 1, failed: 0 });
    });

    it('goes on working after the migration, and a second open migrates nothing', async () => {
      const location = await factory.location();
      const store = await open(location);
      const later = signing('txn-release-0.1', { createdAt: new Date('2026-11-01T10:00:00.123Z') }); // same time: insertion order decides
      await store.recordSigning({
        ...later,
        outbox: [{ id: 'ref-after-migration', topic: 'mediation', payload: { n: 3 } }],
      });
      assert.equal(await store.markOutbox('ref-release-1', 'queued', undefined, ['pending']), true);
      assert.equal(
        await store.markOutbox('ref-release-2', 'queued', undefined, ['pending', 'queued']),
        false,
        'a delivered entry stays delivered',
      );
      await store.close();
      const again = await open(location);
      assert.deepEqual(await again.getTransaction('txn-release-0.1'), [...transactions, later.transaction]);
      assert.deepEqual(
        (await again.outboxPending('mediation', 10)).map((e) => e.id),
        ['ref-after-migration'],
      );
      assert.deepEqual(await again.outboxCounts('mediation'), { pending: 1, queued: 1, delivered: 1, failed: 0 });
    });
  });
}
