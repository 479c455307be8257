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
 * - signing evidence rows against their sealed entry (the introspection JWT, the digests, the certificate);
 * - each RFC 4998 renewal (renewal.ts): its root, its token, and its leaves recomputed from the batches, the
 *   renewals before it and the entries present;
 * - the rows the service hands out (certificate status, signings, kept signatures, renewals) against the
 *   entries, and entries outside every batch (audit-rows.ts), over the whole store whatever the period.
 */
import { verify, X509Certificate } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { digest, hashByOid, SHA256 } from '../crypto/algorithms.ts';
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
import { allBatches, currentChains, intactGroups, timeStampLeaves, tsaCertificate } from './renewal.ts';
import { batchLeaves, signingGroupHash } from './seal.ts';

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
  /** the second TSA's certificates up to its root (journal.secondTsaChainFile): its tokens must chain to them */
  readonly secondTsaChain?: readonly Buffer[];
}

const DEFAULT_TOLERANCE_MS = 300_000;

const MESSAGE_DIGEST = '1.2.840.113549.1.9.4';

/**
 * The token's signature verifies with the certificate it carries (RFC 5652 5.4: over the signed attributes,
 * whose message-digest is the hash of the TSTInfo), and its imprint is `root` hashed with `imprintOid`
 * (RFC 3161 2.4.2). pkijs parses; node:crypto verifies (pkijs' own verify wants the time-stamped data).
 */
export function checkToken(token: Buffer, root: Buffer, imprintOid = SHA256.oid): string | undefined {
  try {
    const signed = new pkijs.SignedData({ schema: pkijs.ContentInfo.fromBER(new Uint8Array(token)).content });
    const tstInfo = Buffer.from(signed.encapContentInfo.eContent!.getValue());
    const tst = pkijs.TSTInfo.fromBER(new Uint8Array(tstInfo));
    const imprint = Buffer.from(tst.messageImprint.hashedMessage.valueBlock.valueHexView);
    if (tst.messageImprint.hashAlgorithm.algorithmId !== imprintOid || !imprint.equals(root))
      return 'the time-stamp covers another hash than the root';
    const signer = signed.signerInfos[0]!;
    const hash = hashByOid(signer.digestAlgorithm.algorithmId);
    const attributes = signer.signedAttrs;
    if (!hash || !attributes) return 'the time-stamp has no signed attributes of a known hash';
    const messageDigest = attributes.attributes.find((a) => a.type === MESSAGE_DIGEST)?.values[0];
    const expected = digest(hash, tstInfo);
    if (
      !(messageDigest instanceof asn1js.OctetString) ||
      !Buffer.from(messageDigest.valueBlock.valueHexView).equals(expected)
    )
      return "the time-stamp's message-digest is not the hash of its TSTInfo";
    const signedBytes = Buffer.from(attributes.encodedValue);
    signedBytes[0] = 0x31; // DER SET OF, as signed (RFC 5652 5.4)
    const certificate = signed.certificates?.find((c) => c instanceof pkijs.Certificate);
    if (!certificate) return 'the time-stamp carries no TSA certificate';
    const key = new X509Certificate(Buffer.from(certificate.toSchema().toBER())).publicKey;
    const signature = Buffer.from(signer.signature.valueBlock.valueHexView);
    return verify(hash.node, signedBytes, key, signature) ? undefined : "the time-stamp's signature does not verify";
  } catch (err) {
    return `the time-stamp does not parse: ${(err as Error).message}`;
  }
}

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
    const tokenProblem = checkToken(renewal.token, renewal.root, renewal.hashOid);
    if (tokenProblem) problems.push(tokenProblem);
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

const MAX_CHAIN = 8;

/**
 * The TSA certificate of `token` chains to a self-signed certificate among `anchors` (each signature checked),
 * and was valid at the token's genTime; undefined when it does.
 */
export function chainProblem(token: Buffer, anchors: readonly Buffer[]): string | undefined {
  try {
    const signer = tsaCertificate(token);
    const at = genTimeOf(token).getTime();
    if (at < Date.parse(signer.validFrom) || at > Date.parse(signer.validTo))
      return "the second time-stamp's TSA certificate was not valid at its genTime";
    const known = anchors.map((der) => new X509Certificate(der));
    let current = signer;
    for (let depth = 0; depth < MAX_CHAIN; depth++) {
      const issuer = known.find((c) => current.checkIssued(c) && current.verify(c.publicKey));
      if (!issuer) return "the second time-stamp's TSA certificate does not chain to that TSA's configured chain";
      if (issuer.checkIssued(issuer) && issuer.verify(issuer.publicKey)) return undefined;
      current = issuer;
    }
    return "the second time-stamp's TSA certificate chain is too long";
  } catch (err) {
    return `the second time-stamp's certificate does not parse: ${(err as Error).message}`;
  }
}

