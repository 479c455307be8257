/**
 * The store's one schema: the tables as Kysely sees them and the one list of migrations, written once for
 * SQLite and PostgreSQL. The few column types the two databases spell differently come from the dialect
 * (dialects.ts), and so does the insertion-order column; everything else here is the same SQL for both.
 *
 * Versions: Kysely's Migrator records applied migrations by name in `kysely_migration`. Release 0.1 (fdcfad6)
 * recorded them as numbers in `schema_version` instead; a database it made already has the migrations up to
 * that number, so each migration here first asks whether that table vouches for it (`releasedUpTo`).
 */
import { Migrator, sql, type Generated, type Kysely, type Migration } from 'kysely';
import type { OutboxState, RevocationReason } from './types.ts';

/** a time as the database keeps it: INTEGER milliseconds since the epoch (SQLite) or TIMESTAMPTZ (PostgreSQL) */
export type Time = number | Date;

export interface CertificatesTable {
  serial_hex: string;
  issuer_key_id: string;
  subject: string;
  not_before: Time;
  not_after: Time;
  issued_at: Time;
  txn: string | null;
  der: Buffer;
  status: 'good' | 'revoked';
  revoked_at: Time | null;
  revocation_reason: RevocationReason | null;
}

export interface SigningTransactionsTable {
  certificate_serial_hex: string;
  txn: string;
  iss: string;
  sub: string;
  client_id: string;
  client_state: string;
  introspection_jwt: string;
  hash_algorithm_oid: string;
  /** JSON array of the Base64 digests */
  hashes: string;
  hash_count: number;
  signature_format: string;
  conformance_level: string;
  key_source: string | null;
  key_custody: string | null;
  created_at: Time;
}

export interface OutboxTable {
  id: string;
  topic: string;
  /** JSON text, returned byte for byte as written (never queried inside) */
  payload: string;
  state: OutboxState;
  attempts: number;
  last_error: string | null;
  created_at: Time;
  updated_at: Time;
}

/** readiness' write probe: a row written and deleted in one committed write */
export interface HealthProbeTable {
  id: string;
  at: Time;
  /** SQLite only: bytes that need fresh pages, so a file at its size cap fails the probe (dialects.ts) */
  filler: Buffer | null;
}

/** documents signed under a consent (documents.ts): the primary key is the document */
export interface SignedDocumentsTable {
  iss: string;
  txn: string;
  hash_alg: string;
  /** Base64 of the digest, as in the request */
  hash: string;
  /** the request holding the claim (or that signed it) */
  claim_id: string;
  /** format, level and signer algorithm asked (a replay must ask the same) */
  request_key: string;
  claimed_at: Time;
  /** Base64 of the signature object returned; null while claimed */
  signature: string | null;
  /** JSON {ocsp, crl} of the response's revocationInfo, or null */
  revocation: string | null;
  signed_at: Time | null;
}

/** the journal (journal.ts): one row per entry, append-only; `seq` orders them as committed */
export interface JournalEntriesTable {
  seq: Generated<number>;
  kind: string;
  /** what the entry is about, for lookups (a signing's certificate serial); also inside `body` */
  ref: string | null;
  recorded_at: Time;
  /** the entry's one encoding: canonical JSON (RFC 8785), the data object its leaf hash is taken of */
  body: string;
  /** SHA-256 of body, lowercase hex */
  leaf_hash: string;
}

/** a sealed batch of journal entries (journal.ts): entries (first_seq - 1, through_seq], chained by prev_root */
export interface JournalBatchesTable {
  batch_no: number;
  first_seq: number;
  through_seq: number;
  entry_count: number;
  hash_oid: string;
  prev_root: Buffer | null;
  root: Buffer;
  /** the leaves as sealed: per entry its seq (8 bytes, big-endian) and its leaf hash */
  leaves: Buffer;
  /** RFC 3161 TimeStampToken over root */
  token: Buffer;
  /** a second TimeStampToken over root, by another operator's TSA (journal.secondTsaUrl); null without one */
  second_token: Buffer | null;
  /** data groups (JournalGroup): per group the two seqs (8 bytes each, big-endian) and its hash; null: none */
  groups: Buffer | null;
  sealed_at: Time;
}

