/**
 * The journal: an append-only table of entries, each one canonical JSON text (RFC 8785: any JCS
 * implementation reproduces the bytes, and an auditor reads them without an ASN.1 schema per kind) and its
 * SHA-256, the leaf hash. Signing evidence becomes an entry inside the write that stores it (entryInsert,
 * used by evidence.ts and documents.ts): both rows land or neither. No statement here updates an entry; the
 * only delete is retention's (retention.ts), which first copies the leaf hash into journal_purged.
 *
 * Batches (the sealer is src/journal/seal.ts) cover entries by seq range: batch n holds every entry with
 * seq in (first_seq - 1, through_seq]. The range is complete when sealed because the sealer seals only up to
 * horizon() (journal-horizon.ts): no entry with a seq at or below it can commit later, on PostgreSQL too, where
 * identity values are handed out before their transactions commit.
 */
import { hash } from 'node:crypto';
import type { Insertable, Selectable } from 'kysely';
import { canonicalJson } from '../util/canonical-json.ts';
import type { StoreAccess } from './access.ts';
import { sealState } from './journal-state.ts';
import type { Statement } from './group-commit.ts';
import { horizon } from './journal-horizon.ts';
import { columns, prepare } from './prepared.ts';
import { keptRevocationInfo } from './records.ts';
import type { JournalBatchesTable, JournalEntriesTable, JournalRenewalsTable } from './schema.ts';
import type {
  JournalBatch,
  JournalEntryInput,
  JournalGroup,
  JournalLeaf,
  JournalRenewal,
  JournalStore,
  KeptSignature,
  RecordSigningInput,
  RenewalLeaf,
  StoredJournalEntry,
} from './types.ts';

/**
 * the version of the entries' layout, inside every body; 2: signing.returned carries its response's
 * revocationInfo once, not once per signature; 3: the signing entries carry the SHA-256 of the JWT, the
 * certificate, the signatures and the revocationInfo, which their rows keep (docs/evidence.md)
 */
export const JOURNAL_FORMAT = 3;
const LEAF_BYTES = 8 + 32;

/** The one encoding of an entry: canonical JSON of {v, kind, ref, at, data}. */
export function encodeEntry(entry: JournalEntryInput): { body: string; leafHash: string } {
  const body = canonicalJson({
    v: JOURNAL_FORMAT,
    kind: entry.kind,
    ref: entry.ref,
    at: entry.at.toISOString(),
    data: entry.data,
  });
  return { body, leafHash: sha256Hex(body) };
}

/**
 * SHA-256 in lowercase hex (a string as its UTF-8 bytes): the leaf hash, and how format 3 names an object that
 * another row keeps (sha256sum prints it so); node's one-shot hash, cheaper than a Hash object per value
 */
export function sha256Hex(bytes: Buffer | string): string {
  return hash('sha256', bytes, 'hex');
}

/** a signature object's bytes from its Base64 as kept; undefined when that text is not canonical Base64 */
export function signatureBytes(base64: string): Buffer | undefined {
  const bytes = Buffer.from(base64, 'base64');
  return bytes.toString('base64') === base64 ? bytes : undefined;
}

type RevocationInfo = { readonly ocsp?: readonly string[]; readonly crl?: readonly string[] } | null | undefined;

/**
 * The bytes format 3 hashes for a revocationInfo: canonical JSON of {crl, ocsp}, each distinct value once in
 * the order first met (as format 2 carried it); null when there is none.
 */
export function revocationInfoText(info: RevocationInfo): string | null {
  if (!info) return null;
  return canonicalJson({ ocsp: [...new Set(info.ocsp ?? [])], crl: [...new Set(info.crl ?? [])] });
}

