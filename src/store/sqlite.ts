/**
 * The embedded store: one SQLite file, `<dataDir>/qtsp.sqlite`, through better-sqlite3 (DESIGN: one command
 * starts everything, no database server).
 *
 * - WAL journal: readers (OCSP, `qtsp evidence show` in another process) never block the writer.
 * - synchronous=FULL: a commit is on disk before signDoc goes on to sign. With WAL, NORMAL may lose the
 *   last commits on power loss, and evidence that backs a signature already handed out must not be lost.
 * - busy_timeout: several processes on the same file wait for each other instead of failing at once.
 * - Times are INTEGER milliseconds since the epoch (exact round trip, sortable); DER is a BLOB.
 *
 * better-sqlite3 is synchronous: each call blocks the event loop for its duration (a commit is one fsync).
 * That is what makes recordSigning atomic without locks, and concurrent callers are serialised for free.
 * Group commit: the writes of signDoc (recordSigning, addOutbox) asked for within one turn of the event loop
 * share one outer transaction, so one fsync, instead of one each; every write still runs in its own
 * savepoint, so one failing write rolls back alone and rejects only its caller.
 */
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { checkCertificate, checkRecordSigning, checkRevocationReason, outboxPayloadJson } from './records.ts';
import type {
  CertificateStatus,
  IssuedCertificate,
  NewOutboxEntry,
  OutboxEntry,
  OutboxState,
  RecordSigningInput,
  RevocationReason,
  RevokedCertificate,
  SigningTransaction,
  Store,
  StoredCertificate,
} from './types.ts';

export const SQLITE_FILE = 'qtsp.sqlite';

export function sqlitePath(dataDir: string): string {
  return join(dataDir, SQLITE_FILE);
}

