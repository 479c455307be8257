/**
 * The evidence and certificate store, one interface with two implementations: embedded SQLite (default, one
 * file in the data directory) and PostgreSQL (several instances sharing the load). It never holds a private
 * key or an access token.
 *
 * Writes that back a signature happen before the signature leaves (spec 5.13): recordSigning writes the
 * transaction, the issued certificate and the outbox records (mediation, spec 6.2) in one database
 * transaction; if it fails, signDoc fails cleanly and nothing is half-written.
 *
 * Every method rejects (never throws synchronously) when the database fails; callers map that to their own
 * error (signDoc: 503 temporarily_unavailable).
 */

import type { CanonicalValue } from '../util/canonical-json.ts';
import type { Durability } from './group-commit.ts';

/** RFC 5280 5.3.1 CRLReason names (value 7 is unused, removeFromCRL is not a state we keep) */
export type RevocationReason =
  | 'unspecified'
  | 'keyCompromise'
  | 'cACompromise'
  | 'affiliationChanged'
  | 'superseded'
  | 'cessationOfOperation'
  | 'certificateHold'
  | 'privilegeWithdrawn';

export const REVOCATION_REASONS: readonly RevocationReason[] = [
  'unspecified',
  'keyCompromise',
  'cACompromise',
  'affiliationChanged',
  'superseded',
  'cessationOfOperation',
  'certificateHold',
  'privilegeWithdrawn',
];

export interface IssuedCertificate {
  /** serial number: lowercase hex of the DER INTEGER content bytes (= OCSP CertID serialNumber content) */
  readonly serialHex: string;
  /** the issuing CA's key identifier (SHA-1 of its subjectPublicKey, = OCSP CertID issuerKeyHash), lowercase hex */
  readonly issuerKeyId: string;
  /** the subject DN, readable (RFC 4514-like, as OpenSSL prints it) */
  readonly subject: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
  readonly issuedAt: Date;
  /** the AS transaction the certificate was minted for; null for certificates outside signDoc (TSA, OCSP) */
  readonly txn: string | null;
  readonly der: Buffer;
}

/** what the store knows about one certificate, with its current status */
export interface StoredCertificate extends IssuedCertificate {
  readonly status: CertificateStatus;
}

export type CertificateStatus =
  | { readonly status: 'good' }
  | { readonly status: 'revoked'; readonly revokedAt: Date; readonly reason: RevocationReason }
  | { readonly status: 'unknown' };

export interface RevokedCertificate {
  readonly serialHex: string;
  readonly revokedAt: Date;
  readonly reason: RevocationReason;
}

/** One signDoc call that was authorised (one row; an AS txn may back several calls). */
export interface SigningTransaction {
  readonly txn: string;
  readonly iss: string;
  readonly sub: string;
  readonly clientId: string;
  readonly clientState: string;
  /** the signed introspection response exactly as received (evidence, spec 5.9, 5.13) */
  readonly introspectionJwt: string;
  readonly hashAlgorithmOid: string;
  /** Base64 digests, request order; their count is hashes.length */
  readonly hashes: readonly string[];
  readonly signatureFormat: string;
  readonly conformanceLevel: string;
  /**
   * which source vouched for the key of the introspection response (the key archive first, then jwks_uri):
   * "archive <commit>" or "jwks_uri"; null for rows written before this was recorded
   */
  readonly keySource: string | null;
  /**
   * where the signer key lived: "software", or "pkcs11:<token label>:<token serial>" (custody/types.ts
   * describeLocation); null for rows written before this was recorded (software keys then)
   */
  readonly keyCustody: string | null;
  /** the signer certificate minted for this call (its serial is the row's key) */
  readonly certificateSerialHex: string;
  readonly createdAt: Date;
}

export type OutboxState = 'pending' | 'queued' | 'delivered' | 'failed';

/**
 * A record waiting for delivery to some service (mediation records, notifications). States: pending (to be
 * handed over), queued (handed to the delivery queue), delivered, failed (given up). The store does not
 * decide retries; the delivery worker does, with markOutbox.
 */
