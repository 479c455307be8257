/**
 * The evidence and certificate store (DESIGN: store/), one interface with two implementations: embedded
 * SQLite (default, one file in the data directory) and PostgreSQL (several instances sharing the load).
 * It never holds a private key or an access token.
 *
 * Writes that back a signature happen before the signature leaves (spec 5.13, issue "trust and evidence"):
 * recordSigning writes the transaction, the issued certificate and (issue "mediation") the outbox record in
 * one database transaction; if it fails, signDoc fails cleanly and nothing is half-written.
 */

export type RevocationReason =
  | 'unspecified'
  | 'keyCompromise'
  | 'cACompromise'
  | 'affiliationChanged'
  | 'superseded'
  | 'cessationOfOperation'
  | 'certificateHold'
  | 'privilegeWithdrawn';

export interface IssuedCertificate {
  /** serial number: lowercase hex of the DER INTEGER content bytes */
  readonly serialHex: string;
  /** the issuing CA's key identifier (SHA-1 of its subjectPublicKey, = OCSP CertID issuerKeyHash), lowercase hex */
  readonly issuerKeyId: string;
  readonly subject: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
  readonly issuedAt: Date;
  readonly txn: string | null;
  readonly der: Buffer;
}

export type CertificateStatus =
  | { readonly status: 'good' }
  | { readonly status: 'revoked'; readonly revokedAt: Date; readonly reason: RevocationReason }
  | { readonly status: 'unknown' };

export interface SigningTransaction {
  readonly txn: string;
  readonly iss: string;
  readonly sub: string;
  readonly clientId: string;
  readonly clientState: string;
  /** the signed introspection response exactly as received (evidence) */
  readonly introspectionJwt: string;
  readonly hashAlgorithmOid: string;
  /** Base64 digests, request order */
  readonly hashes: readonly string[];
  readonly signatureFormat: string;
  readonly conformanceLevel: string;
  readonly certificateSerialHex: string;
  readonly createdAt: Date;
}

/** A record waiting for delivery to some service (mediation records, notifications). */
export interface OutboxEntry {
  readonly id: string;
  readonly topic: string;
  readonly payload: unknown;
  readonly createdAt: Date;
  readonly attempts: number;
  readonly state: 'pending' | 'queued' | 'delivered' | 'failed';
  readonly lastError: string | null;
}

export interface NewOutboxEntry {
  /** unique id, e.g. the mediation reference_id; adding an existing id is a no-op */
  readonly id: string;
  readonly topic: string;
  readonly payload: unknown;
}

export interface Store {
  /** everything that backs one signDoc answer, atomically */
  recordSigning(input: { transaction: SigningTransaction; certificate: IssuedCertificate; outbox?: readonly NewOutboxEntry[] }): Promise<void>;
  getTransaction(txn: string): Promise<SigningTransaction[]>;
  certificateStatus(issuerKeyId: string, serialHex: string): Promise<CertificateStatus>;
  getCertificate(serialHex: string): Promise<IssuedCertificate | undefined>;
  revokeCertificate(serialHex: string, reason: RevocationReason, at: Date): Promise<boolean>;
  revokedCertificates(issuerKeyId: string): Promise<{ serialHex: string; revokedAt: Date; reason: RevocationReason }[]>;
  // outbox (mediation and notification delivery)
  addOutbox(entries: readonly NewOutboxEntry[]): Promise<void>;
  outboxPending(topic: string, limit: number): Promise<OutboxEntry[]>;
  markOutbox(id: string, state: OutboxEntry['state'], error?: string): Promise<void>;
  outboxCounts(topic: string): Promise<Record<OutboxEntry['state'], number>>;
  /** readiness: the database answers */
  ping(): Promise<void>;
  close(): Promise<void>;
}
