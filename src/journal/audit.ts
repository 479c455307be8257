/**
 * The journal audit (`qtsp evidence audit`): recomputes every batch from the store and names what does not
 * match what was sealed.
 *
 * - the chain: batch numbers and seq ranges follow each other, each batch's previous root is the root before
 *   it, its root is the tree of its leaves (RFC 4998 4.2), and its time-stamp token's signature verifies
 *   with the certificate it carries and its imprint is that root; so does the second TSA's token where a batch
 *   has one, whose certificate must also chain to that TSA's configured certificates; each data group of a
 *   signing's two entries is the hash of their sealed leaves;
 * - each entry against its leaf: unchanged; altered (its bytes hash to no sealed leaf); moved (they hash to the
 *   leaf of another seq); deleted (gone, no tombstone); purged by policy (gone, a retention tombstone with
 *   that leaf hash); inserted (in a sealed range without a leaf, or recorded at a time before the batch ahead
 *   of it was sealed, which an entry written then would have been part of);
 * - signing evidence rows against their sealed entry (the introspection JWT and the certificate by their
 *   SHA-256, the consented digests);
 * - each RFC 4998 renewal (renewal.ts): its root, its token, and its leaves recomputed from the batches, the
 *   renewals before it and the entries present;
 * - the rows the service hands out (certificate status, signings, kept signatures, renewals) against the
 *   entries, and entries outside every batch (audit-rows.ts), over the whole store whatever the period.
 */
import { SHA256 } from '../crypto/algorithms.ts';
import { genTimeOf } from '../timestamping/tsa.ts';
import type { JournalBatch, JournalRenewal, RenewalLeaf, Store, StoredJournalEntry } from '../store/types.ts';
import {
  groupChains,
  groupKey,
  hashOf,
  hashRenewalGroupLeaf,
  hashRenewalLeaf,
  recordChains,
} from './evidence-record.ts';
import { nodeHash, sha256, treeRoot } from './hash-tree.ts';
import { rowFindings, type RowFinding } from './audit-rows.ts';
import { allBatches, currentChains, intactGroups, timeStampLeaves } from './renewal.ts';
import { batchLeaves, signingGroupHash } from './seal.ts';
import { parseBody, sealedAuthorized } from './sealed-digests.ts';
import { sha256Hex } from '../store/journal.ts';
import {
  type KnownTsaCertificate,
  knownTsaCertificates,
  ourTokenProblems,
  secondTokenProblems,
  storedTsaCertificates,
  type TokenTrust,
} from './token-trust.ts';

export { checkToken } from './token-trust.ts';

export type Finding =
  | { readonly kind: 'chain'; readonly batch: number; readonly detail: string }
  | { readonly kind: 'altered'; readonly seq: number; readonly batch: number | null; readonly detail: string }
  | { readonly kind: 'moved'; readonly seq: number; readonly batch: number; readonly sealedAs: number }
  | { readonly kind: 'deleted'; readonly seq: number; readonly batch: number }
  | { readonly kind: 'inserted'; readonly seq: number; readonly batch: number | null; readonly detail: string }
  | { readonly kind: 'purged'; readonly seq: number; readonly batch: number; readonly by: string }
  | { readonly kind: 'renewal'; readonly renewal: number; readonly detail: string }
  | RowFinding;

export interface AuditReport {
  readonly batches: number;
  /** batches that also carry a second TSA's time-stamp (journal.secondTsaUrl), each checked */
  readonly secondTimeStamps: number;
  /** RFC 4998 renewals checked (renewal.ts) */
  readonly renewals: number;
  readonly entries: number;
  /** entries after the last batch, waiting for the next seal */
  readonly unsealed: number;
  /** rows of a store made before the journal existed, dated before its first entry: not judged */
  readonly rowsBeforeJournal: number;
  readonly findings: readonly Finding[];
  /** no finding but purges by policy */
  readonly clean: boolean;
}

export interface AuditOptions {
  /** only batches sealed in [from, to) are checked entry by entry; the chain is always checked whole */
  readonly from?: Date;
  readonly to?: Date;
  /** how far an entry's own time may precede the seal of the batch before it (clock skew, slow commits) */
  readonly toleranceMs?: number;
  /** what the operator trusts: every token must chain to it (token-trust.ts) */
  readonly trust: TokenTrust;
}