export interface OutboxEntry {
  readonly id: string;
  readonly topic: string;
  readonly payload: unknown;
  readonly createdAt: Date;
  /** time of the last markOutbox (= createdAt before the first) */
  readonly updatedAt: Date;
  /** failed delivery attempts so far: markOutbox calls that carried an error */
  readonly attempts: number;
  readonly state: OutboxState;
  readonly lastError: string | null;
}

export interface NewOutboxEntry {
  /** unique id, e.g. the mediation reference_id; adding an existing id is a no-op */
  readonly id: string;
  /** non-empty */
  readonly topic: string;
  /** anything JSON can carry; stored as JSON text */
  readonly payload: unknown;
}

export interface RecordSigningInput {
  readonly transaction: SigningTransaction;
  readonly certificate: IssuedCertificate;
  /** records to deliver after the signature (mediation 6.2); written in the same database transaction */
  readonly outbox?: readonly NewOutboxEntry[];
}

/**
 * One request's claim on documents of a consent (signing/once.ts): a document is the key
 * (iss, txn, hashAlgorithmOid, hash); at most one request signs it.
 */
export interface DocumentClaim {
  readonly iss: string;
  readonly txn: string;
  readonly hashAlgorithmOid: string;
  /** Base64 digests, request order, no repeats */
  readonly hashes: readonly string[];
  /** unique per request */
  readonly claimId: string;
  /** what the request asks (format, level, signer algorithm): a retry must ask the same */
  readonly requestKey: string;
  readonly claimedAt: Date;
}

/** A signature returned for a document, kept to be returned again to a retry. */
export interface KeptSignature {
  /** Base64 digest of the document */
  readonly hash: string;
  /** Base64 signature object, as returned */
  readonly signature: string;
  /** the revocationInfo of the response it was returned in */
  readonly revocation: { readonly ocsp: readonly string[]; readonly crl: readonly string[] } | null;
}

/** How keepSignatures learnt that the signatures are kept. */
export interface KeepOutcome {
  /** the write failed (this error) with its answer lost, and a read afterwards found it committed */
  readonly lostAnswer?: string;
}

/** `index`: position in the claim's hashes of the document the outcome is about */
export type ClaimOutcome =
  | { readonly kind: 'claimed' }
  | { readonly kind: 'signed'; readonly signatures: readonly KeptSignature[] }
  | { readonly kind: 'in_progress'; readonly index: number }
  | { readonly kind: 'other_request'; readonly index: number; readonly requestKey: string }
  | { readonly kind: 'mixed'; readonly index: number };

/** A document signed (or still claimed) under a consent (documents.ts), as evidence show and export list it. */
export interface StoredDocument {
  readonly iss: string;
  readonly txn: string;
  readonly hashAlgorithmOid: string;
  /** Base64 digest of the document */
  readonly hash: string;
  /** format, level and signer algorithm the request asked */
  readonly requestKey: string;
  readonly claimedAt: Date;
  /** Base64 signature object returned; null while only claimed */
  readonly signature: string | null;
  readonly revocation: KeptSignature['revocation'];
  readonly signedAt: Date | null;
}

/** A document holding a signature, as the journal audit reads it (revocation: the JSON text as stored). */
export interface KeptDocument {
  readonly iss: string;
  readonly txn: string;
  readonly hashAlgorithmOid: string;
  readonly hash: string;
  readonly signature: string;
  readonly revocation: string | null;
  readonly signedAt: Date | null;
}

/** The rows the journal audit checks against the sealed entries (journal/audit-rows.ts). */
export interface AuditReads {
  /** every certificate revoked (what OCSP and the CRLs answer from) */
  revoked(): Promise<RevokedCertificate[]>;
  /** a row per signing transaction and per certificate minted for signDoc: its serial and time */
  signingSerials(): Promise<
    { readonly table: 'signing_transactions' | 'certificates'; readonly serialHex: string; readonly at: Date }[]
  >;
  /** every document holding a signature, read in pages */
  keptDocuments(): AsyncIterable<KeptDocument>;
  /** whether release 0.1 made this store (its `schema_version` table), before the journal existed */
  predatesJournal(): Promise<boolean>;
}

/** Where a page of signings ended: the next page starts after it (created_at, then serial). */
export interface SigningCursor {
  readonly createdAt: Date;
  readonly certificateSerialHex: string;
}

