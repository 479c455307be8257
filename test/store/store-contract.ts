/**
 * The one test suite every Store implementation must pass (SQLite and PostgreSQL run the very same tests).
 * `registerStoreContract` registers node:test tests for a factory; the driver's test file calls it.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { StoreInputError } from '../../src/store/records.ts';
import type {
  DocumentClaim,
  IssuedCertificate,
  NewOutboxEntry,
  RecordSigningInput,
  SigningTransaction,
  Store,
} from '../../src/store/types.ts';

export interface StoreFactory {
  /** a new, empty place for a store (a file path, a database schema URL) */
  location(): Promise<string>;
  /** opens (creating or migrating) the store at `location`; may be called again on the same location */
  open(location: string): Promise<Store>;
}

const ISSUER = 'a1b2c3d4e5f60718293a4b5c6d7e8f9012345678';
const OTHER_ISSUER = '00112233445566778899aabbccddeeff00112233';
const JWT = 'eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJpc3MiOiJodHRwczovL2Jhbmsuc2FuZGJveCIsInR4biI6InQxIn0.c2lnbmF0dXJl';

/** The rows of kysely_migration in a store this release made or migrated, in order: both drivers apply them all. */
export const MIGRATIONS = [
  { name: '0001_certificates_transactions_outbox' },
  { name: '0002_signing_key_source' },
  { name: '0003_health_probe' },
  { name: '0004_signing_key_custody' },
  { name: '0005_signed_documents' },
  { name: '0006_outbox_queued_since' },
  { name: '0007_retention' },
  { name: '0008_journal' },
  { name: '0009_journal_renewals' },
  { name: '0010_journal_second_timestamp' },
  { name: '0011_journal_groups' },
] as const;

/** whole milliseconds, as both drivers keep them */
function now(offsetMs = 0): Date {
  return new Date(Date.now() + offsetMs);
}

export function certificate(txn: string | null, issuerKeyId = ISSUER): IssuedCertificate {
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x40;
  return {
    serialHex: serial.toString('hex'),
    issuerKeyId,
    subject: 'C=DE, GN=Erika, SN=Mustermann, CN=Erika Mustermann',
    notBefore: now(-60_000),
    notAfter: now(3_600_000),
    issuedAt: now(),
    txn,
    der: randomBytes(480), // the store keeps DER as opaque bytes
  };
}

/** The claim a signDoc request makes on documents of a recorded signing (its first hash unless told). */
export function claimFor(
  input: RecordSigningInput,
  hashes: readonly string[] = [input.transaction.hashes[0]!],
  extra: Partial<DocumentClaim> = {},
): DocumentClaim {
  const t = input.transaction;
  return {
    iss: t.iss,
    txn: t.txn,
    hashAlgorithmOid: t.hashAlgorithmOid,
    hashes: [...hashes],
    claimId: randomUUID(),
    requestKey: 'C AdES-B-B ECDSA-P256',
    claimedAt: new Date(),
    ...extra,
  };
}

export function signing(txn: string = randomUUID(), extra: Partial<SigningTransaction> = {}): RecordSigningInput {
  const { keySource = 'archive 40086f43360c18039c12f103cc000256989e31ed', ...rest } = extra;
  const cert = certificate(txn);
  return {
    certificate: cert,
    transaction: {
      txn,
      iss: 'https://bank.sandbox.localhost',
      sub: 'user-4711',
      clientId: 'rp-1',
      clientState: 'active',
      introspectionJwt: JWT + Buffer.from(txn).toString('base64url'), // distinct per txn, still three parts
      hashAlgorithmOid: '2.16.840.1.101.3.4.2.1',
      hashes: [randomBytes(32).toString('base64'), randomBytes(32).toString('base64')],
      signatureFormat: 'C',
      conformanceLevel: 'AdES-B-B',
      keySource,
      keyCustody: 'pkcs11:qtsp-token:0f2a6c31d4e5b7a8',
      certificateSerialHex: cert.serialHex,
      createdAt: now(),
      ...rest,
    },
  };
}