/** The trust anchors with our TSA certificates by SHA-256 (hex), as each token is judged. */
interface Trusted {
  readonly trust: TokenTrust;
  readonly known: ReadonlyMap<string, KnownTsaCertificate>;
}

const DEFAULT_TOLERANCE_MS = 300_000;

const sameLeaves = (a: readonly RenewalLeaf[], b: readonly RenewalLeaf[]) =>
  a.length === b.length && a.every((l, i) => l.key === b[i]!.key && l.hash.equals(b[i]!.hash));

/** A hash-tree renewal's leaves against the entries present and intact in the batches it covers. */
async function hashRenewalProblems(
  store: Store,
  renewal: JournalRenewal,
  batches: readonly JournalBatch[],
  before: readonly JournalRenewal[],
): Promise<string[]> {
  const hash = hashOf(renewal.hashOid);
  const leaves = new Map(renewal.leaves.map((l) => [l.key, l.hash]));
  const problems: string[] = [];
  for (const batch of batches.filter((b) => b.batchNo <= renewal.throughBatch)) {
    const entries = await store.journal.entries(batch.firstSeq - 1, batch.throughSeq);
    const sealed = new Map(batch.leaves.map((l) => [l.seq, l.hash]));
    for (const entry of entries) {
      // an entry that is not as sealed is named by the entry checks
      if (!sealed.get(entry.seq)?.equals(nodeHash(hashOf(batch.hashOid))(entry.body))) continue;
      const leaf = leaves.get(entry.seq);
      if (!leaf) problems.push(`entry ${entry.seq} has no leaf`);
      else if (!leaf.equals(hashRenewalLeaf(hash, entry.body, recordChains(batch, entry.seq, before))))
        problems.push(`the leaf of entry ${entry.seq} is not H(entry, its chains before)`);
    }
    const bySeq = new Map(entries.map((e) => [e.seq, e]));
    for (const { group, bodies } of await intactGroups(store, batch, bySeq)) {
      const leaf = leaves.get(groupKey(group));
      const name = `the data group of entries ${group.authorizedSeq} and ${group.returnedSeq}`;
      if (!leaf) problems.push(`${name} has no leaf`);
      else if (!leaf.equals(hashRenewalGroupLeaf(hash, bodies, groupChains(batch, group, bodies, before)!)))
        problems.push(`the leaf of ${name} is not that of its entries and its chains before`);
    }
  }
  return problems;
}

/** Each renewal: numbered in turn, its root the tree of its leaves, its token over that root, its leaves right. */
async function renewalFindings(
  store: Store,
  batches: readonly JournalBatch[],
  renewals: readonly JournalRenewal[],
  trusted: Trusted,
): Promise<Finding[]> {
  const findings: Finding[] = [];
  for (const [i, renewal] of renewals.entries()) {
    const before = renewals.slice(0, i);
    const hash = hashOf(renewal.hashOid);
    const problems: string[] = [];
    if (renewal.renewalNo !== i + 1) problems.push(`renewal ${i + 1} is missing`);
    if (
      !treeRoot(
        nodeHash(hash),
        renewal.leaves.map((l) => l.hash),
      ).equals(renewal.root)
    )
      problems.push('its root is not the hash tree of its leaves');
    problems.push(...ourTokenProblems(renewal.token, renewal.root, renewal.hashOid, trusted.trust, trusted.known));
    problems.push(...timeProblems(renewal.token, renewal.renewedAt, 'renewed_at'));
    const covered = batches.filter((b) => b.batchNo <= renewal.throughBatch);
    if (renewal.kind === 'timestamp') {
      const chains = currentChains(covered, before).filter(
        (c) => c.hash.oid === renewal.hashOid && c.chainOf === renewal.chainOf,
      );
      if (!sameLeaves(renewal.leaves, timeStampLeaves(chains)))
        problems.push("its leaves are not the current chains' time-stamps");
    } else problems.push(...(await hashRenewalProblems(store, renewal, covered, before)));
    findings.push(...problems.map((detail) => ({ kind: 'renewal' as const, renewal: renewal.renewalNo, detail })));
  }
  return findings;
}