/** One batch of the evidence purge (retention.ts): how many signings it read and deleted, and where it ended. */
export interface EvidencePurge {
  readonly read: number;
  readonly deleted: number;
  /** the last signing read; undefined when the batch read none */
  readonly last: SigningCursor | undefined;
}

export interface Store {
  /** which implementation ('sqlite' or 'postgres'), for logs and readiness reasons */
  readonly driver: 'sqlite' | 'postgres';
  /**
   * everything that backs one signDoc answer, atomically: all rows or none. Durable when it resolves, unless
   * `durability` is 'ordered' (group-commit.ts): then committed and visible at once, and on disk with the next
   * durable write (signDoc: keepSignatures, before any signature leaves)
   */
  recordSigning(input: RecordSigningInput, durability?: Durability): Promise<void>;
  /** every signing recorded for an AS txn, oldest first; [] when none */
  getTransaction(txn: string): Promise<SigningTransaction[]>;
  /**
   * a certificate issued outside signDoc (TSA, OCSP responder) that our OCSP/CRL must know; fails if the serial
   * exists
   */
  addCertificate(certificate: IssuedCertificate): Promise<void>;
  /** OCSP (RFC 6960 2.2): good / revoked / unknown (never issued by that CA key) */
  certificateStatus(issuerKeyId: string, serialHex: string): Promise<CertificateStatus>;
  getCertificate(serialHex: string): Promise<StoredCertificate | undefined>;
  /** true when this call revoked it; false when unknown or already revoked (the first revocation stays) */
  revokeCertificate(serialHex: string, reason: RevocationReason, at: Date): Promise<boolean>;
  /** CRL entries of one CA key, by serial */
  revokedCertificates(issuerKeyId: string): Promise<RevokedCertificate[]>;
  // outbox (mediation and notification delivery)
  addOutbox(entries: readonly NewOutboxEntry[]): Promise<void>;
  /**
   * pending entries of a topic, oldest first; with `queuedBefore`, also queued entries last touched before it
   * (their job may be gone with a Redis that lost data: handing them over again is a no-op while the job
   * exists, and a duplicate delivery is refused by reference_id)
   */
  outboxPending(topic: string, limit: number, queuedBefore?: Date): Promise<OutboxEntry[]>;
  getOutbox(id: string): Promise<OutboxEntry | undefined>;
  /**
   * sets the state; an error counts one failed attempt and becomes lastError. With `onlyFrom`, only when the
   * current state is one of those (compare-and-set: a relay must not turn a delivered entry back into queued).
   * false when the id is unknown or its state was not in `onlyFrom`
   */
  markOutbox(id: string, state: OutboxState, error?: string, onlyFrom?: readonly OutboxState[]): Promise<boolean>;
  /**
   * The relay handed these entries to the delivery queue: each pending or queued one becomes queued (touching
   * updated_at), in one 'ordered' write (group-commit.ts): a mark lost in a crash leaves the entry pending, and
   * the next pass hands it over again, which the queue drops (same job id). Returns how many were marked.
   */
  markOutboxQueued(ids: readonly string[]): Promise<number>;
  outboxCounts(topic: string): Promise<Record<OutboxState, number>>;
  /**
   * Claims every document of `claim` for its request (all or none, decided by the database's unique key, also
   * across instances): claimed; signed (every document kept before under the same requestKey: their signatures,
   * in the claim's order); in_progress (another live claim; claims from before `staleBefore` without a signature
   * are abandoned and taken over); other_request (signed or claimed under another requestKey); mixed (some
   * documents known, some not, or some signed and some not).
   */
  claimDocuments(claim: DocumentClaim, staleBefore: Date): Promise<ClaimOutcome>;
  /**
   * the signatures of a claim and the records to deliver, in one database transaction; resolves once they are
   * kept, also when the write's answer was lost but the database, asked again (documents.ts KEEP_CONFIRM_MS),
   * shows them committed. Rejects when they were not kept (the claim no longer held, the evidence of the signer
   * certificate missing: nothing written) or when that could not be learnt in time (then a retry of the same
   * request receives them if they were: claimDocuments answers signed)
   */
  keepSignatures(input: {
    claim: DocumentClaim;
    signatures: readonly KeptSignature[];
    /** serial of the signer certificate whose evidence (recordSigning) must exist */
    evidenceSerialHex: string;
    outbox: readonly NewOutboxEntry[];
  }): Promise<KeepOutcome>;
  /** gives back the documents of a claim that were not signed (a failed request); no effect on others' claims */
  releaseDocuments(claim: DocumentClaim): Promise<void>;
  // retention and archiving (retention.ts)
  /** the documents signed or claimed under a consent, by hash algorithm and hash */
  documentsOf(iss: string, txn: string): Promise<StoredDocument[]>;
  /** up to `limit` signings recorded in [from, to), oldest first, after `after` */
  signingsBetween(from: Date, to: Date, limit: number, after?: SigningCursor): Promise<SigningTransaction[]>;
  /** deletes up to `limit` delivered outbox entries last marked before `before`; how many it deleted */
  purgeDeliveredOutbox(before: Date, limit: number): Promise<number>;
  /**
   * Reads up to `limit` signings recorded before `before` (after `after`) and deletes each with its certificate
   * unless an outbox entry of `reportedBy` (the records that report it) exists and is not delivered.
   */
  purgeEvidence(
    before: Date,
    limit: number,
    reportedBy: (signing: SigningCursor & { readonly txn: string }) => readonly string[],
    after?: SigningCursor,
  ): Promise<EvidencePurge>;
  /** deletes up to `limit` documents claimed and signed before `before` whose consent has no signing left */
  purgeDocuments(before: Date, limit: number): Promise<number>;
  /** the sealed journal of evidence and operator events (journal.ts) */
  readonly journal: JournalStore;
  /** what the journal audit compares with the sealed entries (audit-reads.ts) */
  readonly audit: AuditReads;
  /** readiness: the database answers and commits a small write (a full disk or a read-only database fails) */
  ping(): Promise<void>;
  /** idempotent */
  close(): Promise<void>;
}