/** the second TSA's token of a batch: over its root, signed, and (with anchors) chained to that TSA's root */
function secondTokenProblems(batch: JournalBatch, anchors: readonly Buffer[] | undefined): string[] {
  if (!batch.secondToken) return [];
  const problem = checkToken(batch.secondToken, batch.root);
  if (problem) return [`second time-stamp: ${problem}`];
  const chain = anchors ? chainProblem(batch.secondToken, anchors) : undefined;
  return chain ? [chain] : [];
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

/** the chain's findings for one batch given the one before it */
async function chainFindings(
  batch: JournalBatch,
  before: JournalBatch | undefined,
  sealedLeaf: ReadonlyMap<number, Buffer>,
  secondTsaChain?: readonly Buffer[],
): Promise<Finding[]> {
  const found: string[] = [];
  if (batch.batchNo !== (before?.batchNo ?? 0) + 1) found.push(`batch ${(before?.batchNo ?? 0) + 1} is missing`);
  if (batch.firstSeq !== (before?.throughSeq ?? 0) + 1) found.push('its entries do not follow the previous batch');
  const expectedPrev = before?.root ?? null;
  if (!(expectedPrev === null ? batch.prevRoot === null : batch.prevRoot?.equals(expectedPrev)))
    found.push('its previous root is not the root of the batch before');
  if (!treeRoot(sha256, batchLeaves(batch.prevRoot, batch.leaves, batch.groups)).equals(batch.root))
    found.push('its root is not the hash tree of its leaves');
  const tokenProblem = checkToken(batch.token, batch.root);
  if (tokenProblem) found.push(tokenProblem);
  found.push(...secondTokenProblems(batch, secondTsaChain), ...groupProblems(batch, sealedLeaf));
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

/** A signing's evidence rows against its sealed signing.authorized entry. */
async function evidenceFindings(store: Store, entry: StoredJournalEntry, batch: number): Promise<Finding[]> {
  if (entry.kind !== 'signing.authorized' || !entry.ref) return [];
  const sealed = JSON.parse(entry.body.toString('utf8')) as {
    data: { txn: string; introspectionJwt: string; hashes: string[]; certificate: string };
  };
  const signing = (await store.getTransaction(sealed.data.txn)).find((t) => t.certificateSerialHex === entry.ref);
  if (!signing) return []; // purged with its entry, or a deletion the entry's own check names
  const certificate = await store.getCertificate(entry.ref);
  const differs: string[] = [];
  if (signing.introspectionJwt !== sealed.data.introspectionJwt) differs.push('introspection JWT');
  if (JSON.stringify(signing.hashes) !== JSON.stringify(sealed.data.hashes)) differs.push('consented digests');
  if (certificate && certificate.der.toString('base64') !== sealed.data.certificate) differs.push('certificate');
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
    if (last && at && at.getTime() < last.sealedAt.getTime() - toleranceMs)
      findings.push({ kind: 'inserted', seq: e.seq, batch: null, detail: backDated(at, last.sealedAt) });
  }
  return { count: entries.length, findings };
}

export async function auditJournal(store: Store, options: AuditOptions = {}): Promise<AuditReport> {
  const toleranceMs = options.toleranceMs ?? DEFAULT_TOLERANCE_MS;
  const batches = await allBatches(store);
  const inPeriod = (b: JournalBatch) =>
    (!options.from || b.sealedAt >= options.from) && (!options.to || b.sealedAt < options.to);
  const audited = batches.filter(inPeriod);
  const sealedBy = sealedLeaves(audited);
  const sealedLeaf = new Map(batches.flatMap((b) => b.leaves.map((l) => [l.seq, l.hash] as const)));
  const findings: Finding[] = [];
  let entries = 0;
  for (const [i, batch] of batches.entries()) {
    findings.push(...(await chainFindings(batch, batches[i - 1], sealedLeaf, options.secondTsaChain)));
    if (!inPeriod(batch)) continue;
    const checked = await entryFindings(store, batch, sealedBy, batches[i - 1]?.sealedAt, toleranceMs);
    findings.push(...checked.findings);
    entries += batch.leaves.length;
    for (const entry of checked.intact) findings.push(...(await evidenceFindings(store, entry, batch.batchNo)));
  }
  const unsealed = options.to ? { count: 0, findings: [] } : await unsealedFindings(store, batches.at(-1), toleranceMs);
  findings.push(...unsealed.findings);
  const renewals = await store.journal.renewals();
  findings.push(...(await renewalFindings(store, batches, renewals)));
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
