/**
 * The store (types.ts), once for both databases: every query is written here with Kysely, which speaks
 * SQLite's and PostgreSQL's SQL; what the two do differently is in dialects.ts. One contract suite
 * (test/store/store-contract.ts) runs against both.
 *
 * Reads go straight to the database. Writes are compiled here and handed to the dialect's writer as one
 * atomic unit each (SQLite: a savepoint in a group commit; PostgreSQL: a transaction), so recordSigning's
 * rows land together or not at all, and a write resolves only once it is durable.
 */
import { randomUUID } from 'node:crypto';
import { CompiledQuery, sql, type Compilable, type Insertable, type Selectable } from 'kysely';
import type { StoreDialect } from './dialects.ts';
import type { Durability, Statement } from './group-commit.ts';
import { columns, indexed, prepare, preparedByCount } from './prepared.ts';
import { claimDocuments, keepQueries, releaseDocuments } from './documents.ts';
import { checkCertificate, checkRecordSigning, checkRevocationReason, outboxPayloadJson } from './records.ts';
import type { CertificatesTable, OutboxTable, SigningTransactionsTable, Time } from './schema.ts';
import type {
  CertificateStatus,
  IssuedCertificate,
  NewOutboxEntry,
  OutboxEntry,
  OutboxState,
  SigningTransaction,
  Store,
  StoredCertificate,
} from './types.ts';

type CertificateRow = Selectable<CertificatesTable>;
type OutboxRow = Selectable<OutboxTable> & { readonly insertion_order: unknown };

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
const TRANSACTION_COLUMNS = [
  'certificate_serial_hex',
  'txn',
  'iss',
  'sub',
  'client_id',
  'client_state',
  'introspection_jwt',
  'hash_algorithm_oid',
  'hashes',
  'hash_count',
  'signature_format',
  'conformance_level',
  'key_source',
  'key_custody',
  'created_at',
] as const;

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

function toTransaction(row: Selectable<SigningTransactionsTable>): SigningTransaction {
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
    keyCustody: row.key_custody ?? null,
    certificateSerialHex: row.certificate_serial_hex,
    createdAt: new Date(row.created_at),
  };
}

