/**
 * Documents signed under a consent (signing/once.ts says what for: one signature per document): one row per
 * (iss, txn, hash algorithm, hash), the primary key, so two requests (on one instance, or on several sharing
 * PostgreSQL) cannot both claim one document: the database decides, not a check-then-insert in our code.
 *
 * A row is first a claim (claim_id of the request, signature null) and then, in the write that also adds the
 * mediation record, the kept signature. Written with Kysely once for SQLite and PostgreSQL, for the store's
 * writer (one atomic write of a list of statements: a statement that fails rolls the whole write back), so
 * only portable SQL: INSERT ... ON CONFLICT DO NOTHING, compare-and-set UPDATEs, and a guard (keepQueries).
 *
 * Claims and releases are 'ordered' writes (group-commit.ts Durability): committed and visible to every instance
 * at once, but not each waiting for its own fsync. A claim matters only once the evidence write that follows it
 * exists, and that write is durable and flushes the claim with it; a claim lost in a crash before that leaves
 * nothing signed behind, and a lost release only makes the claim go stale. That saves signDoc one disk flush.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Kysely, type Selectable } from 'kysely';
import type { StoreAccess } from './access.ts';
import type { Statement } from './group-commit.ts';
import { indexed, prepare, preparedByCount } from './prepared.ts';
import type { SignedDocumentsTable, Tables, Time } from './schema.ts';
import { signingReturnedEntry } from './journal.ts';
import type {
  ClaimOutcome,
  DocumentClaim,
  JournalEntryInput,
  KeepOutcome,
  KeptSignature,
  NewOutboxEntry,
  Store,
} from './types.ts';

/** what this module needs of the store: reads, and its atomic writer (the rows each statement changed) */
export type DocumentsAccess = Pick<StoreAccess, 'db' | 'write' | 'time' | 'rowLocks' | 'ensureOpen'>;

type Row = Selectable<SignedDocumentsTable>;

function ofConsent(db: Kysely<Tables>, claim: DocumentClaim) {
  return {
    select: () =>
      db
        .selectFrom('signed_documents')
        .selectAll()
        .where('iss', '=', claim.iss)
        .where('txn', '=', claim.txn)
        .where('hash_alg', '=', claim.hashAlgorithmOid),
    update: () =>
      db
        .updateTable('signed_documents')
        .where('iss', '=', claim.iss)
        .where('txn', '=', claim.txn)
        .where('hash_alg', '=', claim.hashAlgorithmOid),
  };
}

/** claims `count` documents nobody holds; the rows of documents held already stay (0 changes for them) */
function claimStatement(db: Kysely<Tables>) {
  return preparedByCount<Record<string, unknown>>((count) => (p) => {
    const rows = indexed('hash', count).map((hash) => ({
      iss: p.iss as string,
      txn: p.txn as string,
      hash_alg: p.hash_alg as string,
      hash: p[hash] as string,
      claim_id: p.claim_id as string,
      request_key: p.request_key as string,
      claimed_at: p.claimed_at as Time,
      signature: null,
      revocation: null,
      signed_at: null,
    }));
    return db
      .insertInto('signed_documents')
      .values(rows)
      .onConflict((oc) => oc.doNothing());
  });
}

/** one signature onto its row, if the claim is still ours */
function keepStatement(db: Kysely<Tables>) {
  return prepare<{
    iss: string;
    txn: string;
    hash_alg: string;
    hash: string;
    claim_id: string;
    signature: string;
    revocation: string | null;
    signed_at: Time;
  }>((p) =>
    db
      .updateTable('signed_documents')
      .set({ signature: p.signature, revocation: p.revocation, signed_at: p.signed_at })
      .where('iss', '=', p.iss)
      .where('txn', '=', p.txn)
      .where('hash_alg', '=', p.hash_alg)
      .where('hash', '=', p.hash)
      .where('claim_id', '=', p.claim_id)
      .where('signature', 'is', null),
  );
}

/**
 * fails the write (a NOT NULL violation) unless all `count` documents hold a signature of this claim and the
 * evidence of the signer certificate `serial` exists (written 'ordered' before signing: a database crash in
 * between could lose it, and no signature may leave whose evidence is lost)
 */
