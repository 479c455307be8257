/**
 * The journal audit's side of the rows the service hands out (audit.ts runs it): every such row must be what a
 * journal entry says, and every entry's rows must be there. The entries that count are those sealed as their
 * leaf and those after the last batch, waiting for the next seal (a truthful append behind the service's
 * back is a documented limit, docs/evidence.md).
 *
 * - certificate status (OCSP and CRLs answer from it): a revoked certificate has a `certificate.revoked`
 *   entry with its reason and time, and a certificate whose revocation is sealed is still revoked so;
 * - signings (an export hands them out): each transaction and signDoc certificate has its `signing.authorized`
 *   entry, and each such entry still has its transaction and certificate;
 * - kept signatures and their revocationInfo (a retry with the same SAD and the export hand them out): each
 *   is the one its `signing.returned` entry carries (by SHA-256, as format 3 carries them; sealed-digests.ts),
 *   and each signature that entry carries is still kept;
 * - renewals: each `evidence.renewed` entry's renewal is stored, as the entry describes it;
 * - seq ranges: an entry in no batch's range and below the unsealed tail (seq 0, -7, a gap) was never sealed.
 *
 * Rows of a store made by release 0.1, before the journal existed, dated before its first entry, are counted
 * and not judged: nothing sealed them.
 */
import type { JournalBatch, KeptDocument, Store, StoredJournalEntry } from '../store/types.ts';
import { canonicalJson } from '../util/canonical-json.ts';
import { sha256 } from './hash-tree.ts';
import {
  type EntryBody,
  parseBody,
  revocationInfoDigest,
  sealedSignatures,
  signatureDigest,
} from './sealed-digests.ts';

export type RowFinding =
  | { readonly kind: 'row'; readonly table: string; readonly key: string; readonly detail: string }
  | { readonly kind: 'inserted'; readonly seq: number; readonly batch: null; readonly detail: string }
  | { readonly kind: 'renewal'; readonly renewal: number; readonly detail: string };

interface Revocation {
  readonly seq: number;
  readonly reason: string;
  readonly at: number;
}

/** a kept document as its signing.returned entry sealed it: SHA-256 (hex) of its signature and revocationInfo */
interface Returned {
  readonly seq: number;
  readonly signature: string;
  readonly revocation: string | null;
}

/** what the journal's entries say about the rows, by row key */
interface Journaled {
  readonly authorized: Map<string, number>;
  readonly returned: Map<string, Returned>;
  readonly revoked: Map<string, Revocation>;
  readonly renewed: Map<number, { readonly seq: number; readonly data: Record<string, unknown> }>;
  /** the time of the first entry, sealed or not */
  first: Date | undefined;
}

const documentKey = (iss: string, txn: string, alg: string, hash: string) => canonicalJson([iss, txn, alg, hash]);

/** a signing.returned entry's documents, their digests in any format (sealed-digests.ts) */
function noteReturned(journaled: Journaled, seq: number, body: EntryBody): void {
  const { iss, txn, hashAlgorithmOid } = body.data as { iss: string; txn: string; hashAlgorithmOid: string };
  for (const s of sealedSignatures(body))
    journaled.returned.set(documentKey(iss, txn, hashAlgorithmOid, s.hash), {
      seq,
      signature: s.signature,
      revocation: s.revocationInfo,
    });
}

function note(journaled: Journaled, entry: StoredJournalEntry): void {
  const body = parseBody(entry);
  if (!body) return; // bytes that do not parse are named by the entry checks
  const at = new Date(body.at);
  if (!journaled.first || at < journaled.first) journaled.first = at;
  const { seq } = entry;
  if (body.kind === 'signing.authorized' && body.ref) journaled.authorized.set(body.ref, seq);
  else if (body.kind === 'signing.returned') noteReturned(journaled, seq, body);
  else if (body.kind === 'certificate.revoked' && body.ref)
    journaled.revoked.set(body.ref, { seq, reason: String(body.data.reason), at: at.getTime() });
  else if (body.kind === 'evidence.renewed')
    journaled.renewed.set(Number(body.data.renewalNo), { seq, data: body.data });
}