function toOutbox(row: Selectable<OutboxTable>): OutboxEntry {
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

export function createStore(dialect: StoreDialect): Store {
  const { db, time } = dialect;
  const insertionOrder = sql.ref(dialect.insertionOrder);
  const probeId = randomUUID();
  let closed = false;
  const open = () => {
    if (closed) throw new Error('store is closed');
  };
  /** one atomic write (durable unless asked 'ordered'); the rows each statement changed */
  const write = (queries: readonly (Compilable | Statement)[], durability?: Durability) =>
    dialect.writer.write(
      queries.map((q) => ('compile' in q ? q.compile() : q)),
      durability,
    );
  const documents = { db, write, time };

  // the statements of every signDoc, compiled once (prepared.ts)
  const certificateInsert = prepare<Insertable<CertificatesTable>>((p) =>
    db.insertInto('certificates').values(columns(p, CERTIFICATE_COLUMNS)),
  );
  const insertCertificate = (c: IssuedCertificate) =>
    certificateInsert({
      serial_hex: c.serialHex,
      issuer_key_id: c.issuerKeyId,
      subject: c.subject,
      not_before: time(c.notBefore),
      not_after: time(c.notAfter),
      issued_at: time(c.issuedAt),
      txn: c.txn,
      der: c.der,
      status: 'good',
    });
  const transactionInsert = prepare<Insertable<SigningTransactionsTable>>((p) =>
    db.insertInto('signing_transactions').values(columns(p, TRANSACTION_COLUMNS)),
  );
  const insertTransaction = (t: SigningTransaction) =>
    transactionInsert({
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
      key_custody: t.keyCustody ?? null,
      created_at: time(t.createdAt),
    });
  /** adding an existing id is a no-op (the mediation reference_id is the id: no record twice) */
  const outboxInsert = preparedByCount<Record<string, unknown>>((count) => (p) => {
    const rows = Array.from({ length: count }, (_, i) => ({
      id: p[`id${i}`] as string,
      topic: p[`topic${i}`] as string,
      payload: p[`payload${i}`] as string,
      state: 'pending' as const,
      attempts: 0,
      created_at: p.now as Time,
      updated_at: p.now as Time,
    }));
    return db
      .insertInto('outbox')
      .values(rows)
      .onConflict((oc) => oc.column('id').doNothing());
  });
  const insertOutbox = (entries: readonly NewOutboxEntry[]): Statement[] => {
    if (entries.length === 0) return [];
    const args: Record<string, unknown> = { now: time(new Date()) };
    for (const [i, e] of entries.entries()) {
      Object.assign(args, { [`id${i}`]: e.id, [`topic${i}`]: e.topic, [`payload${i}`]: outboxPayloadJson(e) });
    }
    return [outboxInsert(entries.length)(args)];
  };
  const queuedMark = preparedByCount<Record<string, unknown>>(
    (count) => (p) =>
      db
        .updateTable('outbox')
        .set({ state: 'queued', updated_at: p.now as Time })
        .where(
          'id',
          'in',
          indexed('id', count).map((name) => p[name] as string),
        )
        .where('state', 'in', ['pending', 'queued']), // compare-and-set: a delivered or failed entry stays
  );

  /** a read compiled once (prepare): its rows */
  const read = async <R>(statement: Statement): Promise<R[]> =>
    (await db.executeQuery<R>(CompiledQuery.raw(statement.sql, [...statement.parameters]))).rows;
  const outboxInState = () => db.selectFrom('outbox').selectAll().select(insertionOrder.as('insertion_order'));
  const pendingRead = prepare<{ topic: string; limit: number }>((p) =>
    outboxInState()
      .where('topic', '=', p.topic)
      .where('state', '=', 'pending')
      .orderBy('created_at')
      .orderBy(insertionOrder)
      .limit(p.limit),
  );
  const staleRead = prepare<{ topic: string; limit: number; before: Time }>((p) =>
    outboxInState()
      .where('topic', '=', p.topic)
      .where('state', '=', 'queued')
      .where('updated_at', '<', p.before)
      .orderBy('created_at')
      .orderBy(insertionOrder)
      .limit(p.limit),
  );

  return {
    driver: dialect.driver,
    async recordSigning(input, durability) {
      open();
      checkRecordSigning(input);
      await write(
        [
          insertCertificate(input.certificate),
          insertTransaction(input.transaction),
          ...insertOutbox(input.outbox ?? []),
        ],
        durability,
      );
    },
    async getTransaction(txn) {
      open();
      const rows = await db
        .selectFrom('signing_transactions')
        .selectAll()
        .where('txn', '=', txn)
        .orderBy('created_at')
        .orderBy(insertionOrder)
        .execute();
      return rows.map(toTransaction);
    },
    async addCertificate(certificate) {
      open();
      checkCertificate(certificate);
      await write([insertCertificate(certificate)]);
    },
    async certificateStatus(issuerKeyId, serialHex) {
      open();
      const row = await db
        .selectFrom('certificates')
        .select(['status', 'revoked_at', 'revocation_reason'])
        .where('issuer_key_id', '=', issuerKeyId.toLowerCase())
        .where('serial_hex', '=', serialHex.toLowerCase())
        .executeTakeFirst();
      return row ? statusOf(row) : { status: 'unknown' };
    },
    async getCertificate(serialHex) {
      open();
      const row = await db
        .selectFrom('certificates')
        .selectAll()
        .where('serial_hex', '=', serialHex.toLowerCase())
        .executeTakeFirst();
      return row ? toCertificate(row) : undefined;
    },
    async revokeCertificate(serialHex, reason, at) {
      open();
      checkRevocationReason(reason);
      const revoke = db
        .updateTable('certificates')
        .set({ status: 'revoked', revoked_at: time(at), revocation_reason: reason })
        .where('serial_hex', '=', serialHex.toLowerCase())
        .where('status', '=', 'good'); // the first revocation stays
      const [changed] = await write([revoke]);
      return changed === 1;
    },
    async revokedCertificates(issuerKeyId) {
      open();
      const rows = await db
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
    async addOutbox(entries) {
      open();
      const queries = insertOutbox(entries);
      if (queries.length > 0) await write(queries);
    },
    async outboxPending(topic, limit, queuedBefore) {
      open();
      // Two reads, each a range of an index, merged here (issue 12): one query with `pending OR (queued AND
      // updated_at < t)` made both databases read every entry of the topic, delivered ones included, on every
      // relay pass (3.4 ms with 20,000 entries on SQLite, growing with the outbox).
      // Both compiled once (prepared.ts): the relay reads them on every pass.
      const pending = await read<OutboxRow>(pendingRead({ topic, limit }));
      if (!queuedBefore) return pending.map(toOutbox);
      const stale = await read<OutboxRow>(staleRead({ topic, limit, before: time(queuedBefore) }));
      const at = (r: OutboxRow) => new Date(r.created_at).getTime();
      const order = (a: OutboxRow, b: OutboxRow) =>
        at(a) - at(b) || Number(a.insertion_order) - Number(b.insertion_order);
      return [...pending, ...stale].sort(order).slice(0, limit).map(toOutbox);
    },
    async getOutbox(id) {
      open();
      const row = await db.selectFrom('outbox').selectAll().where('id', '=', id).executeTakeFirst();
      return row ? toOutbox(row) : undefined;
    },
    async markOutbox(id, state, error, onlyFrom) {
      open();
      if (onlyFrom?.length === 0) return false; // no state allowed: nothing to change
      let mark = db
        .updateTable('outbox')
        .set({ state, updated_at: time(new Date()) })
        .where('id', '=', id);
      // an error counts one failed attempt and becomes last_error; a mark without one keeps the last error
      if (error !== undefined) mark = mark.set((eb) => ({ attempts: eb('attempts', '+', 1), last_error: error }));
      // compare-and-set: a relay must not turn a delivered entry back into queued
      if (onlyFrom) mark = mark.where('state', 'in', onlyFrom);
      const [changed] = await write([mark]);
      return changed === 1;
    },
    async markOutboxQueued(ids) {
      open();
      if (ids.length === 0) return 0;
      const args: Record<string, unknown> = { now: time(new Date()) };
      for (const [i, id] of ids.entries()) args[`id${i}`] = id;
      const [changed] = await write([queuedMark(ids.length)(args)], 'ordered');
      return changed ?? 0;
    },
    async outboxCounts(topic) {
      open();
      const counts: Record<OutboxState, number> = { pending: 0, queued: 0, delivered: 0, failed: 0 };
      const rows = await db
        .selectFrom('outbox')
        .select((eb) => ['state', eb.fn.countAll().as('n')])
        .where('topic', '=', topic)
        .groupBy('state')
        .execute();
      for (const row of rows) counts[row.state] = Number(row.n); // PostgreSQL counts in bigint (a string)
      return counts;
    },
    async claimDocuments(claim, staleBefore) {
      open();
      return claimDocuments(documents, claim, staleBefore);
    },
    async keepSignatures({ claim, signatures, outbox }) {
      open();
      // the signatures and the mediation record land together or not at all (documents.ts keepQueries)
      await write([...keepQueries(documents, claim, signatures), ...insertOutbox(outbox)]);
    },
    async releaseDocuments(claim) {
      open();
      await releaseDocuments(documents, claim);
    },
    async ping() {
      open();
      // a committed write: a database that cannot write (disk full, file at its cap, read-only replica)
      // fails here as an evidence record would; the deleted row's pages are reused
      const row = {
        id: probeId,
        at: time(new Date()),
        ...(dialect.probeFiller ? { filler: dialect.probeFiller } : {}),
      };
      await write([db.insertInto('health_probe').values(row), db.deleteFrom('health_probe').where('id', '=', probeId)]);
    },
    async close() {
      if (closed) return;
      closed = true;
      await dialect.close(); // writes already asked for are committed first
    },
  };
}