function guardStatement(db: Kysely<Tables>) {
  const text = (value: string) => sql<string>`CAST(${value} AS TEXT)`; // typed for PostgreSQL's INSERT ... SELECT
  return preparedByCount<Record<string, unknown>>((count) => (p) => {
    const keptByUs = db
      .selectFrom('signed_documents')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('iss', '=', p.iss as string)
      .where('txn', '=', p.txn as string)
      .where('hash_alg', '=', p.hash_alg as string)
      .where(
        'hash',
        'in',
        indexed('hash', count).map((hash) => p[hash] as string),
      )
      .where('claim_id', '=', p.claim_id as string)
      .where('signature', 'is not', null);
    const evidence = db
      .selectFrom('signing_transactions')
      .select('txn')
      .where('certificate_serial_hex', '=', p.serial as string);
    return db
      .insertInto('signed_documents')
      .columns(['iss', 'txn', 'hash_alg', 'hash', 'claim_id', 'request_key'])
      .expression(
        db
          .selectNoFrom([
            sql<string>`CAST(NULL AS TEXT)`.as('iss'),
            text(p.txn as string).as('txn'),
            text(p.hash_alg as string).as('hash_alg'),
            text('claim lost').as('hash'),
            text(p.claim_id as string).as('claim_id'),
            text(p.request_key as string).as('request_key'),
          ])
          .where((w) => w.or([w(keptByUs, '<>', p.count as number), w.not(w.exists(evidence))])),
      );
  });
}

/** The statements of every signDoc for one database, compiled once (prepared.ts). */
function statementsOf(db: Kysely<Tables>) {
  return { claim: claimStatement(db), keep: keepStatement(db), guard: guardStatement(db) };
}

const statements = new WeakMap<Kysely<Tables>, ReturnType<typeof statementsOf>>();

function statementsFor(db: Kysely<Tables>): ReturnType<typeof statementsOf> {
  let s = statements.get(db);
  if (!s) {
    s = statementsOf(db);
    statements.set(db, s);
  }
  return s;
}

/** the arguments naming a claim's consent, request and documents (hash0 ..) */
function claimArgs(claim: DocumentClaim, hashes: readonly string[]): Record<string, unknown> {
  const args: Record<string, unknown> = {
    iss: claim.iss,
    txn: claim.txn,
    hash_alg: claim.hashAlgorithmOid,
    claim_id: claim.claimId,
  };
  for (const [i, hash] of hashes.entries()) args[`hash${i}`] = hash;
  return args;
}

function kept(row: Row): KeptSignature {
  return {
    hash: row.hash,
    signature: row.signature!,
    revocation: row.revocation ? (JSON.parse(row.revocation) as KeptSignature['revocation']) : null,
  };
}

/** What the rows of the claim's documents say, when some exist; `takeOver`: abandoned claims to take. */
function judge(
  claim: DocumentClaim,
  rows: Map<string, Row>,
  staleBefore: Date,
): ClaimOutcome | { kind: 'take_over'; rows: Row[] } {
  const index = (hash: string) => claim.hashes.indexOf(hash);
  if (rows.size !== claim.hashes.length) return { kind: 'mixed', index: claim.hashes.findIndex((h) => rows.has(h)) };
  const other = claim.hashes.find((h) => rows.get(h)!.request_key !== claim.requestKey);
  if (other !== undefined)
    return { kind: 'other_request', index: index(other), requestKey: rows.get(other)!.request_key };
  const unsigned = claim.hashes.filter((h) => rows.get(h)!.signature === null);
  if (unsigned.length === 0) return { kind: 'signed', signatures: claim.hashes.map((h) => kept(rows.get(h)!)) };
  if (unsigned.length !== claim.hashes.length) return { kind: 'mixed', index: index(unsigned[0]!) };
  const live = unsigned.find((h) => new Date(rows.get(h)!.claimed_at).getTime() >= staleBefore.getTime());
  if (live !== undefined) return { kind: 'in_progress', index: index(live) };
  return { kind: 'take_over', rows: unsigned.map((h) => rows.get(h)!) };
}