/** signDoc step 6: why we sign (the bank-signed introspection answer, the consented digests, the certificate) */
export function signingAuthorizedEntry(input: RecordSigningInput): JournalEntryInput {
  const t = input.transaction;
  return {
    kind: 'signing.authorized',
    ref: t.certificateSerialHex,
    at: t.createdAt,
    data: {
      txn: t.txn,
      iss: t.iss,
      sub: t.sub,
      clientId: t.clientId,
      clientState: t.clientState,
      introspectionJwtSha256: sha256Hex(t.introspectionJwt),
      hashAlgorithmOid: t.hashAlgorithmOid,
      hashes: [...t.hashes],
      signatureFormat: t.signatureFormat,
      conformanceLevel: t.conformanceLevel,
      keySource: t.keySource,
      keyCustody: t.keyCustody,
      certificateSha256: sha256Hex(input.certificate.der),
    },
  };
}

/**
 * signDoc step 10: the signatures returned for a claim's documents and the revocationInfo returned with them,
 * each by its SHA-256 (the kept rows hold them)
 */
export function signingReturnedEntry(input: {
  readonly iss: string;
  readonly txn: string;
  readonly hashAlgorithmOid: string;
  readonly evidenceSerialHex: string;
  readonly signatures: readonly KeptSignature[];
  readonly at: Date;
}): JournalEntryInput {
  const revocationInfo = revocationInfoText(keptRevocationInfo(input.signatures));
  return {
    kind: 'signing.returned',
    ref: input.evidenceSerialHex,
    at: input.at,
    data: {
      iss: input.iss,
      txn: input.txn,
      hashAlgorithmOid: input.hashAlgorithmOid,
      signatures: input.signatures.map((s) => ({
        hash: s.hash,
        signatureSha256: sha256Hex(Buffer.from(s.signature, 'base64')),
      })),
      revocationInfoSha256: revocationInfo === null ? null : sha256Hex(revocationInfo),
    },
  };
}

const ENTRY_COLUMNS = ['kind', 'ref', 'recorded_at', 'body', 'leaf_hash'] as const;

/** The insert of one entry, compiled once (prepared.ts): one statement for the evidence write to carry. */
export function entryInsert(a: StoreAccess): (entry: JournalEntryInput) => Statement {
  const insert = prepare<Insertable<JournalEntriesTable>>((p) =>
    a.db.insertInto('journal_entries').values(columns(p, ENTRY_COLUMNS)),
  );
  return (entry) => {
    const { body, leafHash } = encodeEntry(entry);
    return insert({ kind: entry.kind, ref: entry.ref, recorded_at: a.time(entry.at), body, leaf_hash: leafHash });
  };
}

function toEntry(row: Selectable<JournalEntriesTable>): StoredJournalEntry {
  return {
    seq: Number(row.seq),
    kind: row.kind,
    ref: row.ref,
    recordedAt: new Date(row.recorded_at),
    body: Buffer.from(row.body, 'utf8'),
    leafHash: Buffer.from(row.leaf_hash, 'hex'),
  };
}

export function encodeLeaves(leaves: readonly JournalLeaf[]): Buffer {
  return encodeKeyed(leaves.map((l) => ({ key: l.seq, hash: l.hash })));
}

function decodeLeaves(bytes: Buffer): JournalLeaf[] {
  return decodeKeyed(bytes, LEAF_BYTES - 8).map((l) => ({ seq: l.key, hash: l.hash }));
}

/** leaves as stored: per leaf its key (8 bytes, big-endian) and its hash, all hashes of one length */
function encodeKeyed(leaves: readonly RenewalLeaf[]): Buffer {
  const size = 8 + (leaves[0]?.hash.length ?? 0);
  const out = Buffer.alloc(leaves.length * size);
  leaves.forEach((leaf, i) => {
    if (leaf.hash.length !== size - 8) throw new Error('journal: leaves of one tree have hashes of one length');
    out.writeBigUInt64BE(BigInt(leaf.key), i * size);
    leaf.hash.copy(out, i * size + 8);
  });
  return out;
}