/** A journal entry to append (journal.ts): what happened, about what, when, and its data. */
export interface JournalEntryInput {
  /** e.g. "signing.authorized", "certificate.revoked", "retention.purged" */
  readonly kind: string;
  /** what the entry is about, for lookups: a signing's certificate serial; null for service-wide events */
  readonly ref: string | null;
  readonly at: Date;
  readonly data: { readonly [key: string]: CanonicalValue };
}

/** A journal entry as stored: its one encoding (canonical JSON bytes) and their SHA-256, the leaf hash. */
export interface StoredJournalEntry {
  readonly seq: number;
  readonly kind: string;
  readonly ref: string | null;
  readonly recordedAt: Date;
  /** the data object of RFC 4998: UTF-8 of the canonical JSON, byte for byte as written */
  readonly body: Buffer;
  /** SHA-256 of body as written at insert time */
  readonly leafHash: Buffer;
}

/** One leaf of a sealed batch: the entry's seq and the hash it had when sealed. */
export interface JournalLeaf {
  readonly seq: number;
  readonly hash: Buffer;
}

/**
 * A data group of RFC 4998 (4.2) in a batch's tree: a signing's signing.authorized entry and one of its
 * signing.returned entries (this batch's), the leaf being the hash of their sealed leaf hashes, sorted.
 */
export interface JournalGroup {
  readonly authorizedSeq: number;
  readonly returnedSeq: number;
  readonly hash: Buffer;
}

/** A sealed batch: entries (firstSeq - 1, throughSeq], its hash tree root (covering prevRoot) and time-stamp. */
export interface JournalBatch {
  readonly batchNo: number;
  readonly firstSeq: number;
  readonly throughSeq: number;
  readonly hashOid: string;
  /** the previous batch's root, the tree's first leaf; null for batch 1 */
  readonly prevRoot: Buffer | null;
  readonly root: Buffer;
  readonly leaves: readonly JournalLeaf[];
  /** RFC 3161 TimeStampToken (DER ContentInfo) over root */
  readonly token: Buffer;
  /** a second TimeStampToken over root by another operator's TSA, when one was configured at the seal */
  readonly secondToken?: Buffer;
  /** the signings whose two entries form a data group, leaves after the entries' (journal/seal.ts) */
  readonly groups?: readonly JournalGroup[];
  /** the token's genTime */
  readonly sealedAt: Date;
}