/** Schema migrations, applied in order; the index + 1 is the version recorded in schema_version. Never edit one that shipped. */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE certificates (
    serial_hex        TEXT PRIMARY KEY CHECK (length(serial_hex) > 0 AND serial_hex NOT GLOB '*[^0-9a-f]*'),
    issuer_key_id     TEXT NOT NULL CHECK (length(issuer_key_id) > 0 AND issuer_key_id NOT GLOB '*[^0-9a-f]*'),
    subject           TEXT NOT NULL,
    not_before        INTEGER NOT NULL,
    not_after         INTEGER NOT NULL,
    issued_at         INTEGER NOT NULL,
    txn               TEXT,
    der               BLOB NOT NULL CHECK (length(der) > 0),
    status            TEXT NOT NULL DEFAULT 'good' CHECK (status IN ('good', 'revoked')),
    revoked_at        INTEGER,
    revocation_reason TEXT,
    CHECK ((status = 'good') = (revoked_at IS NULL AND revocation_reason IS NULL))
  );
  CREATE INDEX certificates_issuer_status ON certificates (issuer_key_id, status);
  CREATE INDEX certificates_txn ON certificates (txn);

  CREATE TABLE signing_transactions (
    certificate_serial_hex TEXT PRIMARY KEY REFERENCES certificates (serial_hex),
    txn                    TEXT NOT NULL CHECK (length(txn) > 0),
    iss                    TEXT NOT NULL,
    sub                    TEXT NOT NULL,
    client_id              TEXT NOT NULL,
    client_state           TEXT NOT NULL,
    introspection_jwt      TEXT NOT NULL CHECK (length(introspection_jwt) > 0),
    hash_algorithm_oid     TEXT NOT NULL,
    hashes                 TEXT NOT NULL,
    hash_count             INTEGER NOT NULL,
    signature_format       TEXT NOT NULL,
    conformance_level      TEXT NOT NULL,
    created_at             INTEGER NOT NULL
  );
  CREATE INDEX signing_transactions_txn ON signing_transactions (txn, created_at);

  CREATE TABLE outbox (
    id         TEXT PRIMARY KEY CHECK (length(id) > 0),
    topic      TEXT NOT NULL CHECK (length(topic) > 0),
    payload    TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'queued', 'delivered', 'failed')),
    attempts   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX outbox_topic_state ON outbox (topic, state, created_at);
  `,
  `ALTER TABLE signing_transactions ADD COLUMN key_source TEXT;`,
];

function migrate(db: Database.Database): void {
  db.exec('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)');
  // IMMEDIATE: a second process opening the same file at the same moment waits here instead of migrating twice
  db.transaction(() => {
    const current = (db.prepare('SELECT coalesce(max(version), 0) AS v FROM schema_version').get() as { v: number }).v;
    if (current > MIGRATIONS.length) throw new Error(`store: database schema version ${current} is newer than this program knows (${MIGRATIONS.length})`);
    for (let version = current + 1; version <= MIGRATIONS.length; version++) {
      db.exec(MIGRATIONS[version - 1]!);
      db.prepare('INSERT INTO schema_version (version, applied_at) VALUES (?, ?)').run(version, Date.now());
    }
  }).immediate();
}

interface CertificateRow {
  serial_hex: string;
  issuer_key_id: string;
  subject: string;
  not_before: number;
  not_after: number;
  issued_at: number;
  txn: string | null;
  der: Buffer;
  status: 'good' | 'revoked';
  revoked_at: number | null;
  revocation_reason: RevocationReason | null;
}

interface TransactionRow {
  certificate_serial_hex: string;
  txn: string;
  iss: string;
  sub: string;
  client_id: string;
  client_state: string;
  introspection_jwt: string;
  hash_algorithm_oid: string;
  hashes: string;
  signature_format: string;
  conformance_level: string;
  key_source: string | null;
  created_at: number;
}

interface OutboxRow {
  id: string;
  topic: string;
  payload: string;
  state: OutboxState;
  attempts: number;
  last_error: string | null;
  created_at: number;
  updated_at: number;
}

function statusOf(row: Pick<CertificateRow, 'status' | 'revoked_at' | 'revocation_reason'>): CertificateStatus {
  return row.status === 'revoked' ? { status: 'revoked', revokedAt: new Date(row.revoked_at!), reason: row.revocation_reason! } : { status: 'good' };
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

function toTransaction(row: TransactionRow): SigningTransaction {
  return {
    txn: row.txn,
    iss: row.iss,
    sub: row.sub,
    clientId: row.client_id,
    clientState: row.client_state,
    introspectionJwt: row.introspection_jwt,
    hashAlgorithmOid: row.hash_algorithm_oid,
    hashes: JSON.parse(row.hashes) as string[],
    signatureFormat: row.signature_format,
    conformanceLevel: row.conformance_level,
    keySource: row.key_source ?? null,
    certificateSerialHex: row.certificate_serial_hex,
    createdAt: new Date(row.created_at),
  };
}

function toOutbox(row: OutboxRow): OutboxEntry {
  return {
    id: row.id,
    topic: row.topic,
    payload: JSON.parse(row.payload) as unknown,
    state: row.state,
    attempts: row.attempts,
    lastError: row.last_error,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

function certificateParams(c: IssuedCertificate) {
  return {
    serial_hex: c.serialHex,
    issuer_key_id: c.issuerKeyId,
    subject: c.subject,
    not_before: c.notBefore.getTime(),
    not_after: c.notAfter.getTime(),
    issued_at: c.issuedAt.getTime(),
    txn: c.txn,
    der: c.der,
  };
}

function transactionParams(t: SigningTransaction) {
  return {
    certificate_serial_hex: t.certificateSerialHex,
    txn: t.txn,
    iss: t.iss,
    sub: t.sub,
    client_id: t.clientId,
    client_state: t.clientState,
    introspection_jwt: t.introspectionJwt,
    hash_algorithm_oid: t.hashAlgorithmOid,
    hashes: JSON.stringify(t.hashes),
    hash_count: t.hashes.length,
    signature_format: t.signatureFormat,
    conformance_level: t.conformanceLevel,
    key_source: t.keySource ?? null,
    created_at: t.createdAt.getTime(),
  };
}

/** Opens (creating or migrating) the SQLite store in `file`. */
export function openSqliteStore(file: string): Store {
  mkdirSync(dirname(file), { recursive: true });
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    db.pragma('busy_timeout = 5000');
    migrate(db);
  } catch (err) {
    db.close();
    throw err;
  }

  const insertCertificate = db.prepare(
    `INSERT INTO certificates (serial_hex, issuer_key_id, subject, not_before, not_after, issued_at, txn, der)
     VALUES (@serial_hex, @issuer_key_id, @subject, @not_before, @not_after, @issued_at, @txn, @der)`,
  );
  const insertTransaction = db.prepare(
    `INSERT INTO signing_transactions (certificate_serial_hex, txn, iss, sub, client_id, client_state, introspection_jwt,
       hash_algorithm_oid, hashes, hash_count, signature_format, conformance_level, key_source, created_at)
     VALUES (@certificate_serial_hex, @txn, @iss, @sub, @client_id, @client_state, @introspection_jwt,
       @hash_algorithm_oid, @hashes, @hash_count, @signature_format, @conformance_level, @key_source, @created_at)`,
  );
  const insertOutbox = db.prepare(
    `INSERT INTO outbox (id, topic, payload, created_at, updated_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
  );
  const addOutboxEntries = (entries: readonly NewOutboxEntry[]) => {
    const now = Date.now();
    for (const e of entries) insertOutbox.run(e.id, e.topic, outboxPayloadJson(e), now, now);
  };
  const recordSigningTx = db.transaction((input: RecordSigningInput) => {
    insertCertificate.run(certificateParams(input.certificate));
    insertTransaction.run(transactionParams(input.transaction));
    addOutboxEntries(input.outbox ?? []);
  });
  const addOutboxTx = db.transaction(addOutboxEntries);
  const group = groupCommit(db);
  const selectCertificate = db.prepare('SELECT * FROM certificates WHERE serial_hex = ?');
  const selectTransactions = db.prepare('SELECT * FROM signing_transactions WHERE txn = ? ORDER BY created_at, rowid');
  const selectStatus = db.prepare('SELECT status, revoked_at, revocation_reason FROM certificates WHERE issuer_key_id = ? AND serial_hex = ?');
  const revoke = db.prepare(
    `UPDATE certificates SET status = 'revoked', revoked_at = ?, revocation_reason = ? WHERE serial_hex = ? AND status = 'good'`,
  );
  const selectRevoked = db.prepare(
    `SELECT serial_hex, revoked_at, revocation_reason FROM certificates WHERE issuer_key_id = ? AND status = 'revoked' ORDER BY serial_hex`,
  );
  const selectPending = db.prepare(
    `SELECT * FROM outbox WHERE topic = ? AND (state = 'pending' OR (state = 'queued' AND updated_at < ?)) ORDER BY created_at, rowid LIMIT ?`,
  );
  const selectOutbox = db.prepare('SELECT * FROM outbox WHERE id = ?');
  const mark = db.prepare(
    `UPDATE outbox SET state = @state, updated_at = @now,
       attempts = attempts + (CASE WHEN @error IS NULL THEN 0 ELSE 1 END), last_error = coalesce(@error, last_error)
     WHERE id = @id AND (@only_from IS NULL OR state IN (SELECT value FROM json_each(@only_from)))`,
  );
  const countStates = db.prepare('SELECT state, count(*) AS n FROM outbox WHERE topic = ? GROUP BY state');
  let closed = false;

  return {
    driver: 'sqlite',
    async recordSigning(input) {
      checkRecordSigning(input);
      await group.run(() => recordSigningTx(input));
    },
    async getTransaction(txn) {
      return (selectTransactions.all(txn) as TransactionRow[]).map(toTransaction);
    },
    async addCertificate(certificate) {
      checkCertificate(certificate);
      insertCertificate.run(certificateParams(certificate));
    },
    async certificateStatus(issuerKeyId, serialHex) {
      const row = selectStatus.get(issuerKeyId.toLowerCase(), serialHex.toLowerCase()) as CertificateRow | undefined;
      return row ? statusOf(row) : { status: 'unknown' };
    },
    async getCertificate(serialHex) {
      const row = selectCertificate.get(serialHex.toLowerCase()) as CertificateRow | undefined;
      return row ? toCertificate(row) : undefined;
    },
    async revokeCertificate(serialHex, reason, at) {
      checkRevocationReason(reason);
      return revoke.run(at.getTime(), reason, serialHex.toLowerCase()).changes === 1;
    },
    async revokedCertificates(issuerKeyId): Promise<RevokedCertificate[]> {
      const rows = selectRevoked.all(issuerKeyId.toLowerCase()) as Pick<CertificateRow, 'serial_hex' | 'revoked_at' | 'revocation_reason'>[];
      return rows.map((r) => ({ serialHex: r.serial_hex, revokedAt: new Date(r.revoked_at!), reason: r.revocation_reason! }));
    },
    async addOutbox(entries) {
      await group.run(() => addOutboxTx(entries));
    },
    async outboxPending(topic, limit, queuedBefore) {
      return (selectPending.all(topic, queuedBefore?.getTime() ?? -1, limit) as OutboxRow[]).map(toOutbox);
    },
    async getOutbox(id) {
      const row = selectOutbox.get(id) as OutboxRow | undefined;
      return row ? toOutbox(row) : undefined;
    },
    async markOutbox(id, state, error, onlyFrom) {
      const only_from = onlyFrom ? JSON.stringify(onlyFrom) : null;
      return group.run(() => mark.run({ id, state, error: error ?? null, now: Date.now(), only_from }).changes === 1);
    },
    async outboxCounts(topic) {
      const counts: Record<OutboxState, number> = { pending: 0, queued: 0, delivered: 0, failed: 0 };
      for (const row of countStates.all(topic) as { state: OutboxState; n: number }[]) counts[row.state] = row.n;
      return counts;
    },
    async ping() {
      db.prepare('SELECT 1').get();
    },
    async close() {
      if (closed) return;
      closed = true;
      group.flush(); // writes already asked for are committed, not lost
      db.close();
    },
  };
}