/** what retention deleted from the journal: the leaf hash of each entry, so an audit tells a purge from a loss */
export interface JournalPurgedTable {
  seq: number;
  leaf_hash: string;
  /** which purge: "retention before <ISO time>" */
  purged_by: string;
}

/** RFC 4998 renewals of the batches' evidence records (journal.ts; JournalRenewal in types.ts) */
export interface JournalRenewalsTable {
  renewal_no: number;
  /** 'timestamp' or 'hashtree' */
  kind: string;
  hash_oid: string;
  chain_of: number | null;
  through_batch: number;
  /** per leaf its key (8 bytes, big-endian) and its hash (the length of hash_oid) */
  leaves: Buffer;
  root: Buffer;
  token: Buffer;
  renewed_at: Time;
}

export interface Tables {
  journal_entries: JournalEntriesTable;
  journal_renewals: JournalRenewalsTable;
  journal_batches: JournalBatchesTable;
  journal_purged: JournalPurgedTable;
  certificates: CertificatesTable;
  signing_transactions: SigningTransactionsTable;
  outbox: OutboxTable;
  health_probe: HealthProbeTable;
  signed_documents: SignedDocumentsTable;
}

/** what the migrations need to know of the database they run on */
export interface SchemaShape {
  readonly timeType: 'integer' | 'timestamptz';
  readonly bytesType: 'blob' | 'bytea';
  /**
   * the column that orders rows as they were inserted: SQLite's implicit rowid, or a `seq` identity column
   * the migrations add (PostgreSQL has no rowid)
   */
  readonly insertionOrder: 'rowid' | 'seq';
  /** where the version tables live: PostgreSQL's current schema (several stores may share a database) */
  readonly schema: string | undefined;
}

/** the column types a migration needs of the database it runs on */
interface ColumnTypes {
  readonly time: SchemaShape['timeType'];
  readonly bytes: SchemaShape['bytesType'];
  /** PostgreSQL: a `seq` identity column orders the rows as inserted (SQLite has its rowid) */
  readonly seq: boolean;
}

/** lowercase hex, written once for both databases with ltrim, which both have */
const hex = (column: string) =>
  sql`length(${sql.ref(column)}) > 0 AND ltrim(${sql.ref(column)}, '0123456789abcdef') = ''`;
const nonEmpty = (column: string) => sql`length(${sql.ref(column)}) > 0`;

/**
 * The migrations, applied in name order. Never edit one that shipped; add the next. 0001 to 0003 are the
 * numbered migrations 1 to 3 of the two stores before this one (same tables, columns and constraints; their
 * dialect-specific hex check is written once here with ltrim, which both databases have).
 */
function migrations(shape: SchemaShape): Record<string, Migration> {
  const types: ColumnTypes = { time: shape.timeType, bytes: shape.bytesType, seq: shape.insertionOrder === 'seq' };
  return { ...signingMigrations(shape, types), ...journalMigrations(types) };
}

