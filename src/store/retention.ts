/**
 * Retention and archiving: the reads an evidence export and `qtsp evidence show` need, and the deletes of the
 * purge (retention/purge.ts decides the periods). Every delete repeats its conditions in the statement itself,
 * so a row that changed between the read and the delete (an entry not yet delivered, a new signing under the
 * consent) stays. Each batch is one atomic write of at most `limit` rows: signDoc's writes never wait long
 * behind it.
 */
import { sql, type Selectable } from 'kysely';
import type { StoreAccess } from './access.ts';
import { toTransaction } from './evidence.ts';
import type { SignedDocumentsTable } from './schema.ts';
import type { KeptSignature, SigningCursor, Store, StoredDocument } from './types.ts';

export type RetentionMethods = Pick<
  Store,
  'documentsOf' | 'signingsBetween' | 'purgeDeliveredOutbox' | 'purgeEvidence' | 'purgeDocuments'
>;

function toDocument(row: Selectable<SignedDocumentsTable>): StoredDocument {
  return {
    iss: row.iss,
    txn: row.txn,
    hashAlgorithmOid: row.hash_alg,
    hash: row.hash,
    requestKey: row.request_key,
    claimedAt: new Date(row.claimed_at),
    signature: row.signature,
    revocation: row.revocation ? (JSON.parse(row.revocation) as KeptSignature['revocation']) : null,
    signedAt: row.signed_at === null ? null : new Date(row.signed_at),
  };
}

/** signings recorded before `before`, oldest first, after the cursor (a keyset page: blocked rows are passed) */
function signingsPage(a: StoreAccess, from: Date | undefined, before: Date, limit: number, after?: SigningCursor) {
  let query = a.db.selectFrom('signing_transactions').selectAll().where('created_at', '<', a.time(before));
  if (from) query = query.where('created_at', '>=', a.time(from));
  if (after) {
    const at = a.time(after.createdAt);
    query = query.where((eb) =>
      eb.or([
        eb('created_at', '>', at),
        eb.and([eb('created_at', '=', at), eb('certificate_serial_hex', '>', after.certificateSerialHex)]),
      ]),
    );
  }
  return query.orderBy('created_at').orderBy('certificate_serial_hex').limit(limit).execute();
}

/**
 * One signing's delete: the transaction unless a record reporting it is still to deliver (pending, queued,
 * failed), then its certificate once no transaction names it. A signer certificate is valid for a day at most
 * (signer.validitySeconds), far less than any retention period, so our OCSP responder loses no live one.
 */
function evidenceDeletes(a: StoreAccess, serial: string, before: Date, reportedBy: string[]) {
  let transaction = a.db
    .deleteFrom('signing_transactions')
    .where('certificate_serial_hex', '=', serial)
    .where('created_at', '<', a.time(before));
  if (reportedBy.length > 0)
    transaction = transaction.where(({ not, exists, selectFrom }) =>
      not(exists(selectFrom('outbox').select('id').where('id', 'in', reportedBy).where('state', '<>', 'delivered'))),
    );
  // its entries go with it (journalDeletes), and only sealed ones can: while one waits for its seal, all wait
  transaction = transaction.where(({ not, exists }) =>
    not(exists(signingEntries(a, serial).select('seq').where('seq', '>', sealedThrough(a)))),
  );
  const certificate = a.db
    .deleteFrom('certificates')
    .where('serial_hex', '=', serial)
    .where('txn', 'is not', null) // the TSA's and OCSP responder's own certificates stay
    .where(({ not, exists, selectFrom }) =>
      not(exists(selectFrom('signing_transactions').select('txn').where('certificate_serial_hex', '=', serial))),
    );
  return [transaction, certificate, ...journalDeletes(a, serial, before)];
}

/** the kinds of entries that are a signing's evidence, purged with it; operator and CA events stay */
const SIGNING_ENTRY_KINDS = ['signing.authorized', 'signing.returned'];

/** the seq through which the journal is sealed (0: no batch yet) */
const sealedThrough = (a: StoreAccess) =>
  a.db.selectFrom('journal_batches').select(sql<number>`coalesce(max(through_seq), 0)`.as('through'));

/** a signing's entries (signing.authorized, signing.returned) */
const signingEntries = (a: StoreAccess, serial: string) =>
  a.db.selectFrom('journal_entries').where('ref', '=', serial).where('kind', 'in', SIGNING_ENTRY_KINDS);

/**
 * A purged signing's journal entries, once its transaction is gone, which evidenceDeletes allows only when all
 * of them are sealed: first their leaf hashes into journal_purged (what an audit reports as purged by policy),
 * then the entries. An entry deleted unsealed would be in no batch, its deletion unprovable.
 */
