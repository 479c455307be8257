/**
 * The shared store for deployments with several QTSP instances: PostgreSQL through a pg Pool. Same tables,
 * same meanings and the same checks as the SQLite store (sqlite.ts); one test suite runs against both.
 *
 * - Migrations run at open inside one transaction holding an advisory lock, so instances starting together
 *   migrate once.
 * - recordSigning is BEGIN .. COMMIT on one pooled client; any error rolls back and the client is discarded
 *   (it may be in an unknown state after a broken connection).
 * - Times are TIMESTAMPTZ (microseconds, so our millisecond Dates round-trip), DER is BYTEA, JSON is TEXT
 *   (the outbox payload comes back byte for byte as written; we never query inside it).
 */
import pg from 'pg';
import { checkCertificate, checkRecordSigning, checkRevocationReason, outboxPayloadJson } from './records.ts';
import type {
  CertificateStatus,
  IssuedCertificate,
  NewOutboxEntry,
  OutboxEntry,
  OutboxState,
  RevocationReason,
  SigningTransaction,
  Store,
  StoredCertificate,
} from './types.ts';

/** Schema migrations, applied in order; the index + 1 is the version recorded in schema_version. Never edit one that shipped. */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE certificates (
    serial_hex        TEXT PRIMARY KEY CHECK (serial_hex ~ '^[0-9a-f]+$'),
    issuer_key_id     TEXT NOT NULL CHECK (issuer_key_id ~ '^[0-9a-f]+$'),
    subject           TEXT NOT NULL,
    not_before        TIMESTAMPTZ NOT NULL,
    not_after         TIMESTAMPTZ NOT NULL,
    issued_at         TIMESTAMPTZ NOT NULL,
    txn               TEXT,
    der               BYTEA NOT NULL CHECK (length(der) > 0),
    status            TEXT NOT NULL DEFAULT 'good' CHECK (status IN ('good', 'revoked')),
    revoked_at        TIMESTAMPTZ,
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
    created_at             TIMESTAMPTZ NOT NULL,
    seq                    BIGINT GENERATED ALWAYS AS IDENTITY
  );
  CREATE INDEX signing_transactions_txn ON signing_transactions (txn, created_at);

  CREATE TABLE outbox (
    id         TEXT PRIMARY KEY CHECK (length(id) > 0),
    topic      TEXT NOT NULL CHECK (length(topic) > 0),
    payload    TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'queued', 'delivered', 'failed')),
    attempts   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    seq        BIGINT GENERATED ALWAYS AS IDENTITY
  );
  CREATE INDEX outbox_topic_state ON outbox (topic, state, created_at, seq);
  `,
  `ALTER TABLE signing_transactions ADD COLUMN key_source TEXT;`,
];

/** pg_advisory_xact_lock key for migrations (any constant; "qtsp" in ASCII) */
const MIGRATION_LOCK = 0x71747370;

type Queryable = Pick<pg.PoolClient, 'query'>;

async function inTransaction<T>(pool: pg.Pool, work: (client: Queryable) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    client.release();
    return result;
  } catch (err) {
    // a failed ROLLBACK means the connection is gone; either way this client is not reused
    await client.query('ROLLBACK').catch(() => undefined);
    client.release(true);
    throw err;
  }
}

async function migrate(pool: pg.Pool): Promise<void> {
  await inTransaction(pool, async (db) => {
    await db.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await db.query('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL)');
    const { rows } = await db.query<{ v: number }>('SELECT coalesce(max(version), 0)::int AS v FROM schema_version');
    const current = rows[0]!.v;
    if (current > MIGRATIONS.length) throw new Error(`store: database schema version ${current} is newer than this program knows (${MIGRATIONS.length})`);
    for (let version = current + 1; version <= MIGRATIONS.length; version++) {
      await db.query(MIGRATIONS[version - 1]!);
      await db.query('INSERT INTO schema_version (version, applied_at) VALUES ($1, now())', [version]);
    }
  });
}

interface CertificateRow {
  serial_hex: string;
  issuer_key_id: string;
  subject: string;
  not_before: Date;
  not_after: Date;
  issued_at: Date;
  txn: string | null;
  der: Buffer;
  status: 'good' | 'revoked';
  revoked_at: Date | null;
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
  created_at: Date;
}

interface OutboxRow {
  id: string;
  topic: string;
  payload: string;
  state: OutboxState;
  attempts: number;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
}

function statusOf(row: Pick<CertificateRow, 'status' | 'revoked_at' | 'revocation_reason'>): CertificateStatus {
  return row.status === 'revoked' ? { status: 'revoked', revokedAt: row.revoked_at!, reason: row.revocation_reason! } : { status: 'good' };
}

function toCertificate(row: CertificateRow): StoredCertificate {
  return {
    serialHex: row.serial_hex,
    issuerKeyId: row.issuer_key_id,
    subject: row.subject,
    notBefore: row.not_before,
    notAfter: row.not_after,
    issuedAt: row.issued_at,
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
    createdAt: row.created_at,
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
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

const INSERT_CERTIFICATE = `INSERT INTO certificates (serial_hex, issuer_key_id, subject, not_before, not_after, issued_at, txn, der)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`;

function insertCertificate(db: Queryable, c: IssuedCertificate) {
  return db.query(INSERT_CERTIFICATE, [c.serialHex, c.issuerKeyId, c.subject, c.notBefore, c.notAfter, c.issuedAt, c.txn, c.der]);
}

function insertTransaction(db: Queryable, t: SigningTransaction) {
  return db.query(
    `INSERT INTO signing_transactions (certificate_serial_hex, txn, iss, sub, client_id, client_state, introspection_jwt,
       hash_algorithm_oid, hashes, hash_count, signature_format, conformance_level, key_source, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
    [t.certificateSerialHex, t.txn, t.iss, t.sub, t.clientId, t.clientState, t.introspectionJwt, t.hashAlgorithmOid, JSON.stringify(t.hashes), t.hashes.length, t.signatureFormat, t.conformanceLevel, t.keySource ?? null, t.createdAt],
  );
}