/** 0001 to 0007: certificates, signings, the outbox, claimed documents and their indexes */
function signingMigrations(shape: SchemaShape, types: ColumnTypes): Record<string, Migration> {
  /** a migration release 0.1 applied as its version `version` runs only where that release did not */
  const released = (version: number, up: (db: Kysely<unknown>) => Promise<void>): Migration => ({
    async up(db) {
      if ((await releasedUpTo(db, shape)) >= version) return;
      await up(db);
    },
  });
  return {
    '0001_certificates_transactions_outbox': released(1, async (db) => {
      await createCertificates(db, types);
      await createSigningTransactions(db, types);
      await createOutbox(db, types);
    }),
    // which source vouched for the AS key of the introspection response (archive first, then jwks_uri)
    '0002_signing_key_source': released(2, async (db) => {
      await db.schema.alterTable('signing_transactions').addColumn('key_source', 'text').execute();
    }),
    // readiness' write probe (release 0.1's version 3; its PostgreSQL table had no filler, never written there)
    '0003_health_probe': released(3, (db) => createHealthProbe(db, types)),
    // where the signer key lived: "software" or "pkcs11:<token label>:<token serial>"
    '0004_signing_key_custody': {
      async up(db) {
        await db.schema.alterTable('signing_transactions').addColumn('key_custody', 'text').execute();
      },
    },
    // one consent, one signature per document; the primary key decides which request signs
    '0005_signed_documents': { up: (db) => createSignedDocuments(db, types) },
    // the relay's look for queued entries whose job may be lost (outbox.ts outboxPending) is a range of this
    // index, not a scan of every entry of the topic (delivered ones stay in the outbox)
    '0006_outbox_queued_since': {
      async up(db) {
        await db.schema
          .createIndex('outbox_topic_state_updated')
          .on('outbox')
          .columns(['topic', 'state', 'updated_at'])
          .execute();
      },
    },
    // retention (retention.ts): the purge and the export read old signings, delivered entries and old
    // documents as ranges of these indexes
    '0007_retention': {
      async up(db) {
        await db.schema
          .createIndex('signing_transactions_created')
          .on('signing_transactions')
          .columns(['created_at', 'certificate_serial_hex'])
          .execute();
        await db.schema.createIndex('outbox_state_updated').on('outbox').columns(['state', 'updated_at']).execute();
        await db.schema.createIndex('signed_documents_claimed').on('signed_documents').column('claimed_at').execute();
      },
    },
  };
}

/** 0008 on: the sealed journal and its evidence records */
function journalMigrations(types: ColumnTypes): Record<string, Migration> {
  return {
    // the sealed journal (journal.ts): entries, batches, and the leaf hashes of what retention purged
    '0008_journal': { up: (db) => createJournal(db, types) },
    // renewals of the journal's evidence records (RFC 4998 section 5): time-stamp and hash-tree renewals
    '0009_journal_renewals': { up: (db) => createJournalRenewals(db, types) },
    // a batch's time-stamp by a second, independent TSA (journal/seal.ts), when one is configured
    '0010_journal_second_timestamp': {
      async up(db) {
        await db.schema.alterTable('journal_batches').addColumn('second_token', types.bytes).execute();
      },
    },
    // each signing's two entries as one data group of a batch's tree (journal/seal.ts)
    '0011_journal_groups': {
      async up(db) {
        await db.schema.alterTable('journal_batches').addColumn('groups', types.bytes).execute();
      },
    },
  };
}

async function createCertificates(db: Kysely<unknown>, { time, bytes }: ColumnTypes): Promise<void> {
  await db.schema
    .createTable('certificates')
    .addColumn('serial_hex', 'text', (c) => c.primaryKey().notNull().check(hex('serial_hex')))
    .addColumn('issuer_key_id', 'text', (c) => c.notNull().check(hex('issuer_key_id')))
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('not_before', time, (c) => c.notNull())
    .addColumn('not_after', time, (c) => c.notNull())
    .addColumn('issued_at', time, (c) => c.notNull())
    .addColumn('txn', 'text')
    .addColumn('der', bytes, (c) => c.notNull().check(nonEmpty('der')))
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('good').check(sql`status IN ('good', 'revoked')`))
    .addColumn('revoked_at', time)
    .addColumn('revocation_reason', 'text')
    .addCheckConstraint(
      'certificates_status_revocation',
      sql`(status = 'good') = (revoked_at IS NULL AND revocation_reason IS NULL)`,
    )
    .execute();
  await db.schema
    .createIndex('certificates_issuer_status')
    .on('certificates')
    .columns(['issuer_key_id', 'status'])
    .execute();
  await db.schema.createIndex('certificates_txn').on('certificates').column('txn').execute();
}