function journalDeletes(a: StoreAccess, serial: string, before: Date) {
  const purgedBy = `retention before ${before.toISOString()}`;
  const entries = () =>
    signingEntries(a, serial)
      .where('seq', '<=', sealedThrough(a))
      .where(({ not, exists, selectFrom }) =>
        not(exists(selectFrom('signing_transactions').select('txn').where('certificate_serial_hex', '=', serial))),
      );
  const tombstones = a.db
    .insertInto('journal_purged')
    .columns(['seq', 'leaf_hash', 'purged_by'])
    .expression(entries().select(['seq', 'leaf_hash', sql<string>`${purgedBy}`.as('purged_by')]));
  const remove = a.db.deleteFrom('journal_entries').where('seq', 'in', entries().select('seq'));
  return [tombstones, remove];
}

/** evidenceDeletes' statements for one signing: transaction, certificate, tombstones, entries */
const STATEMENTS_PER_SIGNING = 4;

const purgeEvidence =
  (a: StoreAccess): Store['purgeEvidence'] =>
  async (before, limit, reportedBy, after) => {
    a.ensureOpen();
    const rows = await signingsPage(a, undefined, before, limit, after);
    if (rows.length === 0) return { read: 0, deleted: 0, last: undefined };
    const queries = rows.flatMap((r) =>
      evidenceDeletes(a, r.certificate_serial_hex, before, [
        ...reportedBy({
          txn: r.txn,
          certificateSerialHex: r.certificate_serial_hex,
          createdAt: new Date(r.created_at),
        }),
      ]),
    );
    const changes = await a.write(queries);
    const deleted = changes.filter((_, i) => i % STATEMENTS_PER_SIGNING === 0).reduce((x, y) => x + y, 0);
    const last = rows.at(-1)!;
    return {
      read: rows.length,
      deleted,
      last: { createdAt: new Date(last.created_at), certificateSerialHex: last.certificate_serial_hex },
    };
  };

/** documents of consents whose signings are all gone, claimed and signed before `before` */
const purgeDocuments =
  (a: StoreAccess): Store['purgeDocuments'] =>
  async (before, limit) => {
    a.ensureOpen();
    const at = a.time(before);
    const old = () =>
      a.db
        .selectFrom('signed_documents as d')
        .where('d.claimed_at', '<', at)
        .where((eb) => eb.or([eb('d.signed_at', 'is', null), eb('d.signed_at', '<', at)]))
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('signing_transactions as t')
                .select('t.txn')
                .whereRef('t.iss', '=', 'd.iss')
                .whereRef('t.txn', '=', 'd.txn'),
            ),
          ),
        );
    const keys = await old().select(['d.iss', 'd.txn', 'd.hash_alg', 'd.hash']).limit(limit).execute();
    if (keys.length === 0) return 0;
    const deletes = keys.map((k) =>
      a.db
        .deleteFrom('signed_documents')
        .where('iss', '=', k.iss)
        .where('txn', '=', k.txn)
        .where('hash_alg', '=', k.hash_alg)
        .where('hash', '=', k.hash)
        .where('claimed_at', '<', at)
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(selectFrom('signing_transactions').select('txn').where('iss', '=', k.iss).where('txn', '=', k.txn)),
          ),
        ),
    );
    return (await a.write(deletes)).reduce((x, y) => x + y, 0);
  };

/** one statement of one text whatever the count (the writers keep their prepared statements by text) */
const purgeDeliveredOutbox =
  (a: StoreAccess): Store['purgeDeliveredOutbox'] =>
  async (before, limit) => {
    a.ensureOpen();
    const at = a.time(before);
    const remove = a.db
      .deleteFrom('outbox')
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('outbox')
          .select('id')
          .where('state', '=', 'delivered')
          .where('updated_at', '<', at)
          .orderBy('updated_at')
          .limit(limit),
      );
    const [deleted] = await a.write([remove]);
    return deleted ?? 0;
  };

export function retention(a: StoreAccess): RetentionMethods {
  return {
    async documentsOf(iss, txn) {
      a.ensureOpen();
      const rows = await a.db
        .selectFrom('signed_documents')
        .selectAll()
        .where('iss', '=', iss)
        .where('txn', '=', txn)
        .orderBy('hash_alg')
        .orderBy('claimed_at')
        .orderBy('hash')
        .execute();
      return rows.map(toDocument);
    },
    async signingsBetween(from, to, limit, after) {
      a.ensureOpen();
      return (await signingsPage(a, from, to, limit, after)).map(toTransaction);
    },
    purgeDeliveredOutbox: purgeDeliveredOutbox(a),
    purgeEvidence: purgeEvidence(a),
    purgeDocuments: purgeDocuments(a),
  };
}