/** Opens stores of `factory` (a fresh location unless given) for one describe block, and closes them after it. */
export function storeOpener(factory: StoreFactory): (location?: string) => Promise<Store> {
  const opened: Store[] = [];
  after(async () => {
    for (const s of opened) await s.close();
  });
  return async (location) => {
    const store = await factory.open(location ?? (await factory.location()));
    opened.push(store);
    return store;
  };
}

export function registerStoreContract(name: string, factory: StoreFactory): void {
  describe(`Store contract: ${name}`, () => {
    const open = storeOpener(factory);

    it('a new store knows nothing', async () => {
      const store = await open();
      assert.deepEqual(await store.getTransaction('nope'), []);
      assert.deepEqual(await store.certificateStatus(ISSUER, '4a'), { status: 'unknown' });
      assert.equal(await store.getCertificate('4a'), undefined);
      assert.deepEqual(await store.revokedCertificates(ISSUER), []);
      assert.deepEqual(await store.outboxCounts('mediation'), { pending: 0, queued: 0, delivered: 0, failed: 0 });
      assert.equal(await store.getOutbox('x'), undefined);
      await store.ping();
    });

    it('recordSigning keeps the transaction and the certificate exactly', async () => {
      const store = await open();
      const input = signing('txn-exact', { hashes: ['AAAA', 'BBBB', 'CCCC'], clientState: 'demo' });
      await store.recordSigning(input);
      assert.deepEqual(await store.getTransaction('txn-exact'), [input.transaction]);
      const stored = await store.getCertificate(input.certificate.serialHex);
      assert.deepEqual(stored, { ...input.certificate, status: { status: 'good' } });
      assert.ok(Buffer.isBuffer(stored!.der));
    });

    it('one txn may back several signings, returned oldest first', async () => {
      const store = await open();
      const later = signing('txn-many', { createdAt: now(1000) });
      const earlier = signing('txn-many', { createdAt: now() });
      await store.recordSigning(later);
      await store.recordSigning(earlier);
      await store.recordSigning(signing('txn-other'));
      const got = await store.getTransaction('txn-many');
      assert.deepEqual(
        got.map((t) => t.certificateSerialHex),
        [earlier.certificate.serialHex, later.certificate.serialHex],
      );
    });

    it('certificate status: unknown, good, revoked; by issuer key and serial, any hex case', async () => {
      const store = await open();
      const input = signing();
      const serial = input.certificate.serialHex;
      await store.recordSigning(input);
      assert.deepEqual(await store.certificateStatus(ISSUER, serial), { status: 'good' });
      assert.deepEqual(await store.certificateStatus(ISSUER.toUpperCase(), serial.toUpperCase()), { status: 'good' });
      assert.deepEqual(
        await store.certificateStatus(OTHER_ISSUER, serial),
        { status: 'unknown' },
        'another CA key never issued it',
      );
      assert.deepEqual(await store.certificateStatus(ISSUER, serial.slice(2)), { status: 'unknown' });
      const at = new Date(Math.floor(Date.now() / 1000) * 1000 - 5000);
      assert.equal(await store.revokeCertificate(serial, 'keyCompromise', at), true);
      assert.deepEqual(await store.certificateStatus(ISSUER, serial), {
        status: 'revoked',
        revokedAt: at,
        reason: 'keyCompromise',
      });
      assert.deepEqual((await store.getCertificate(serial))!.status, {
        status: 'revoked',
        revokedAt: at,
        reason: 'keyCompromise',
      });
    });

    it('revocation is permanent and the first one stays; unknown serials and bad reasons are refused', async () => {
      const store = await open();
      const input = signing();
      const serial = input.certificate.serialHex;
      await store.recordSigning(input);
      const first = now(-1000);
      assert.equal(await store.revokeCertificate(serial, 'superseded', first), true);
      assert.equal(await store.revokeCertificate(serial, 'keyCompromise', now()), false);
      assert.deepEqual(await store.certificateStatus(ISSUER, serial), {
        status: 'revoked',
        revokedAt: first,
        reason: 'superseded',
      });
      assert.equal(await store.revokeCertificate('7f00', 'unspecified', now()), false);
      const other = signing();
      await store.recordSigning(other);
      await assert.rejects(
        store.revokeCertificate(other.certificate.serialHex, 'removeFromCRL' as never, now()),
        StoreInputError,
      );
      assert.deepEqual(await store.certificateStatus(ISSUER, other.certificate.serialHex), { status: 'good' });
    });

    it("revokedCertificates lists one CA key's revoked certificates, by serial", async () => {
      const store = await open();
      const mine = [signing(), signing(), signing()];
      for (const s of mine) await store.recordSigning(s);
      const foreign = certificate(null, OTHER_ISSUER);
      await store.addCertificate(foreign);
      const t = now(-2000);
      await store.revokeCertificate(mine[0]!.certificate.serialHex, 'keyCompromise', t);
      await store.revokeCertificate(mine[2]!.certificate.serialHex, 'cessationOfOperation', t);
      await store.revokeCertificate(foreign.serialHex, 'unspecified', t);
      const expected = [
        { serialHex: mine[0]!.certificate.serialHex, revokedAt: t, reason: 'keyCompromise' },
        { serialHex: mine[2]!.certificate.serialHex, revokedAt: t, reason: 'cessationOfOperation' },
      ].sort((a, b) => (a.serialHex < b.serialHex ? -1 : 1));
      assert.deepEqual(await store.revokedCertificates(ISSUER), expected);
      assert.deepEqual(await store.revokedCertificates(OTHER_ISSUER), [
        { serialHex: foreign.serialHex, revokedAt: t, reason: 'unspecified' },
      ]);
    });

    it('addCertificate keeps certificates issued outside signDoc (no txn); a serial is issued once', async () => {
      const store = await open();
      const tsa = certificate(null);
      await store.addCertificate(tsa);
      assert.deepEqual(await store.certificateStatus(ISSUER, tsa.serialHex), { status: 'good' });
      assert.equal((await store.getCertificate(tsa.serialHex))!.txn, null);
      await assert.rejects(store.addCertificate({ ...tsa, subject: 'CN=impostor' }));
      assert.equal((await store.getCertificate(tsa.serialHex))!.subject, tsa.subject);
      await assert.rejects(store.addCertificate({ ...certificate(null), serialHex: 'XYZ' }), StoreInputError);
    });

    it('atomic: a failing outbox insert rolls back the transaction row and the certificate', async () => {
      const store = await open();
      const input = signing('txn-atomic');
      const good: NewOutboxEntry = { id: 'ref-atomic-1', topic: 'mediation', payload: { n: 1 } };
      // the database refuses an empty topic (CHECK constraint): the failure happens after the other rows were inserted
      const bad: NewOutboxEntry = { id: 'ref-atomic-2', topic: '', payload: { n: 2 } };
      await assert.rejects(store.recordSigning({ ...input, outbox: [good, bad] }));
      assert.deepEqual(await store.getTransaction('txn-atomic'), []);
      assert.equal(await store.getCertificate(input.certificate.serialHex), undefined);
      assert.deepEqual(await store.certificateStatus(ISSUER, input.certificate.serialHex), { status: 'unknown' });
      assert.equal(await store.getOutbox('ref-atomic-1'), undefined);
      // and the same signing goes through once the outbox is right
      await store.recordSigning({ ...input, outbox: [good] });
      assert.equal((await store.getTransaction('txn-atomic')).length, 1);
      assert.equal((await store.getOutbox('ref-atomic-1'))!.state, 'pending');
    });

    it('atomic: a serial issued twice fails the whole second signing', async () => {
      const store = await open();
      const first = signing('txn-first');
      await store.recordSigning(first);
      const second = signing('txn-second');
      const clash: RecordSigningInput = {
        certificate: { ...second.certificate, serialHex: first.certificate.serialHex },
        transaction: { ...second.transaction, certificateSerialHex: first.certificate.serialHex },
        outbox: [{ id: 'ref-clash', topic: 'mediation', payload: {} }],
      };
      await assert.rejects(store.recordSigning(clash));
      assert.deepEqual(await store.getTransaction('txn-second'), []);
      assert.equal(await store.getOutbox('ref-clash'), undefined);
      assert.equal((await store.getCertificate(first.certificate.serialHex))!.txn, 'txn-first');
    });

    it('refuses inconsistent input before writing anything', async () => {
      const store = await open();
      const input = signing('txn-mismatch');
      await assert.rejects(
        store.recordSigning({ ...input, transaction: { ...input.transaction, certificateSerialHex: '4b' } }),
        StoreInputError,
      );
      await assert.rejects(
        store.recordSigning({ ...input, certificate: { ...input.certificate, txn: 'other' } }),
        StoreInputError,
      );
      assert.deepEqual(await store.getTransaction('txn-mismatch'), []);
    });

    it('outbox lifecycle: pending in order, queued, failed attempts, delivered, counts', async () => {
      const store = await open();
      const payload = {
        type: 'remote_signature_creation',
        count: 2,
        nested: { list: [1, 'zwei', null], text: 'Ünïcödé ✓' },
      };
      await store.recordSigning({ ...signing(), outbox: [{ id: 'ref-1', topic: 'mediation', payload }] });
      await store.addOutbox([
        { id: 'ref-2', topic: 'mediation', payload: { n: 2 } },
        { id: 'ref-3', topic: 'mediation', payload: { n: 3 } },
        { id: 'mail-1', topic: 'notification', payload: 'text' },
      ]);
      const pending = await store.outboxPending('mediation', 10);
      assert.deepEqual(
        pending.map((e) => e.id),
        ['ref-1', 'ref-2', 'ref-3'],
      );
      assert.deepEqual(pending[0]!.payload, payload);
      assert.equal(pending[0]!.attempts, 0);
      assert.equal(pending[0]!.lastError, null);
      assert.deepEqual(
        (await store.outboxPending('mediation', 2)).map((e) => e.id),
        ['ref-1', 'ref-2'],
      );
      assert.deepEqual(
        (await store.outboxPending('notification', 10)).map((e) => e.payload),
        ['text'],
      );

      // adding an existing id changes nothing
      await store.addOutbox([{ id: 'ref-1', topic: 'mediation', payload: { replaced: true } }]);
      assert.deepEqual((await store.getOutbox('ref-1'))!.payload, payload);

      assert.equal(await store.markOutbox('ref-1', 'queued'), true);
      assert.equal(await store.markOutbox('ref-2', 'pending', 'mediation service answered 503'), true);
      assert.equal(await store.markOutbox('ref-2', 'pending', 'connection refused'), true);
      assert.equal(await store.markOutbox('ref-3', 'failed', 'refused: duplicate reference_id'), true);
      assert.equal(await store.markOutbox('nope', 'delivered'), false);
      // compare-and-set: a failed entry is not turned into queued by a relay that only moves pending/queued ones
      assert.equal(await store.markOutbox('ref-3', 'queued', undefined, ['pending', 'queued']), false);
      assert.equal((await store.getOutbox('ref-3'))!.state, 'failed');
      assert.deepEqual(
        (await store.outboxPending('mediation', 10)).map((e) => e.id),
        ['ref-2'],
      );
      // a queued entry not touched since `queuedBefore` is listed again (its job may be lost); a recent one is not
      assert.deepEqual(
        (await store.outboxPending('mediation', 10, new Date(Date.now() + 60_000))).map((e) => e.id),
        ['ref-1', 'ref-2'],
      );
      assert.deepEqual(
        (await store.outboxPending('mediation', 10, new Date(Date.now() - 60_000))).map((e) => e.id),
        ['ref-2'],
      );
      const retried = (await store.getOutbox('ref-2'))!;
      assert.equal(retried.attempts, 2);
      assert.equal(retried.lastError, 'connection refused');
      assert.ok(retried.updatedAt.getTime() >= retried.createdAt.getTime());
      await store.markOutbox('ref-1', 'delivered');
      await store.markOutbox('ref-2', 'delivered');
      assert.deepEqual(await store.outboxCounts('mediation'), { pending: 0, queued: 0, delivered: 2, failed: 1 });
      assert.deepEqual(await store.outboxCounts('notification'), { pending: 1, queued: 0, delivered: 0, failed: 0 });
      assert.equal((await store.getOutbox('ref-1'))!.attempts, 0);
      await assert.rejects(store.markOutbox('ref-1', 'lost' as never));
    });

    it('markOutboxQueued marks a batch queued in one write; delivered and failed entries stay as they are', async () => {
      const store = await open();
      await store.addOutbox(['q-1', 'q-2', 'q-3', 'q-4'].map((id) => ({ id, topic: 'mediation', payload: { id } })));
      await store.markOutbox('q-3', 'delivered');
      await store.markOutbox('q-4', 'failed', 'refused');
      const before = (await store.getOutbox('q-1'))!.updatedAt.getTime();
      assert.equal(await store.markOutboxQueued(['q-1', 'q-2', 'q-3', 'q-4', 'unknown']), 2);
      assert.deepEqual(
        await Promise.all(['q-1', 'q-2', 'q-3', 'q-4'].map(async (id) => (await store.getOutbox(id))!.state)),
        ['queued', 'queued', 'delivered', 'failed'],
      );
      assert.ok((await store.getOutbox('q-1'))!.updatedAt.getTime() >= before);
      // an ordered write is visible at once, to the relay's next read too
      assert.deepEqual(await store.outboxPending('mediation', 10), []);
      assert.equal(await store.markOutboxQueued(['q-1']), 1); // re-handed queued entries are marked again
      assert.equal(await store.markOutboxQueued([]), 0);
      // recordSigning as an ordered write: visible when it resolves
      const ordered = signing();
      await store.recordSigning(ordered, 'ordered');
      assert.equal((await store.getTransaction(ordered.transaction.txn)).length, 1);
    });

    it('concurrent recordSigning calls all land, and a clashing serial lands once', async () => {
      const store = await open();
      const inputs = Array.from({ length: 40 }, (_, i) => ({
        ...signing(`txn-concurrent-${i % 10}`),
        outbox: [{ id: `ref-c-${i}`, topic: 'mediation', payload: { i } }],
      }));
      await Promise.all(inputs.map((s) => store.recordSigning(s)));
      for (let i = 0; i < 10; i++) assert.equal((await store.getTransaction(`txn-concurrent-${i}`)).length, 4);
      assert.equal((await store.outboxCounts('mediation')).pending, 40);

      const base = signing('txn-race-0');
      const racers = Array.from({ length: 8 }, (_, i) => {
        const s = signing(`txn-race-${i}`);
        return {
          certificate: { ...s.certificate, serialHex: base.certificate.serialHex },
          transaction: { ...s.transaction, certificateSerialHex: base.certificate.serialHex },
        };
      });
      const results = await Promise.allSettled(racers.map((s) => store.recordSigning(s)));
      assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
      const landed = await Promise.all(racers.map((s) => store.getTransaction(s.transaction.txn)));
      assert.equal(landed.flat().length, 1);
    });

    it('keeps everything across close and reopen; a closed store rejects every call', async () => {
      const location = await factory.location();
      const first = await open(location);
      const input = signing('txn-reopen');
      await first.recordSigning({ ...input, outbox: [{ id: 'ref-reopen', topic: 'mediation', payload: 1 }] });
      await first.close();
      await first.close(); // idempotent
      await assert.rejects(first.ping());
      await assert.rejects(first.recordSigning(signing()));
      await assert.rejects(first.getTransaction('txn-reopen'));
      const again = await open(location);
      assert.deepEqual(await again.getTransaction('txn-reopen'), [input.transaction]);
      assert.equal((await again.getOutbox('ref-reopen'))!.payload, 1);
    });
  });
}