interface GroupCommit {
  /** runs `write` in the next group transaction and resolves with its result */
  run<T>(write: () => T): Promise<T>;
  flush(): void;
}

interface GroupJob {
  readonly write: () => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
}

function groupCommit(db: Database.Database): GroupCommit {
  let queue: GroupJob[] = [];
  const flush = () => {
    const jobs = queue;
    queue = [];
    if (jobs.length === 0) return;
    const outcomes: { ok: boolean; value: unknown }[] = [];
    try {
      // each write in its own SAVEPOINT: one failing write rolls back alone
      db.transaction(() => {
        for (const job of jobs) {
          try {
            outcomes.push({ ok: true, value: db.transaction(job.write)() });
          } catch (err) {
            outcomes.push({ ok: false, value: err ?? new Error('write failed') });
          }
        }
      })();
    } catch (err) {
      for (const job of jobs) job.reject(err); // the commit itself failed: nothing of the group is on disk
      return;
    }
    jobs.forEach((job, i) => (outcomes[i]!.ok ? job.resolve(outcomes[i]!.value) : job.reject(outcomes[i]!.value)));
  };
  return {
    run: <T>(write: () => T) =>
      new Promise<T>((resolve, reject) => {
        queue.push({ write, resolve: resolve as (value: unknown) => void, reject });
        if (queue.length === 1) setImmediate(flush);
      }),
    flush,
  };
}