async function insertOutbox(db: Queryable, entries: readonly NewOutboxEntry[]): Promise<void> {
  for (const e of entries) {
    await db.query(`INSERT INTO outbox (id, topic, payload, created_at, updated_at) VALUES ($1, $2, $3, now(), now()) ON CONFLICT (id) DO NOTHING`, [e.id, e.topic, outboxPayloadJson(e)]);
  }
}

export interface PostgresStoreOptions {
  /** postgres://user:password@host:port/database */
  readonly url: string;
  /** most connections this instance opens (pg default 10) */
  readonly maxConnections?: number;
}

/** Opens the PostgreSQL store and migrates its schema; rejects when the database cannot be reached. */
export async function openPostgresStore(options: PostgresStoreOptions): Promise<Store> {
  // bounded waits: a database that stops answering fails the request (503) instead of holding it forever
  const pool = new pg.Pool({ connectionString: options.url, max: options.maxConnections ?? 10, connectionTimeoutMillis: 5000, query_timeout: 10_000 });
  // an idle client whose server went away emits 'error' on the pool; unhandled, it would end the process.
  // The next query (and readiness' ping) reports the outage instead.
  pool.on('error', () => undefined);
  try {
    await migrate(pool);
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw err;
  }
  let closed = false;

  return {
    driver: 'postgres',
    async recordSigning(input) {
      checkRecordSigning(input);
      await inTransaction(pool, async (db) => {
        await insertCertificate(db, input.certificate);
        await insertTransaction(db, input.transaction);
        await insertOutbox(db, input.outbox ?? []);
      });
    },
    async getTransaction(txn) {
      const { rows } = await pool.query<TransactionRow>('SELECT * FROM signing_transactions WHERE txn = $1 ORDER BY created_at, seq', [txn]);
      return rows.map(toTransaction);
    },
    async addCertificate(certificate) {
      checkCertificate(certificate);
      await insertCertificate(pool, certificate);
    },
    async certificateStatus(issuerKeyId, serialHex) {
      const { rows } = await pool.query<CertificateRow>(
        'SELECT status, revoked_at, revocation_reason FROM certificates WHERE issuer_key_id = $1 AND serial_hex = $2',
        [issuerKeyId.toLowerCase(), serialHex.toLowerCase()],
      );
      return rows[0] ? statusOf(rows[0]) : { status: 'unknown' };
    },
    async getCertificate(serialHex) {
      const { rows } = await pool.query<CertificateRow>('SELECT * FROM certificates WHERE serial_hex = $1', [serialHex.toLowerCase()]);
      return rows[0] ? toCertificate(rows[0]) : undefined;
    },
    async revokeCertificate(serialHex, reason, at) {
      checkRevocationReason(reason);
      const res = await pool.query(
        `UPDATE certificates SET status = 'revoked', revoked_at = $1, revocation_reason = $2 WHERE serial_hex = $3 AND status = 'good'`,
        [at, reason, serialHex.toLowerCase()],
      );
      return res.rowCount === 1;
    },
    async revokedCertificates(issuerKeyId) {
      const { rows } = await pool.query<CertificateRow>(
        `SELECT serial_hex, revoked_at, revocation_reason FROM certificates WHERE issuer_key_id = $1 AND status = 'revoked' ORDER BY serial_hex`,
        [issuerKeyId.toLowerCase()],
      );
      return rows.map((r) => ({ serialHex: r.serial_hex, revokedAt: r.revoked_at!, reason: r.revocation_reason! }));
    },
    async addOutbox(entries) {
      await inTransaction(pool, (db) => insertOutbox(db, entries));
    },
    async outboxPending(topic, limit, queuedBefore) {
      const { rows } = await pool.query<OutboxRow>(
        `SELECT * FROM outbox WHERE topic = $1 AND (state = 'pending' OR (state = 'queued' AND updated_at < $3)) ORDER BY created_at, seq LIMIT $2`,
        [topic, limit, queuedBefore ?? new Date(0)],
      );
      return rows.map(toOutbox);
    },
    async getOutbox(id) {
      const { rows } = await pool.query<OutboxRow>('SELECT * FROM outbox WHERE id = $1', [id]);
      return rows[0] ? toOutbox(rows[0]) : undefined;
    },
    async markOutbox(id, state, error, onlyFrom) {
      const res = await pool.query(
        `UPDATE outbox SET state = $2, updated_at = now(),
           attempts = attempts + (CASE WHEN $3::text IS NULL THEN 0 ELSE 1 END), last_error = coalesce($3::text, last_error)
         WHERE id = $1 AND ($4::text[] IS NULL OR state = ANY($4::text[]))`,
        [id, state, error ?? null, onlyFrom ? [...onlyFrom] : null],
      );
      return res.rowCount === 1;
    },
    async outboxCounts(topic) {
      const counts: Record<OutboxState, number> = { pending: 0, queued: 0, delivered: 0, failed: 0 };
      const { rows } = await pool.query<{ state: OutboxState; n: number }>('SELECT state, count(*)::int AS n FROM outbox WHERE topic = $1 GROUP BY state', [topic]);
      for (const row of rows) counts[row.state] = row.n;
      return counts;
    },
    async ping() {
      await pool.query('SELECT 1');
    },
    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}