/** each data group of a batch: of one of its entries and an entry sealed before, the hash of their leaves */
function groupProblems(batch: JournalBatch, sealedLeaf: ReadonlyMap<number, Buffer>): string[] {
  const problems: string[] = [];
  for (const g of batch.groups ?? []) {
    const inBatch = batch.firstSeq <= g.returnedSeq && g.returnedSeq <= batch.throughSeq;
    const returned = inBatch ? sealedLeaf.get(g.returnedSeq) : undefined;
    const authorized = g.authorizedSeq < g.returnedSeq ? sealedLeaf.get(g.authorizedSeq) : undefined;
    if (!returned || !authorized || !signingGroupHash(authorized, returned).equals(g.hash))
      problems.push(
        `its data group of entries ${g.authorizedSeq} and ${g.returnedSeq} is not the hash of their leaves`,
      );
  }
  return problems;
}

/**
 * A stored time (sealed_at, renewed_at) against the genTime of the token it was taken from: the audit judges by
 * the token, and a column moved behind the service's back is itself a finding.
 */
function timeProblems(token: Buffer, stored: Date, column: string): string[] {
  const genTime = tokenTime(token);
  if (!genTime || genTime.getTime() === stored.getTime()) return [];
  return [`its ${column} ${stored.toISOString()} is not its time-stamp's genTime ${genTime.toISOString()}`];
}

/** the genTime of a token; undefined when it does not parse (a finding of its own) */
function tokenTime(token: Buffer): Date | undefined {
  try {
    return genTimeOf(token);
  } catch {
    return undefined;
  }
}

/** when a batch was sealed: its token's genTime (its sealed_at column only when the token does not parse) */
const sealedTime = (batch: JournalBatch): Date => tokenTime(batch.token) ?? batch.sealedAt;

/** the chain's findings for one batch given the one before it */
async function chainFindings(
  batch: JournalBatch,
  before: JournalBatch | undefined,
  sealedLeaf: ReadonlyMap<number, Buffer>,
  trusted: Trusted,
): Promise<Finding[]> {
  const found: string[] = [];
  if (batch.batchNo !== (before?.batchNo ?? 0) + 1) found.push(`batch ${(before?.batchNo ?? 0) + 1} is missing`);
  if (batch.firstSeq !== (before?.throughSeq ?? 0) + 1) found.push('its entries do not follow the previous batch');
  const expectedPrev = before?.root ?? null;
  if (!(expectedPrev === null ? batch.prevRoot === null : batch.prevRoot?.equals(expectedPrev)))
    found.push('its previous root is not the root of the batch before');
  if (!treeRoot(sha256, batchLeaves(batch.prevRoot, batch.leaves, batch.groups)).equals(batch.root))
    found.push('its root is not the hash tree of its leaves');
  found.push(...ourTokenProblems(batch.token, batch.root, SHA256.oid, trusted.trust, trusted.known));
  found.push(...timeProblems(batch.token, batch.sealedAt, 'sealed_at'));
  if (batch.secondToken) found.push(...secondTokenProblems(batch.secondToken, batch.root, trusted.trust.second));
  found.push(...groupProblems(batch, sealedLeaf));
  return found.map((detail) => ({ kind: 'chain', batch: batch.batchNo, detail }));
}

/** an entry's own time, from its sealed bytes */
function entryTime(entry: StoredJournalEntry): Date | undefined {
  try {
    const at = new Date((JSON.parse(entry.body.toString('utf8')) as { at?: string }).at ?? '');
    return Number.isNaN(at.getTime()) ? undefined : at;
  } catch {
    return undefined;
  }
}

interface Sealed {
  readonly batch: number;
  readonly seq: number;
}

