/**
 * The evidence of each signDoc (spec 5.13): the signing transaction with the introspection response exactly
 * as received, written in one atomic write with the certificate issued for it and the records to deliver.
 */
import type { Insertable, Selectable } from 'kysely';
import type { StoreAccess } from './access.ts';
import type { Statement } from './group-commit.ts';
import { columns, prepare } from './prepared.ts';
import { checkRecordSigning } from './records.ts';
import type { SigningTransactionsTable } from './schema.ts';
import { signingAuthorizedEntry } from './journal.ts';
import type { IssuedCertificate, JournalEntryInput, NewOutboxEntry, SigningTransaction, Store } from './types.ts';

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

/** the statements the evidence write shares with other parts of the store */
export interface EvidenceParts {
  insertCertificate(certificate: IssuedCertificate): Statement;
  /** the journal entry of the signing (journal.ts), in the same write */
  insertJournal: ((entry: JournalEntryInput) => Statement) | undefined;
  insertOutbox(entries: readonly NewOutboxEntry[]): Statement[];
}

export function toTransaction(row: Selectable<SigningTransactionsTable>): SigningTransaction {
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

/** the insert of every signDoc, compiled once (prepared.ts) */
function transactionInsert(a: StoreAccess): (t: SigningTransaction) => Statement {
  const insert = prepare<Insertable<SigningTransactionsTable>>((p) =>
    a.db.insertInto('signing_transactions').values(columns(p, TRANSACTION_COLUMNS)),
  );
  return (t) =>
    insert({
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
      created_at: a.time(t.createdAt),
    });
}

export function evidence(a: StoreAccess, parts: EvidenceParts): Pick<Store, 'recordSigning' | 'getTransaction'> {
  const insertTransaction = transactionInsert(a);
  return {
    async recordSigning(input, durability) {
      a.ensureOpen();
      checkRecordSigning(input);
      await a.write(
        [
          parts.insertCertificate(input.certificate),
          insertTransaction(input.transaction),
          ...parts.insertOutbox(input.outbox ?? []),
          ...(parts.insertJournal ? [parts.insertJournal(signingAuthorizedEntry(input))] : []),
        ],
        durability,
      );
    },
    async getTransaction(txn) {
      a.ensureOpen();
      const rows = await a.db
        .selectFrom('signing_transactions')
        .selectAll()
        .where('txn', '=', txn)
        .orderBy('created_at')
        .orderBy(a.insertionOrder)
        .execute();
      return rows.map(toTransaction);
    },
  };
}
