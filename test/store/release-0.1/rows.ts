/**
 * The rows of the release-0.1 store fixtures (the store as released in fdcfad6: schema_version 2, one SQL
 * dialect per driver). `qtsp.sqlite` was written by that release's own code (generate.ts);
 * `postgres.sql` is that release's PostgreSQL DDL (MIGRATIONS 1 and 2 of its src/store/postgres.ts,
 * verbatim) with the same rows. The migration test opens both with today's store and reads these back.
 */
import type { IssuedCertificate, OutboxEntry, SigningTransaction } from '../../../src/store/types.ts';

export const ISSUER = 'a1b2c3d4e5f60718293a4b5c6d7e8f9012345678';
const t = (iso: string) => new Date(iso);

export const signerCertificate: IssuedCertificate = {
  serialHex: '4a0102030405060708090a0b0c0d0e0f',
  issuerKeyId: ISSUER,
  subject: 'C=DE, GN=Erika, SN=Mustermann, CN=Erika Mustermann',
  notBefore: t('2026-11-01T09:59:00.000Z'),
  notAfter: t('2026-11-01T11:00:00.000Z'),
  issuedAt: t('2026-11-01T10:00:00.123Z'),
  txn: 'txn-release-0.1',
  der: Buffer.from('3003020101', 'hex'),
};

/** a signing recorded without the key source (before schema version 2 it was not kept) */
export const olderCertificate: IssuedCertificate = {
  ...signerCertificate,
  serialHex: '4a1112131415161718191a1b1c1d1e1f',
  issuedAt: t('2026-10-31T08:00:00.456Z'),
  der: Buffer.from('3003020102', 'hex'),
};

/** a TSA certificate (no txn), revoked */
export const revokedCertificate: IssuedCertificate = {
  ...signerCertificate,
  serialHex: '4b02',
  subject: 'CN=Sandbox TSA',
  txn: null,
  der: Buffer.from('3003020103', 'hex'),
};
export const revocation = { revokedAt: t('2026-11-02T00:00:00.000Z'), reason: 'keyCompromise' as const };

export const transactions: SigningTransaction[] = [
  {
    txn: 'txn-release-0.1',
    iss: 'https://bank.sandbox.localhost',
    sub: 'user-4711',
    clientId: 'rp-1',
    clientState: 'active',
    introspectionJwt: 'eyJhbGciOiJSUzI1NiJ9.eyJ0eG4iOiJ0eG4tcmVsZWFzZS0wLjEifQ.c2ln',
    hashAlgorithmOid: '2.16.840.1.101.3.4.2.1',
    hashes: ['bWFkZSB1cCBoYXNoIDEgKDMyIGJ5dGVzKSAuLi4uLi4=', 'bWFkZSB1cCBoYXNoIDIgKDMyIGJ5dGVzKSAuLi4uLi4='],
    signatureFormat: 'C',
    conformanceLevel: 'AdES-B-B',
    keySource: null,
    keyCustody: null,
    certificateSerialHex: olderCertificate.serialHex,
    createdAt: t('2026-10-31T08:00:00.456Z'),
  },
  {
    txn: 'txn-release-0.1',
    iss: 'https://bank.sandbox.localhost',
    sub: 'user-4711',
    clientId: 'rp-1',
    clientState: 'active',
    introspectionJwt: 'eyJhbGciOiJSUzI1NiJ9.eyJ0eG4iOiJ0eG4tcmVsZWFzZS0wLjEifQ.c2lnMg',
    hashAlgorithmOid: '2.16.840.1.101.3.4.2.1',
    hashes: ['bWFkZSB1cCBoYXNoIDMgKDMyIGJ5dGVzKSAuLi4uLi4='],
    signatureFormat: 'P',
    conformanceLevel: 'AdES-B-T',
    keySource: 'archive 40086f43360c18039c12f103cc000256989e31ed',
    keyCustody: null,
    certificateSerialHex: signerCertificate.serialHex,
    createdAt: t('2026-11-01T10:00:00.123Z'),
  },
];

export const outbox: Pick<OutboxEntry, 'id' | 'topic' | 'payload' | 'state' | 'attempts' | 'lastError'>[] = [
  {
    id: 'ref-release-1',
    topic: 'mediation',
    payload: { type: 'remote_signature_creation', text: 'Ünïcödé ✓' },
    state: 'pending',
    attempts: 0,
    lastError: null,
  },
  {
    id: 'ref-release-2',
    topic: 'mediation',
    payload: { n: 2 },
    state: 'delivered',
    attempts: 1,
    lastError: 'mediation service answered 503',
  },
];