/** tries at most this often when concurrent requests keep winning parts of a claim */
const LAST_ATTEMPT = 20;

/**
 * Claims the documents of `claim` for its request, or says why not (types.ts ClaimOutcome). Each write is
 * conditional (insert if absent, take over if still the abandoned claim we read); when a concurrent request
 * won part of it, what we got is given back and the rows are judged again as committed.
 */
async function claimDocuments(a: DocumentsAccess, claim: DocumentClaim, staleBefore: Date): Promise<ClaimOutcome> {
  for (let attempt = 0; ; attempt++) {
    // let the concurrent write commit (attempt 1 reads what attempt 0 met)
    if (attempt > 1) await sleep(Math.min(5 * (attempt - 1), 50));
    const got = await tryClaim(a, claim, staleBefore, attempt);
    if (got === 'race') continue;
    if (typeof got !== 'number') return got;
    if (got === claim.hashes.length) return { kind: 'claimed' };
    // some were held already (signed before, or a concurrent request won them): give back what we got, judge again
    if (got > 0) await releaseDocuments(a, claim);
    if (attempt >= LAST_ATTEMPT)
      throw new Error(`documents of txn ${claim.txn} could not be claimed: concurrent requests kept racing`);
  }
}

/**
 * One attempt: the outcome when the rows decide it, else how many documents the conditional write claimed;
 * 'race' when the database rolled the write back for a concurrent one (then try again).
 */
async function tryClaim(
  a: DocumentsAccess,
  claim: DocumentClaim,
  staleBefore: Date,
  attempt: number,
): Promise<ClaimOutcome | number | 'race'> {
  // The first attempt inserts without reading: documents are new under their consent in all but a retry,
  // and the insert claims exactly those nobody holds. Rows are read (and judged) only once some exist.
  const rows = attempt === 0 ? new Map<string, Row>() : await claimRows(a, claim);
  try {
    if (rows.size === 0) return total(await insertClaim(a, claim));
    const verdict = judge(claim, rows, staleBefore);
    if (verdict.kind !== 'take_over') return verdict;
    return total(await takeOver(a, claim, verdict.rows));
  } catch (err) {
    if (!isRace(err) || attempt >= LAST_ATTEMPT) throw err;
    return 'race';
  }
}

const total = (changes: readonly number[]) => changes.reduce((x, y) => x + y, 0);

/** the rows of the claim's documents, by hash */
async function claimRows(a: DocumentsAccess, claim: DocumentClaim): Promise<Map<string, Row>> {
  const rows = await ofConsent(a.db, claim)
    .select()
    .where('hash', 'in', [...claim.hashes])
    .execute();
  return new Map(rows.map((r) => [r.hash, r]));
}

/** inserts the claim of every document nobody holds; the rows each insert changed */
function insertClaim(a: DocumentsAccess, claim: DocumentClaim): Promise<number[]> {
  const insert = statementsFor(a.db).claim(claim.hashes.length)({
    ...claimArgs(claim, claim.hashes),
    request_key: claim.requestKey,
    claimed_at: a.time(claim.claimedAt),
  });
  return a.write([insert], 'ordered');
}

/** every document's claim was abandoned (its request died): take each over only if it is still that claim */
function takeOver(a: DocumentsAccess, claim: DocumentClaim, abandoned: readonly Row[]): Promise<number[]> {
  const at = a.time(claim.claimedAt);
  return a.write(
    abandoned.map((r) =>
      ofConsent(a.db, claim)
        .update()
        .set({ claim_id: claim.claimId, claimed_at: at })
        .where('hash', '=', r.hash)
        .where('claim_id', '=', r.claim_id)
        .where('signature', 'is', null),
    ),
    'ordered',
  );
}

/**
 * PostgreSQL's deadlock and serialization failures between two requests inserting the same documents in
 * different orders: the write was rolled back, try again.
 */
function isRace(err: unknown): boolean {
  const code = String((err as { code?: unknown }).code ?? '');
  return code === '40P01' || code === '40001' || code === '23505' || code.startsWith('SQLITE_BUSY');
}