function decodeKeyed(bytes: Buffer, hashLength: number): RenewalLeaf[] {
  const size = 8 + hashLength;
  const leaves: RenewalLeaf[] = [];
  for (let at = 0; at + size <= bytes.length; at += size)
    leaves.push({ key: Number(bytes.readBigUInt64BE(at)), hash: Buffer.from(bytes.subarray(at + 8, at + size)) });
  return leaves;
}

const GROUP_BYTES = 8 + 8 + 32;

/** data groups as stored: per group its two seqs (8 bytes each, big-endian) and its SHA-256 */
function encodeGroups(groups: readonly JournalGroup[]): Buffer | null {
  if (groups.length === 0) return null;
  const out = Buffer.alloc(groups.length * GROUP_BYTES);
  groups.forEach((g, i) => {
    out.writeBigUInt64BE(BigInt(g.authorizedSeq), i * GROUP_BYTES);
    out.writeBigUInt64BE(BigInt(g.returnedSeq), i * GROUP_BYTES + 8);
    g.hash.copy(out, i * GROUP_BYTES + 16);
  });
  return out;
}

function decodeGroups(bytes: Buffer): JournalGroup[] {
  const groups: JournalGroup[] = [];
  for (let at = 0; at + GROUP_BYTES <= bytes.length; at += GROUP_BYTES)
    groups.push({
      authorizedSeq: Number(bytes.readBigUInt64BE(at)),
      returnedSeq: Number(bytes.readBigUInt64BE(at + 8)),
      hash: Buffer.from(bytes.subarray(at + 16, at + GROUP_BYTES)),
    });
  return groups;
}

function toRenewal(row: Selectable<JournalRenewalsTable>): JournalRenewal {
  if (row.kind !== 'timestamp' && row.kind !== 'hashtree') throw new Error(`journal: renewal kind ${row.kind}`);
  return {
    renewalNo: Number(row.renewal_no),
    kind: row.kind,
    hashOid: row.hash_oid,
    chainOf: row.chain_of === null ? null : Number(row.chain_of),
    throughBatch: Number(row.through_batch),
    leaves: decodeKeyed(Buffer.from(row.leaves), row.root.length), // the root's algorithm hashed the leaves
    root: Buffer.from(row.root),
    token: Buffer.from(row.token),
    renewedAt: new Date(row.renewed_at),
  };
}

/** inserts a renewal unless its number is taken: true when this call inserted it */
async function addRenewal(a: StoreAccess, r: JournalRenewal): Promise<boolean> {
  a.ensureOpen();
  const [changed] = await a.write([
    a.db
      .insertInto('journal_renewals')
      .values({
        renewal_no: r.renewalNo,
        kind: r.kind,
        hash_oid: r.hashOid,
        chain_of: r.chainOf,
        through_batch: r.throughBatch,
        leaves: encodeKeyed(r.leaves),
        root: r.root,
        token: r.token,
        renewed_at: a.time(r.renewedAt),
      })
      .onConflict((oc) => oc.doNothing()),
  ]);
  return changed === 1;
}

function toBatch(row: Selectable<JournalBatchesTable>): JournalBatch {
  return {
    batchNo: Number(row.batch_no),
    firstSeq: Number(row.first_seq),
    throughSeq: Number(row.through_seq),
    hashOid: row.hash_oid,
    prevRoot: row.prev_root ? Buffer.from(row.prev_root) : null,
    root: Buffer.from(row.root),
    leaves: decodeLeaves(Buffer.from(row.leaves)),
    token: Buffer.from(row.token),
    ...(row.second_token ? { secondToken: Buffer.from(row.second_token) } : {}),
    ...(row.groups ? { groups: decodeGroups(Buffer.from(row.groups)) } : {}),
    sealedAt: new Date(row.sealed_at),
  };
}