const outside = (seq: number): RowFinding => ({
  kind: 'inserted',
  seq,
  batch: null,
  detail: "outside every batch's seq range and below the unsealed tail: never sealed",
});

/**
 * Reads every entry once: those sealed as their leaf and the unsealed tail are noted, those in no batch's
 * range below the tail are findings.
 */
async function readJournal(
  store: Store,
  batches: readonly JournalBatch[],
  audited: (batch: JournalBatch) => boolean,
): Promise<{ journaled: Journaled; findings: RowFinding[] }> {
  const journaled: Journaled = {
    authorized: new Map(),
    returned: new Map(),
    revoked: new Map(),
    renewed: new Map(),
    first: undefined,
  };
  const findings: RowFinding[] = [];
  let covered = Number.MIN_SAFE_INTEGER; // entries up to here are in a range or already named
  for (const batch of [...batches].sort((x, y) => x.firstSeq - y.firstSeq)) {
    if (batch.firstSeq - 1 > covered)
      for (const e of await store.journal.entries(covered, batch.firstSeq - 1)) findings.push(outside(e.seq));
    const leaves = new Map(batch.leaves.map((l) => [l.seq, l.hash]));
    for (const e of await store.journal.entries(batch.firstSeq - 1, batch.throughSeq)) {
      const leaf = leaves.get(e.seq);
      // a leaf's entry that is not as sealed counts only where the entry checks name it (its batch audited)
      if (leaf && (audited(batch) || leaf.equals(sha256(e.body)))) note(journaled, e);
    }
    covered = Math.max(covered, batch.throughSeq);
  }
  const tail = Math.max(covered, 0);
  if (tail > covered) for (const e of await store.journal.entries(covered, tail)) findings.push(outside(e.seq));
  for (const e of await store.journal.entries(tail, Number.MAX_SAFE_INTEGER)) note(journaled, e);
  return { journaled, findings };
}

/**
 * The findings of the rows against the journal; `audited`: the batches whose entries audit.ts checks one by one;
 * `beforeJournal`: rows of release 0.1 left unjudged.
 */
export async function rowFindings(
  store: Store,
  batches: readonly JournalBatch[],
  audited: (batch: JournalBatch) => boolean,
): Promise<{ findings: RowFinding[]; beforeJournal: number }> {
  const { journaled, findings } = await readJournal(store, batches, audited);
  const start = (await store.audit.predatesJournal()) ? (journaled.first ?? new Date(8.64e15)) : undefined;
  let beforeJournal = 0;
  const judged = (at: Date | null) => {
    if (!start || !at || at >= start) return true;
    beforeJournal++;
    return false;
  };
  findings.push(
    ...(await statusFindings(store, journaled, judged)),
    ...(await signingFindings(store, journaled, judged)),
    ...(await documentFindings(store, journaled, judged)),
    ...(await renewedFindings(store, journaled)),
  );
  return { findings, beforeJournal };
}

const row = (table: string, key: string, detail: string): RowFinding => ({ kind: 'row', table, key, detail });

/** certificate status: revoked only by a journaled revocation, and still revoked as journaled */
async function statusFindings(
  store: Store,
  journaled: Journaled,
  judged: (at: Date | null) => boolean,
): Promise<RowFinding[]> {
  const findings: RowFinding[] = [];
  const revokedRows = await store.audit.revoked();
  for (const r of revokedRows) {
    const sealed = journaled.revoked.get(r.serialHex);
    const what = `revoked (${r.reason}, ${r.revokedAt.toISOString()})`;
    if (!sealed) {
      if (judged(r.revokedAt))
        findings.push(row('certificates', r.serialHex, `${what} with no certificate.revoked entry in the journal`));
    } else if (sealed.reason !== r.reason || sealed.at !== r.revokedAt.getTime())
      findings.push(row('certificates', r.serialHex, `${what}, but entry ${sealed.seq} journaled another revocation`));
  }
  const revokedNow = new Set(revokedRows.map((r) => r.serialHex));
  for (const [serial, sealed] of journaled.revoked) {
    if (revokedNow.has(serial) || !(await store.getCertificate(serial))) continue; // a purged one is gone whole
    findings.push(
      row('certificates', serial, `status good, but entry ${sealed.seq} journaled its revocation (${sealed.reason})`),
    );
  }
  return findings;
}