async function createSigningTransactions(db: Kysely<unknown>, { time, seq }: ColumnTypes): Promise<void> {
  let transactions = db.schema
    .createTable('signing_transactions')
    .addColumn('certificate_serial_hex', 'text', (c) => c.primaryKey().notNull().references('certificates.serial_hex'))
    .addColumn('txn', 'text', (c) => c.notNull().check(nonEmpty('txn')));
  for (const column of ['iss', 'sub', 'client_id', 'client_state'])
    transactions = transactions.addColumn(column, 'text', (c) => c.notNull());
  transactions = transactions
    .addColumn('introspection_jwt', 'text', (c) => c.notNull().check(nonEmpty('introspection_jwt')))
    .addColumn('hash_algorithm_oid', 'text', (c) => c.notNull())
    .addColumn('hashes', 'text', (c) => c.notNull())
    .addColumn('hash_count', 'integer', (c) => c.notNull())
    .addColumn('signature_format', 'text', (c) => c.notNull())
    .addColumn('conformance_level', 'text', (c) => c.notNull())
    .addColumn('created_at', time, (c) => c.notNull());
  if (seq) transactions = transactions.addColumn('seq', 'bigint', (c) => c.generatedAlwaysAsIdentity());
  await transactions.execute();
  await db.schema
    .createIndex('signing_transactions_txn')
    .on('signing_transactions')
    .columns(['txn', 'created_at'])
    .execute();
}

async function createOutbox(db: Kysely<unknown>, { time, seq }: ColumnTypes): Promise<void> {
  let outbox = db.schema
    .createTable('outbox')
    .addColumn('id', 'text', (c) => c.primaryKey().notNull().check(nonEmpty('id')))
    .addColumn('topic', 'text', (c) => c.notNull().check(nonEmpty('topic')))
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) =>
      c.notNull().defaultTo('pending').check(sql`state IN ('pending', 'queued', 'delivered', 'failed')`),
    )
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_error', 'text')
    .addColumn('created_at', time, (c) => c.notNull())
    .addColumn('updated_at', time, (c) => c.notNull());
  if (seq) outbox = outbox.addColumn('seq', 'bigint', (c) => c.generatedAlwaysAsIdentity());
  await outbox.execute();
  // SQLite indexes end in the rowid by themselves
  await db.schema
    .createIndex('outbox_topic_state')
    .on('outbox')
    .columns(['topic', 'state', 'created_at', ...(seq ? ['seq'] : [])])
    .execute();
}

async function createHealthProbe(db: Kysely<unknown>, { time, bytes }: ColumnTypes): Promise<void> {
  await db.schema
    .createTable('health_probe')
    .addColumn('id', 'text', (c) => c.primaryKey().notNull())
    .addColumn('at', time, (c) => c.notNull())
    .addColumn('filler', bytes)
    .execute();
}

async function createSignedDocuments(db: Kysely<unknown>, { time }: ColumnTypes): Promise<void> {
  await db.schema
    .createTable('signed_documents')
    .addColumn('iss', 'text', (c) => c.notNull())
    .addColumn('txn', 'text', (c) => c.notNull())
    .addColumn('hash_alg', 'text', (c) => c.notNull())
    .addColumn('hash', 'text', (c) => c.notNull())
    .addColumn('claim_id', 'text', (c) => c.notNull())
    .addColumn('request_key', 'text', (c) => c.notNull())
    .addColumn('claimed_at', time, (c) => c.notNull())
    .addColumn('signature', 'text')
    .addColumn('revocation', 'text')
    .addColumn('signed_at', time)
    .addPrimaryKeyConstraint('signed_documents_pkey', ['iss', 'txn', 'hash_alg', 'hash'])
    .execute();
}