/** inserts a batch unless its number or first seq is taken: true when this call inserted it */
async function addBatch(a: StoreAccess, b: JournalBatch): Promise<boolean> {
  a.ensureOpen();
  const [changed] = await a.write([
    a.db
      .insertInto('journal_batches')
      .values({
        batch_no: b.batchNo,
        first_seq: b.firstSeq,
        through_seq: b.throughSeq,
        entry_count: b.leaves.length,
        hash_oid: b.hashOid,
        prev_root: b.prevRoot,
        root: b.root,
        leaves: encodeLeaves(b.leaves),
        token: b.token,
        second_token: b.secondToken ?? null,
        groups: encodeGroups(b.groups ?? []),
        sealed_at: a.time(b.sealedAt),
      })
      .onConflict((oc) => oc.doNothing()),
  ]);
  return changed === 1;
}

export function journal(a: StoreAccess, driver: 'sqlite' | 'postgres', journaling = true): JournalStore {
  return { ...journalRows(a, driver, journaling), sealState: () => sealState(a) };
}

/** the journal's rows as the sealer, the audit and the evidence export read and write them */
type JournalRows = Omit<JournalStore, 'sealState'>;

function journalRows(a: StoreAccess, driver: 'sqlite' | 'postgres', journaling: boolean): JournalRows {
  const insert = entryInsert(a);
  return {
    async append(entry) {
      a.ensureOpen();
      if (journaling) await a.write([insert(entry)]);
    },
    async horizon() {
      a.ensureOpen();
      return horizon(a, driver);
    },
    ...entryReads(a),
    ...batchReads(a),
    addBatch: (b) => addBatch(a, b),
    addRenewal: (r) => addRenewal(a, r),
  };
}

/** the entries, by seq range or by ref, and the tombstones retention left in their place */
function entryReads(a: StoreAccess): Pick<JournalRows, 'entries' | 'entriesOf' | 'tombstones'> {
  return {
    async entries(afterSeq, throughSeq) {
      a.ensureOpen();
      const rows = await a.db
        .selectFrom('journal_entries')
        .selectAll()
        .where('seq', '>', afterSeq)
        .where('seq', '<=', throughSeq)
        .orderBy('seq')
        .execute();
      return rows.map(toEntry);
    },
    async entriesOf(ref) {
      a.ensureOpen();
      const rows = await a.db.selectFrom('journal_entries').selectAll().where('ref', '=', ref).orderBy('seq').execute();
      return rows.map(toEntry);
    },
    async tombstones(afterSeq, throughSeq) {
      a.ensureOpen();
      const rows = await a.db
        .selectFrom('journal_purged')
        .selectAll()
        .where('seq', '>', afterSeq)
        .where('seq', '<=', throughSeq)
        .orderBy('seq')
        .execute();
      return rows.map((r) => ({
        seq: Number(r.seq),
        leafHash: Buffer.from(r.leaf_hash, 'hex'),
        purgedBy: r.purged_by,
      }));
    },
  };
}

/** the sealed batches and the renewals of their records */
function batchReads(a: StoreAccess): Pick<JournalRows, 'lastBatch' | 'batchOf' | 'batches' | 'renewals'> {
  const batchRows = () => a.db.selectFrom('journal_batches').selectAll();
  return {
    async lastBatch() {
      a.ensureOpen();
      const row = await batchRows().orderBy('batch_no', 'desc').limit(1).executeTakeFirst();
      return row && toBatch(row);
    },
    async batchOf(seq) {
      a.ensureOpen();
      const row = await batchRows()
        .where('first_seq', '<=', seq)
        .where('through_seq', '>=', seq)
        .orderBy('batch_no')
        .limit(1)
        .executeTakeFirst();
      return row && toBatch(row);
    },
    async batches(fromNo, limit) {
      a.ensureOpen();
      const rows = await batchRows().where('batch_no', '>=', fromNo).orderBy('batch_no').limit(limit).execute();
      return rows.map(toBatch);
    },
    async renewals() {
      a.ensureOpen();
      const rows = await a.db.selectFrom('journal_renewals').selectAll().orderBy('renewal_no').execute();
      return rows.map(toRenewal);
    },
  };
}
