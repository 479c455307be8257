/**
 * Building store records from what the pipeline holds, and the checks both implementations run before they
 * write. Kept apart from the drivers so SQLite and PostgreSQL accept and refuse exactly the same input.
 */
import { X509Certificate } from 'node:crypto';
import type {
  IssuedCertificate,
  KeptSignature,
  NewOutboxEntry,
  RecordSigningInput,
  RevocationReason,
} from './types.ts';
import { REVOCATION_REASONS } from './types.ts';

const HEX = /^[0-9a-f]+$/;

/**
 * The store's record of a certificate we issued. The subject text is what OpenSSL prints (node:crypto
 * X509Certificate, lines joined by ", "), so it matches what `openssl x509 -subject` shows an auditor. The
 * signDoc path passes `subjectText` from the builder (ca/x509.ts nameText, tested against OpenSSL) instead
 * of parsing the certificate it just built; without it, OpenSSL formats it here.
 */
export function issuedCertificateRecord(input: {
  der: Buffer;
  serialHex: string;
  notBefore: Date;
  notAfter: Date;
  issuerKeyId: Buffer;
  txn: string | null;
  issuedAt: Date;
  subjectText?: string | undefined;
}): IssuedCertificate {
  const subject = input.subjectText ?? new X509Certificate(input.der).subject.split('\n').join(', ');
  return {
    serialHex: input.serialHex,
    issuerKeyId: input.issuerKeyId.toString('hex'),
    subject,
    notBefore: input.notBefore,
    notAfter: input.notAfter,
    issuedAt: input.issuedAt,
    txn: input.txn,
    der: input.der,
  };
}

export class StoreInputError extends TypeError {
  override name = 'StoreInputError';
}

function check(ok: boolean, what: string): void {
  if (!ok) throw new StoreInputError(`store: ${what}`);
}

export function checkCertificate(c: IssuedCertificate): void {
  check(HEX.test(c.serialHex), 'certificate serialHex must be lowercase hex');
  check(HEX.test(c.issuerKeyId), 'certificate issuerKeyId must be lowercase hex');
  check(c.der.length > 0, 'certificate der is empty');
}

export function checkRecordSigning(input: RecordSigningInput): void {
  checkCertificate(input.certificate);
  const t = input.transaction;
  check(
    t.certificateSerialHex === input.certificate.serialHex,
    'transaction.certificateSerialHex differs from certificate.serialHex',
  );
  check(input.certificate.txn === t.txn, 'certificate.txn differs from transaction.txn');
  check(t.txn !== '' && t.introspectionJwt !== '', 'transaction needs a txn and the introspection JWT');
}

export function checkRevocationReason(reason: RevocationReason): void {
  check(REVOCATION_REASONS.includes(reason), `unknown revocation reason ${String(reason)}`);
}

/** JSON text of an outbox payload (undefined becomes null: the column is NOT NULL) */
export function outboxPayloadJson(entry: NewOutboxEntry): string {
  return JSON.stringify(entry.payload ?? null);
}

/**
 * The revocationInfo of kept signatures, each distinct OCSP response and CRL once (Base64), or null without any:
 * the signatures of one response each keep that response's, which B-LT repeats in every signature too.
 */
export function keptRevocationInfo(signatures: readonly KeptSignature[]): { ocsp: string[]; crl: string[] } | null {
  const kept = signatures.flatMap((s) => (s.revocation ? [s.revocation] : []));
  if (kept.length === 0) return null;
  const unique = (list: readonly string[]) => [...new Set(list)];
  return { ocsp: unique(kept.flatMap((r) => r.ocsp)), crl: unique(kept.flatMap((r) => r.crl)) };
}