/**
 * The statements that keep the signatures of a claim, for the write that also adds the mediation record:
 * each signature onto its row if the claim is still ours, then a guard that fails the whole write unless every
 * document of the claim now holds our signature (a claim taken over as abandoned): no record is then billed
 * for signatures that were not kept. The guard inserts a row with a null primary-key column only in that case,
 * the one statement failure SQLite and PostgreSQL both raise inside a write (a NOT NULL violation).
 */
function keepQueries(
  a: Pick<DocumentsAccess, 'db' | 'time'>,
  claim: DocumentClaim,
  signatures: readonly KeptSignature[],
  evidenceSerialHex: string,
): Statement[] {
  const { keep, guard } = statementsFor(a.db);
  const signedAt = a.time(new Date());
  const updates = signatures.map((s) =>
    keep({
      iss: claim.iss,
      txn: claim.txn,
      hash_alg: claim.hashAlgorithmOid,
      hash: s.hash,
      claim_id: claim.claimId,
      signature: s.signature,
      revocation: s.revocation ? JSON.stringify(s.revocation) : null,
      signed_at: signedAt,
    }),
  );
  const hashes = signatures.map((s) => s.hash);
  return [
    ...updates,
    guard(hashes.length)({
      ...claimArgs(claim, hashes),
      request_key: claim.requestKey,
      count: signatures.length,
      serial: evidenceSerialHex,
    }),
  ];
}

/**
 * How long keepSignatures, once its write failed, asks whether the write committed all the same (its answer
 * lost with the connection after COMMIT was sent): a write in flight ends in a moment; a database unreachable
 * for longer leaves the answer to the request's retry (signing/once.ts returns signatures kept).
 */
export const KEEP_CONFIRM_MS = 5_000;
const CONFIRM_POLL_MS = 50;

/**
 * Whether every document of `hashes` holds a signature of this claim, as committed: true or false once the
 * database tells, undefined when it did not within the deadline. The read runs on another connection (the
 * failed one is dropped). On PostgreSQL it locks the rows (FOR SHARE NOWAIT): a write still committing holds
 * them, so a read meeting that lock asks again rather than take the rows as they were before. The rows are
 * selected by key and claim only: a condition on the signature would skip the old row version unlocked.
 */
async function keptByClaim(
  a: DocumentsAccess,
  claim: DocumentClaim,
  hashes: readonly string[],
  deadline: number,
): Promise<boolean | undefined> {
  const read = ofConsent(a.db, claim)
    .select()
    .where('hash', 'in', [...hashes])
    .where('claim_id', '=', claim.claimId)
    .$if(a.rowLocks, (q) => q.forShare().noWait());
  for (;;) {
    try {
      const rows = await read.execute();
      return rows.length === hashes.length && rows.every((r) => r.signature !== null);
    } catch {
      // 55P03: the write is still in flight; a connection error: the database is not back yet
      if (Date.now() + CONFIRM_POLL_MS >= deadline) return undefined;
      await sleep(CONFIRM_POLL_MS);
    }
  }
}

/**
 * The write that keeps the signatures with their records; resolves once they are kept. When the write fails, the
 * database is asked whether it committed all the same: the answer to a COMMIT can be lost with its connection
 * after the server committed. Then this resolves with that write error's message in `lostAnswer`.
 */
async function keepSignatures(
  a: DocumentsAccess,
  write: readonly Statement[],
  claim: DocumentClaim,
  hashes: readonly string[],
): Promise<KeepOutcome> {
  try {
    await a.write(write);
    return {};
  } catch (err) {
    const kept = await keptByClaim(a, claim, hashes, Date.now() + KEEP_CONFIRM_MS);
    if (kept === true) return { lostAnswer: (err as Error).message };
    throw err;
  }
}