/** The entries of one batch against its leaves; `sealedBy`: every audited leaf hash (hex) -> where it was sealed. */
async function entryFindings(
  store: Store,
  batch: JournalBatch,
  sealedBy: ReadonlyMap<string, Sealed>,
  previousSealedAt: Date | undefined,
  toleranceMs: number,
): Promise<{ findings: Finding[]; intact: StoredJournalEntry[] }> {
  const entries = new Map((await store.journal.entries(batch.firstSeq - 1, batch.throughSeq)).map((e) => [e.seq, e]));
  const tombstones = new Map(
    (await store.journal.tombstones(batch.firstSeq - 1, batch.throughSeq)).map((t) => [t.seq, t]),
  );
  const findings: Finding[] = [];
  const intact: StoredJournalEntry[] = [];
  const batchNo = batch.batchNo;
  for (const leaf of batch.leaves) {
    const entry = entries.get(leaf.seq);
    entries.delete(leaf.seq);
    if (!entry) {
      const tomb = tombstones.get(leaf.seq);
      if (tomb?.leafHash.equals(leaf.hash))
        findings.push({ kind: 'purged', seq: leaf.seq, batch: batchNo, by: tomb.purgedBy });
      else findings.push({ kind: 'deleted', seq: leaf.seq, batch: batchNo });
      continue;
    }
    const hash = sha256(entry.body);
    if (hash.equals(leaf.hash)) {
      intact.push(entry);
      const at = entryTime(entry);
      if (previousSealedAt && at && at.getTime() < previousSealedAt.getTime() - toleranceMs)
        findings.push({ kind: 'inserted', seq: leaf.seq, batch: batchNo, detail: backDated(at, previousSealedAt) });
      continue;
    }
    const other = sealedBy.get(hash.toString('hex'));
    if (other) findings.push({ kind: 'moved', seq: leaf.seq, batch: batchNo, sealedAs: other.seq });
    else
      findings.push({ kind: 'altered', seq: leaf.seq, batch: batchNo, detail: 'its bytes differ from those sealed' });
  }
  for (const extra of entries.values())
    findings.push({ kind: 'inserted', seq: extra.seq, batch: batchNo, detail: 'in the sealed range without a leaf' });
  return { findings, intact };
}

const backDated = (at: Date, sealedAt: Date) =>
  `recorded at ${at.toISOString()}, before the batch ahead of it was sealed (${sealedAt.toISOString()})`;

/**
 * A signing's evidence rows against its sealed signing.authorized entry: the consented digests as sealed, the
 * introspection JWT and the certificate by their SHA-256 (sealed-digests.ts, any format).
 */
async function evidenceFindings(store: Store, entry: StoredJournalEntry, batch: number): Promise<Finding[]> {
  const body = entry.kind === 'signing.authorized' && entry.ref ? parseBody(entry) : undefined;
  if (!body) return [];
  const sealed = sealedAuthorized(body);
  const signing = (await store.getTransaction(sealed.txn)).find((t) => t.certificateSerialHex === entry.ref);
  if (!signing) return []; // purged with its entry, or a deletion the entry's own check names
  const certificate = await store.getCertificate(entry.ref!);
  const differs: string[] = [];
  if (sha256Hex(signing.introspectionJwt) !== sealed.introspectionJwt) differs.push('introspection JWT');
  if (JSON.stringify(signing.hashes) !== JSON.stringify(sealed.hashes)) differs.push('consented digests');
  if (certificate && sha256Hex(certificate.der) !== sealed.certificate) differs.push('certificate');
  if (differs.length === 0) return [];
  return [
    {
      kind: 'altered',
      seq: entry.seq,
      batch,
      detail: `the stored evidence of signing ${entry.ref} differs from its sealed entry: ${differs.join(', ')}`,
    },
  ];
}

/** Every sealed leaf of the audited batches, by hash, to tell a moved entry from an altered one. */
function sealedLeaves(batches: readonly JournalBatch[]): Map<string, Sealed> {
  const map = new Map<string, Sealed>();
  for (const b of batches) for (const l of b.leaves) map.set(l.hash.toString('hex'), { batch: b.batchNo, seq: l.seq });
  return map;
}