/**
 * A renewal of the evidence records (RFC 4998 section 5), one time-stamp over a hash tree.
 * - `timestamp` (5.2): a new ArchiveTimeStamp at the end of each current ArchiveTimeStampChain of algorithm
 *   `hashOid`; one leaf per chain (`key`: the batch the chain starts at, or the hash-tree renewal it starts at,
 *   `chainOf`), the group hash of the chain's time-stamps so far.
 * - `hashtree` (5.3): a new ArchiveTimeStampChain for every entry present in batches 1..`throughBatch`, with
 *   another hash algorithm; one leaf per entry (`key`: its seq), H(H(entry) || H(its chains so far)), and one
 *   per signing's data group (`key`: journal/evidence-record.ts groupKey), the group hash of its two entries'.
 */
export interface JournalRenewal {
  readonly renewalNo: number;
  readonly kind: 'timestamp' | 'hashtree';
  readonly hashOid: string;
  /** timestamp renewals: null when the chains renewed start at batches, else the hash-tree renewal they start at */
  readonly chainOf: number | null;
  /** the newest batch covered */
  readonly throughBatch: number;
  readonly leaves: readonly RenewalLeaf[];
  readonly root: Buffer;
  /** RFC 3161 TimeStampToken over root, imprint algorithm hashOid */
  readonly token: Buffer;
  /** the token's genTime */
  readonly renewedAt: Date;
}

export interface RenewalLeaf {
  readonly key: number;
  readonly hash: Buffer;
}

/** An entry retention deleted: its seq and leaf hash, and which purge. */
export interface JournalTombstone {
  readonly seq: number;
  readonly leafHash: Buffer;
  readonly purgedBy: string;
}

/** The sealing as an operator watches it (store/journal-state.ts): the newest batch, and what waits after it. */
export interface JournalSealState {
  readonly lastBatch:
    | {
        readonly batchNo: number;
        readonly throughSeq: number;
        readonly sealedAt: Date;
        /** it carries a second TSA's time-stamp too */
        readonly secondTimeStamp: boolean;
      }
    | undefined;
  /** entries after the newest batch */
  readonly unsealed: number;
  /** the recorded time of the oldest of them; null when none waits */
  readonly oldestUnsealedAt: Date | null;
}

/**
 * The journal's rows. Entries are only ever inserted (signDoc's inside its evidence writes); only retention
 * deletes them, leaving a tombstone. Batches are only inserted, one per number: two sealers racing for the
 * same number leave one batch (addBatch answers false to the other).
 */
export interface JournalStore {
  /** appends one entry in its own write */
  append(entry: JournalEntryInput): Promise<void>;
  /**
   * the highest seq committed, such that no entry with a lower or equal seq can still commit (PostgreSQL: after
   * the writes in flight, without a lock; rejects naming a session that stays open: journal-horizon.ts); 0 when
   * there is none
   */
  horizon(): Promise<number>;
  /** entries with afterSeq < seq <= throughSeq, by seq */
  entries(afterSeq: number, throughSeq: number): Promise<StoredJournalEntry[]>;
  /** the entries about `ref` (a signing's certificate serial), by seq */
  entriesOf(ref: string): Promise<StoredJournalEntry[]>;
  /** the newest batch */
  lastBatch(): Promise<JournalBatch | undefined>;
  /** the batch holding `seq` (by range) */
  batchOf(seq: number): Promise<JournalBatch | undefined>;
  /** batches numbered fromNo .. fromNo + limit - 1, by number */
  batches(fromNo: number, limit: number): Promise<JournalBatch[]>;
  /** inserts the batch; false when its number or first seq is taken (another sealer was first) */
  addBatch(batch: JournalBatch): Promise<boolean>;
  /** inserts the renewal; false when its number is taken (another instance renewed first) */
  addRenewal(renewal: JournalRenewal): Promise<boolean>;
  /** every renewal, by number */
  renewals(): Promise<JournalRenewal[]>;
  /** tombstones with afterSeq < seq <= throughSeq */
  tombstones(afterSeq: number, throughSeq: number): Promise<JournalTombstone[]>;
  /** the newest batch (without its leaves) and the entries after it, counted; no lock taken */
  sealState(): Promise<JournalSealState>;
}
