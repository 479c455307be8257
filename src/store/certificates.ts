/**
 * The certificates we issued and their status: what our OCSP responder (RFC 6960) and CRLs (RFC 5280) answer
 * from. signDoc's certificate lands in its evidence write (evidence.ts); the TSA's and OCSP responder's own
 * certificates are added on their own.
 */
import { sql, type Insertable, type Selectable } from 'kysely';
import type { StoreAccess } from './access.ts';
import type { Statement } from './group-commit.ts';
import { encodeEntry } from './journal.ts';
import { columns, prepare } from './prepared.ts';
import { checkCertificate, checkRevocationReason } from './records.ts';
import type { CertificatesTable } from './schema.ts';
import type { CertificateStatus, IssuedCertificate, RevocationReason, Store, StoredCertificate } from './types.ts';

type CertificateRow = Selectable<CertificatesTable>;

const CERTIFICATE_COLUMNS = [
  'serial_hex',
  'issuer_key_id',
  'subject',
  'not_before',
  'not_after',
  'issued_at',
  'txn',
  'der',
  'status',
] as const;

export type CertificateMethods = Pick<
  Store,
  'addCertificate' | 'certificateStatus' | 'getCertificate' | 'revokeCertificate' | 'revokedCertificates'
>;

export interface Certificates {
  /** the statement that adds an issued certificate (good), for a write of its own or signDoc's evidence */
  insert(certificate: IssuedCertificate): Statement;
  readonly methods: CertificateMethods;
}

function statusOf(row: Pick<CertificateRow, 'status' | 'revoked_at' | 'revocation_reason'>): CertificateStatus {
  return row.status === 'revoked'
    ? { status: 'revoked', revokedAt: new Date(row.revoked_at!), reason: row.revocation_reason! }
    : { status: 'good' };
}

function toCertificate(row: CertificateRow): StoredCertificate {
  return {
    serialHex: row.serial_hex,
    issuerKeyId: row.issuer_key_id,
    subject: row.subject,
    notBefore: new Date(row.not_before),
    notAfter: new Date(row.not_after),
    issuedAt: new Date(row.issued_at),
    txn: row.txn,
    der: row.der,
    status: statusOf(row),
  };
}

/** the insert of every signDoc, compiled once (prepared.ts) */
function certificateInsert(a: StoreAccess): (c: IssuedCertificate) => Statement {
  const insert = prepare<Insertable<CertificatesTable>>((p) =>
    a.db.insertInto('certificates').values(columns(p, CERTIFICATE_COLUMNS)),
  );
  return (c) =>
    insert({
      serial_hex: c.serialHex,
      issuer_key_id: c.issuerKeyId,
      subject: c.subject,
      not_before: a.time(c.notBefore),
      not_after: a.time(c.notAfter),
      issued_at: a.time(c.issuedAt),
      txn: c.txn,
      der: c.der,
      status: 'good',
    });
}

/** OCSP's and the CRL's reads: the status of one certificate, the revoked ones of a CA key */
function statusReads(a: StoreAccess): Pick<CertificateMethods, 'certificateStatus' | 'revokedCertificates'> {
  // compiled once: every OCSP response reads it, a B-LT signDoc up to three times
  const status = prepare<{ issuer: string; serial: string }>((p) =>
    a.db
      .selectFrom('certificates')
      .select(['status', 'revoked_at', 'revocation_reason'])
      .where('issuer_key_id', '=', p.issuer)
      .where('serial_hex', '=', p.serial),
  );
  return {
    async certificateStatus(issuerKeyId, serialHex) {
      a.ensureOpen();
      const [row] = await a.read<Pick<CertificateRow, 'status' | 'revoked_at' | 'revocation_reason'>>(
        status({ issuer: issuerKeyId.toLowerCase(), serial: serialHex.toLowerCase() }),
      );
      return row ? statusOf(row) : { status: 'unknown' };
    },
    async revokedCertificates(issuerKeyId) {
      a.ensureOpen();
      const rows = await a.db
        .selectFrom('certificates')
        .select(['serial_hex', 'revoked_at', 'revocation_reason'])
        .where('issuer_key_id', '=', issuerKeyId.toLowerCase())
        .where('status', '=', 'revoked')
        .orderBy('serial_hex')
        .execute();
      return rows.map((r) => ({
        serialHex: r.serial_hex,
        revokedAt: new Date(r.revoked_at!),
        reason: r.revocation_reason!,
      }));
    },
  };
}

/**
 * The journal entry of a revocation, in the revocation's write: inserted only when the certificate now holds
 * this revocation (its time is the entry's recorded_at, so no parameter needs a column type in the SELECT list).
 */
function revocationEntry(a: StoreAccess, serialHex: string, reason: RevocationReason, at: Date) {
  const { body, leafHash } = encodeEntry({
    kind: 'certificate.revoked',
    ref: serialHex,
    at,
    data: { serialHex, reason },
  });
  return a.db
    .insertInto('journal_entries')
    .columns(['kind', 'ref', 'recorded_at', 'body', 'leaf_hash'])
    .expression(
      a.db
        .selectFrom('certificates')
        .select([
          sql<string>`${'certificate.revoked'}`.as('kind'),
          'serial_hex as ref',
          'revoked_at as recorded_at',
          sql<string>`${body}`.as('body'),
          sql<string>`${leafHash}`.as('leaf_hash'),
        ])
        .where('serial_hex', '=', serialHex)
        .where('status', '=', 'revoked')
        .where('revoked_at', '=', a.time(at))
        .where('revocation_reason', '=', reason),
    );
}

export function certificates(a: StoreAccess, journaling = true): Certificates {
  const insert = certificateInsert(a);
  return {
    insert,
    methods: {
      ...statusReads(a),
      async addCertificate(certificate) {
        a.ensureOpen();
        checkCertificate(certificate);
        await a.write([insert(certificate)]);
      },
      async getCertificate(serialHex) {
        a.ensureOpen();
        const row = await a.db
          .selectFrom('certificates')
          .selectAll()
          .where('serial_hex', '=', serialHex.toLowerCase())
          .executeTakeFirst();
        return row ? toCertificate(row) : undefined;
      },
      async revokeCertificate(serialHex, reason, at) {
        a.ensureOpen();
        checkRevocationReason(reason);
        const revoke = a.db
          .updateTable('certificates')
          .set({ status: 'revoked', revoked_at: a.time(at), revocation_reason: reason })
          .where('serial_hex', '=', serialHex.toLowerCase())
          .where('status', '=', 'good'); // the first revocation stays
        const [changed] = await a.write(
          journaling ? [revoke, revocationEntry(a, serialHex.toLowerCase(), reason, at)] : [revoke],
        );
        return changed === 1;
      },
    },
  };
}