/** each signing's transaction and certificate have a signing.authorized entry, and each entry its rows */
async function signingFindings(
  store: Store,
  journaled: Journaled,
  judged: (at: Date | null) => boolean,
): Promise<RowFinding[]> {
  const findings: RowFinding[] = [];
  const present = { signing_transactions: new Set<string>(), certificates: new Set<string>() };
  for (const r of await store.audit.signingSerials()) {
    present[r.table].add(r.serialHex);
    if (!journaled.authorized.has(r.serialHex) && judged(r.at))
      findings.push(row(r.table, r.serialHex, 'a signing with no signing.authorized entry in the journal'));
  }
  for (const [serial, seq] of journaled.authorized)
    for (const table of ['signing_transactions', 'certificates'] as const)
      if (!present[table].has(serial))
        findings.push(row(table, serial, `deleted: the signing's entry ${seq} stays, its row is gone`));
  return findings;
}

/** each kept signature and its revocationInfo are those of a signing.returned entry, and each is still kept */
async function documentFindings(
  store: Store,
  journaled: Journaled,
  judged: (at: Date | null) => boolean,
): Promise<RowFinding[]> {
  const findings: RowFinding[] = [];
  const seen = new Set<string>();
  const name = (d: KeptDocument) => `${d.txn} ${d.hash}`;
  for await (const d of store.audit.keptDocuments()) {
    const key = documentKey(d.iss, d.txn, d.hashAlgorithmOid, d.hash);
    seen.add(key);
    const sealed = journaled.returned.get(key);
    if (!sealed) {
      if (judged(d.signedAt))
        findings.push(row('signed_documents', name(d), 'a kept signature with no signing.returned entry'));
      continue;
    }
    const differs = [
      ...(sealed.signature === signatureDigest(d.signature) ? [] : ['signature']),
      ...(sealed.revocation === revocationInfoDigest(d.revocation && JSON.parse(d.revocation))
        ? []
        : ['revocationInfo']),
    ];
    if (differs.length > 0)
      findings.push(row('signed_documents', name(d), `differs from entry ${sealed.seq}: ${differs.join(', ')}`));
  }
  for (const [key, sealed] of journaled.returned) {
    if (seen.has(key)) continue;
    const [, txn, , hash] = JSON.parse(key) as string[];
    findings.push(row('signed_documents', `${txn} ${hash}`, `deleted: entry ${sealed.seq} returned this signature`));
  }
  return findings;
}

/** each evidence.renewed entry's renewal is stored as the entry describes it */
async function renewedFindings(store: Store, journaled: Journaled): Promise<RowFinding[]> {
  const stored = new Map((await store.journal.renewals()).map((r) => [r.renewalNo, r]));
  const findings: RowFinding[] = [];
  for (const [no, { seq, data }] of journaled.renewed) {
    const r = stored.get(no);
    const detail = !r
      ? `gone, while entry ${seq} journaled it`
      : r.kind !== data.kind ||
          r.hashOid !== data.hashOid ||
          r.throughBatch !== data.throughBatch ||
          r.leaves.length !== data.leaves ||
          r.root.toString('hex') !== data.root
        ? `not the renewal entry ${seq} journaled`
        : undefined;
    if (detail) findings.push({ kind: 'renewal', renewal: no, detail });
  }
  return findings;
}
