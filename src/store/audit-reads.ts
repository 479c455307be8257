/**
 * The rows the journal audit (journal/audit-rows.ts) compares with the sealed entries: what OCSP and CRLs
 * answer from (revoked certificates), the signings an export hands out (transactions and their certificates),
 * and the signatures a retry or an export hands out (kept documents). Reads only; documents come in pages.
 */
import { sql } from 'kysely';
import type { StoreAccess } from './access.ts';
import type { AuditReads, KeptDocument, RevokedCertificate } from './types.ts';

const DOCUMENT_PAGE = 500;

type DocumentKey = readonly [string, string, string, string];

/** one page of documents holding a signature, after `after` in key order */
async function documentPage(a: StoreAccess, after: DocumentKey | undefined): Promise<KeptDocument[]> {
  let query = a.db
    .selectFrom('signed_documents')
    .select(['iss', 'txn', 'hash_alg', 'hash', 'signature', 'revocation', 'signed_at'])
    .where('signature', 'is not', null);
  if (after)
    query = query.where(({ eb, refTuple, tuple }) =>
      eb(refTuple('iss', 'txn', 'hash_alg', 'hash'), '>', tuple(after[0], after[1], after[2], after[3])),
    );
  // one orderBy per column: Kysely's orderBy(array) is deprecated and says so on stdout, into `--json` output
  const rows = await query
    .orderBy('iss')
    .orderBy('txn')
    .orderBy('hash_alg')
    .orderBy('hash')
    .limit(DOCUMENT_PAGE)
    .execute();
  return rows.map((r) => ({
    iss: r.iss,
    txn: r.txn,
    hashAlgorithmOid: r.hash_alg,
    hash: r.hash,
    signature: r.signature!,
    revocation: r.revocation,
    signedAt: r.signed_at === null ? null : new Date(r.signed_at),
  }));
}

export function auditReads(a: StoreAccess): AuditReads {
  return {
    async revoked() {
      a.ensureOpen();
      const rows = await a.db
        .selectFrom('certificates')
        .select(['serial_hex', 'revoked_at', 'revocation_reason'])
        .where('status', '=', 'revoked')
        .orderBy('serial_hex')
        .execute();
      return rows.map(
        (r): RevokedCertificate => ({
          serialHex: r.serial_hex,
          revokedAt: new Date(r.revoked_at!),
          reason: r.revocation_reason!,
        }),
      );
    },
    async signingSerials() {
      a.ensureOpen();
      const transactions = await a.db
        .selectFrom('signing_transactions')
        .select(['certificate_serial_hex as serial', 'created_at as at'])
        .execute();
      const certificates = await a.db
        .selectFrom('certificates')
        .select(['serial_hex as serial', 'issued_at as at'])
        .where('txn', 'is not', null)
        .execute();
      const of = (table: 'signing_transactions' | 'certificates') => (r: { serial: string; at: unknown }) => ({
        table,
        serialHex: r.serial,
        at: new Date(r.at as number | string | Date),
      });
      return [...transactions.map(of('signing_transactions')), ...certificates.map(of('certificates'))];
    },
    async *keptDocuments() {
      let after: DocumentKey | undefined;
      for (;;) {
        a.ensureOpen();
        const page = await documentPage(a, after);
        yield* page;
        const last = page.at(-1);
        if (!last || page.length < DOCUMENT_PAGE) return;
        after = [last.iss, last.txn, last.hashAlgorithmOid, last.hash];
      }
    },
    async predatesJournal() {
      a.ensureOpen();
      try {
        await sql`SELECT 1 FROM schema_version LIMIT 1`.execute(a.db); // found on the search path (PostgreSQL)
        return true;
      } catch {
        return false; // no such table: made after release 0.1, with the journal
      }
    },
  };
}