/** Gives back the documents a request claimed and did not sign (its claim only). */
async function releaseDocuments(a: DocumentsAccess, claim: DocumentClaim): Promise<void> {
  await a.write(
    [
      a.db
        .deleteFrom('signed_documents')
        .where('iss', '=', claim.iss)
        .where('txn', '=', claim.txn)
        .where('hash_alg', '=', claim.hashAlgorithmOid)
        .where('hash', 'in', [...claim.hashes])
        .where('claim_id', '=', claim.claimId)
        .where('signature', 'is', null),
    ],
    'ordered',
  ); // lost in a crash, the claim goes stale and is taken over
}

/** the first wait before a release that failed is tried again, and the longest, doubling in between */
const OWED_RETRY_FIRST_MS = 100;
const OWED_RETRY_MAX_MS = 2_000;
/** releases remembered at most; beyond, a claim waits to go stale as before (CLAIM_STALE_MS in signing/once.ts) */
const OWED_MAX = 10_000;

/**
 * Releases the database did not take (unreachable when a failed request gave its documents back). Until one
 * lands, its claim looks live to every instance, and the request's retry (which signDoc's 503 asks for) would
 * wait for it and be refused until the claim goes stale. So each is tried again in the background until it
 * lands, and a retry after the database is back finds the documents free within a moment. Safe whatever became
 * of the failed write: a release deletes only rows of its claim that hold no signature, and on PostgreSQL it
 * waits for the row locks of a write still committing, then sees what that write left.
 */
function owedReleases(a: DocumentsAccess): { add(claim: DocumentClaim): void } {
  const owed = new Map<string, DocumentClaim>();
  let timer: NodeJS.Timeout | undefined;
  let wait = OWED_RETRY_FIRST_MS;
  const schedule = () => {
    if (!timer && owed.size > 0) timer = setTimeout(() => void flush(), wait).unref();
  };
  const flush = async () => {
    for (const [claimId, claim] of owed) {
      try {
        a.ensureOpen();
        await releaseDocuments(a, claim);
        owed.delete(claimId);
      } catch {
        if (!isOpen(a)) owed.clear(); // the store closed: nobody retries through it anymore
        wait = Math.min(wait * 2, OWED_RETRY_MAX_MS);
        break;
      }
    }
    if (owed.size === 0) wait = OWED_RETRY_FIRST_MS;
    timer = undefined;
    schedule();
  };
  return {
    add(claim) {
      if (owed.size < OWED_MAX) owed.set(claim.claimId, claim);
      schedule();
    },
  };
}

function isOpen(a: Pick<DocumentsAccess, 'ensureOpen'>): boolean {
  try {
    a.ensureOpen();
    return true;
  } catch {
    return false;
  }
}

/** The store's methods for documents signed under a consent; `insertOutbox`: the records kept with them. */
export function documents(
  a: StoreAccess,
  insertOutbox: (entries: readonly NewOutboxEntry[]) => Statement[],
  insertJournal: ((entry: JournalEntryInput) => Statement) | undefined,
): Pick<Store, 'claimDocuments' | 'keepSignatures' | 'releaseDocuments'> {
  const owed = owedReleases(a);
  return {
    async claimDocuments(claim, staleBefore) {
      a.ensureOpen();
      return claimDocuments(a, claim, staleBefore);
    },
    async keepSignatures({ claim, signatures, evidenceSerialHex, outbox }) {
      a.ensureOpen();
      // the signatures, their journal entry and the mediation record land together or not at all (keepQueries)
      const journalInsert = insertJournal
        ? [
            insertJournal(
              signingReturnedEntry({
                iss: claim.iss,
                txn: claim.txn,
                hashAlgorithmOid: claim.hashAlgorithmOid,
                evidenceSerialHex,
                signatures,
                at: new Date(),
              }),
            ),
          ]
        : [];
      const write = [
        ...keepQueries(a, claim, signatures, evidenceSerialHex),
        ...insertOutbox(outbox),
        ...journalInsert,
      ];
      const hashes = signatures.map((s) => s.hash);
      return keepSignatures(a, write, claim, hashes);
    },
    async releaseDocuments(claim) {
      a.ensureOpen();
      try {
        await releaseDocuments(a, claim);
      } catch (err) {
        owed.add(claim); // tried again until the database takes it
        throw err;
      }
    },
  };
}