/** Entries after the last batch: how many, and those whose own time is before that batch's seal. */
async function unsealedFindings(
  store: Store,
  last: JournalBatch | undefined,
  toleranceMs: number,
): Promise<{ count: number; findings: Finding[] }> {
  const after = last?.throughSeq ?? 0;
  const entries = await store.journal.entries(after, Number.MAX_SAFE_INTEGER);
  const findings: Finding[] = [];
  for (const e of entries) {
    const at = entryTime(e);
    const sealedAt = last && sealedTime(last);
    if (sealedAt && at && at.getTime() < sealedAt.getTime() - toleranceMs)
      findings.push({ kind: 'inserted', seq: e.seq, batch: null, detail: backDated(at, sealedAt) });
  }
  return { count: entries.length, findings };
}

/** The trust anchors with our TSA certificates of the material and those the store registered for the tokens. */
async function trustedTsas(
  store: Store,
  trust: TokenTrust,
  batches: readonly JournalBatch[],
  renewals: readonly JournalRenewal[],
): Promise<Trusted> {
  const tokens = [...batches.map((b) => b.token), ...renewals.map((r) => r.token)];
  return { trust, known: knownTsaCertificates(trust.ours, await storedTsaCertificates(store, tokens)) };
}

export async function auditJournal(store: Store, options: AuditOptions): Promise<AuditReport> {
  const toleranceMs = options.toleranceMs ?? DEFAULT_TOLERANCE_MS;
  const batches = await allBatches(store);
  const renewals = await store.journal.renewals();
  const trusted = await trustedTsas(store, options.trust, batches, renewals);
  // a period is judged by the tokens' genTimes, not by a column anyone with the database can move
  const inPeriod = (b: JournalBatch) =>
    (!options.from || sealedTime(b) >= options.from) && (!options.to || sealedTime(b) < options.to);
  const audited = batches.filter(inPeriod);
  const sealedBy = sealedLeaves(audited);
  const sealedLeaf = new Map(batches.flatMap((b) => b.leaves.map((l) => [l.seq, l.hash] as const)));
  const findings: Finding[] = [];
  let entries = 0;
  for (const [i, batch] of batches.entries()) {
    findings.push(...(await chainFindings(batch, batches[i - 1], sealedLeaf, trusted)));
    if (!inPeriod(batch)) continue;
    const previous = batches[i - 1] && sealedTime(batches[i - 1]!);
    const checked = await entryFindings(store, batch, sealedBy, previous, toleranceMs);
    findings.push(...checked.findings);
    entries += batch.leaves.length;
    for (const entry of checked.intact) findings.push(...(await evidenceFindings(store, entry, batch.batchNo)));
  }
  const unsealed = options.to ? { count: 0, findings: [] } : await unsealedFindings(store, batches.at(-1), toleranceMs);
  findings.push(...unsealed.findings);
  findings.push(...(await renewalFindings(store, batches, renewals, trusted)));
  const rows = await rowFindings(store, batches, inPeriod);
  findings.push(...rows.findings);
  return {
    batches: batches.length,
    secondTimeStamps: batches.filter((b) => b.secondToken).length,
    renewals: renewals.length,
    entries,
    unsealed: unsealed.count,
    rowsBeforeJournal: rows.beforeJournal,
    findings,
    clean: findings.every((f) => f.kind === 'purged'),
  };
}

/** One line per finding, as `qtsp evidence audit` prints them. */
export function describeFinding(f: Finding): string {
  switch (f.kind) {
    case 'chain':
      return `batch ${f.batch}: chain broken: ${f.detail}`;
    case 'altered':
      return `entry ${f.seq} (batch ${f.batch ?? 'none'}): altered: ${f.detail}`;
    case 'moved':
      return `entry ${f.seq} (batch ${f.batch}): moved: it holds what was sealed as entry ${f.sealedAs}`;
    case 'deleted':
      return `entry ${f.seq} (batch ${f.batch}): deleted`;
    case 'inserted':
      return `entry ${f.seq} (batch ${f.batch ?? 'not sealed yet'}): inserted: ${f.detail}`;
    case 'purged':
      return `entry ${f.seq} (batch ${f.batch}): purged by policy (${f.by})`;
    case 'renewal':
      return `renewal ${f.renewal}: ${f.detail}`;
    case 'row':
      return `${f.table} ${f.key}: ${f.detail}`;
  }
}