async function createJournal(db: Kysely<unknown>, { time, bytes, seq }: ColumnTypes): Promise<void> {
  // SQLite: AUTOINCREMENT, so a purged last entry's seq is never handed out again
  await db.schema
    .createTable('journal_entries')
    .addColumn('seq', seq ? 'bigint' : 'integer', (c) =>
      seq ? c.primaryKey().generatedAlwaysAsIdentity() : c.primaryKey().autoIncrement(),
    )
    .addColumn('kind', 'text', (c) => c.notNull().check(nonEmpty('kind')))
    .addColumn('ref', 'text')
    .addColumn('recorded_at', time, (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull().check(nonEmpty('body')))
    .addColumn('leaf_hash', 'text', (c) => c.notNull().check(hex('leaf_hash')))
    .execute();
  await db.schema.createIndex('journal_entries_ref').on('journal_entries').column('ref').execute();
  await db.schema
    .createTable('journal_batches')
    .addColumn('batch_no', 'bigint', (c) => c.primaryKey().notNull())
    .addColumn('first_seq', 'bigint', (c) => c.notNull().unique())
    .addColumn('through_seq', 'bigint', (c) => c.notNull())
    .addColumn('entry_count', 'integer', (c) => c.notNull())
    .addColumn('hash_oid', 'text', (c) => c.notNull())
    .addColumn('prev_root', bytes)
    .addColumn('root', bytes, (c) => c.notNull())
    .addColumn('leaves', bytes, (c) => c.notNull())
    .addColumn('token', bytes, (c) => c.notNull())
    .addColumn('sealed_at', time, (c) => c.notNull())
    .addCheckConstraint('journal_batches_range', sql`through_seq >= first_seq`)
    .execute();
  await db.schema
    .createTable('journal_purged')
    .addColumn('seq', 'bigint', (c) => c.primaryKey().notNull())
    .addColumn('leaf_hash', 'text', (c) => c.notNull())
    .addColumn('purged_by', 'text', (c) => c.notNull())
    .execute();
}

async function createJournalRenewals(db: Kysely<unknown>, { time, bytes }: ColumnTypes): Promise<void> {
  await db.schema
    .createTable('journal_renewals')
    .addColumn('renewal_no', 'bigint', (c) => c.primaryKey().notNull())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind IN ('timestamp', 'hashtree')`))
    .addColumn('hash_oid', 'text', (c) => c.notNull())
    .addColumn('chain_of', 'bigint')
    .addColumn('through_batch', 'bigint', (c) => c.notNull())
    .addColumn('leaves', bytes, (c) => c.notNull())
    .addColumn('root', bytes, (c) => c.notNull())
    .addColumn('token', bytes, (c) => c.notNull())
    .addColumn('renewed_at', time, (c) => c.notNull())
    .execute();
}

/** the schema version release 0.1 recorded in `schema_version` (0 when the database was not made by it) */
async function releasedUpTo(db: Kysely<unknown>, shape: SchemaShape): Promise<number> {
  const tables = await db.introspection.getTables();
  if (!tables.some((t) => t.name === 'schema_version' && t.schema === shape.schema)) return 0;
  const { rows } = await sql<{ v: number | string }>`SELECT coalesce(max(version), 0) AS v FROM schema_version`.execute(
    db,
  );
  return Number(rows[0]!.v);
}

/**
 * Creates or migrates the schema; rejects, changing nothing, when the database was migrated by a newer
 * program (a migration this one does not know). The Migrator holds a lock while it works (an advisory lock
 * on PostgreSQL, the write lock of an IMMEDIATE transaction on SQLite, dialects.ts), so instances starting
 * together migrate once.
 */
export async function migrate(db: Kysely<Tables>, shape: SchemaShape): Promise<void> {
  const known = migrations(shape);
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => known },
    migrationTableSchema: shape.schema,
  });
  const { error } = await migrator.migrateToLatest();
  if (error === undefined) return;
  const newest = Object.keys(known).sort().at(-1);
  const unknown = await executedNames(db, shape).then(
    (names) => names.filter((n) => !(n in known)),
    () => [],
  );
  if (unknown.length > 0)
    throw new Error(
      `store: database schema (migration ${unknown.sort().at(-1)}) is newer than this program knows (${newest})`,
    );
  throw error instanceof Error ? error : new Error(`store: migration failed: ${String(error)}`);
}

async function executedNames(db: Kysely<Tables>, shape: SchemaShape): Promise<string[]> {
  const table = shape.schema ? sql`${sql.id(shape.schema)}.kysely_migration` : sql`kysely_migration`;
  const { rows } = await sql<{ name: string }>`SELECT name FROM ${table}`.execute(db);
  return rows.map((r) => r.name);
}
