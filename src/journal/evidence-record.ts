/**
 * RFC 4998 EvidenceRecords for journal entries: the entry's canonical JSON bytes are the data object, its batch's
 * hash tree gives the reduced hash tree, and the batch's time-stamp the ArchiveTimeStamp's timeStamp. Renewals
 * (renewal.ts, section 5) add ArchiveTimeStamps to the chain (time-stamp renewal) or new chains (hash-tree
 * renewal); a record carries every one that covers its entry.
 *
 *   EvidenceRecord ::= SEQUENCE { version INTEGER { v1(1) }, digestAlgorithms SEQUENCE OF AlgorithmIdentifier,
 *     cryptoInfos [0] OPTIONAL, encryptionInfo [1] OPTIONAL, archiveTimeStampSequence ArchiveTimeStampSequence }
 *   ArchiveTimeStampSequence ::= SEQUENCE OF ArchiveTimeStampChain
 *   ArchiveTimeStampChain ::= SEQUENCE OF ArchiveTimeStamp
 *   ArchiveTimeStamp ::= SEQUENCE { digestAlgorithm [0] AlgorithmIdentifier OPTIONAL, attributes [1] OPTIONAL,
 *     reducedHashtree [2] SEQUENCE OF PartialHashtree OPTIONAL, timeStamp ContentInfo }
 *   PartialHashtree ::= SEQUENCE OF OCTET STRING
 *
 * The module's tags are IMPLICIT (RFC 4998 appendix A). No library here has these structures: they are written
 * as DER by util/der.ts; the time-stamp token is embedded byte for byte.
 */
import { digest, hashByOid, type HashAlgorithm } from '../crypto/algorithms.ts';
import type { JournalBatch, JournalGroup, JournalRenewal } from '../store/types.ts';
import { algorithmIdentifier, integer, octetString, oid, readWhole, sequence, tlv } from '../util/der.ts';
import { groupHash, HashTree, nodeHash, pathRoot } from './hash-tree.ts';
import { batchLeaves } from './seal.ts';

export function hashOf(oidText: string): HashAlgorithm {
  const hash = hashByOid(oidText);
  if (!hash) throw new Error(`journal: unknown hash ${oidText}`);
  return hash;
}

/** ArchiveTimeStamp over a reduced hash tree (omitted for a one-leaf tree: the token then covers the leaf) */
function archiveTimeStamp(hashOid: string, path: readonly (readonly Buffer[])[], token: Buffer): Buffer {
  readWhole(token); // one DER element, embedded as it is
  const tree = path.map((group) => sequence(...group.map((h) => octetString(h))));
  return sequence(tlv(0xa0, oid(hashOid)), ...(tree.length > 0 ? [tlv(0xa2, ...tree)] : []), token);
}

/** Trees and leaf indexes built once per batch or renewal: an export asks for one path per entry. */
interface BuiltTree {
  readonly tree: HashTree;
  /** leaf index by entry seq (batches) or key (renewals) */
  readonly index: Map<number, number>;
  /** a batch's data groups: leaf index by the signing.returned seq */
  readonly groups?: Map<number, number>;
}
const trees = new WeakMap<object, BuiltTree>();

function treeOf(owner: JournalBatch | JournalRenewal): BuiltTree {
  let built = trees.get(owner);
  if (!built) {
    if ('batchNo' in owner) {
      const offset = owner.prevRoot ? 1 : 0;
      const groups = owner.groups ?? [];
      built = {
        tree: new HashTree(nodeHash(hashOf(owner.hashOid)), batchLeaves(owner.prevRoot, owner.leaves, groups)),
        index: new Map(owner.leaves.map((l, i) => [l.seq, i + offset])),
        groups: new Map(groups.map((g, i) => [g.returnedSeq, i + offset + owner.leaves.length])),
      };
    } else {
      built = {
        tree: new HashTree(
          nodeHash(hashOf(owner.hashOid)),
          owner.leaves.map((l) => l.hash),
        ),
        index: new Map(owner.leaves.map((l, i) => [l.key, i])),
      };
    }
    if (!built.tree.root.equals(owner.root)) throw new Error('journal: a tree does not lead to its stored root');
    trees.set(owner, built);
  }
  return built;
}

/**
 * the ArchiveTimeStamp of `key` in `owner`'s tree (a data group when `group` has several values), with the
 * owner's token or another one over the same root
 */
function atsOf(
  owner: JournalBatch | JournalRenewal,
  key: number,
  group?: readonly Buffer[],
  token: Buffer = owner.token,
): Buffer {
  const at = treeOf(owner).index.get(key);
  if (at === undefined) throw new Error(`journal: ${key} is not a leaf of this tree`);
  return atsAt(owner, at, group, token);
}

/** the ArchiveTimeStamp of leaf `at` of `owner`'s tree */
function atsAt(owner: JournalBatch | JournalRenewal, at: number, group: readonly Buffer[] | undefined, token: Buffer) {
  const { tree } = treeOf(owner);
  const path = tree.path(at, group);
  if (path.length > 0 && !pathRoot(nodeHash(hashOf(owner.hashOid)), path).equals(owner.root))
    throw new Error('journal: a reduced hash tree does not lead to its root');
  return archiveTimeStamp(owner.hashOid, path, token);
}

/** a renewal's leaf index, built once */
export function renewalCovers(renewal: JournalRenewal, key: number): boolean {
  return treeOf(renewal).index.has(key);
}

/** the group of a time-stamp renewal's leaf: the hashes of the chain's time-stamps so far (section 5.2) */
export function timeStampGroup(hash: HashAlgorithm, tokens: readonly Buffer[]): Buffer[] {
  return tokens.map((t) => digest(hash, t));
}

/** One ArchiveTimeStampChain under construction: its time-stamps, then its time-stamp renewals. */
function chainWithRenewals(
  first: Buffer,
  firstToken: Buffer,
  hash: HashAlgorithm,
  renewals: readonly JournalRenewal[],
  chainOf: number | null,
  key: number,
): Buffer {
  const stamps = [first];
  const tokens = [firstToken];
  for (const r of renewals) {
    if (r.kind !== 'timestamp' || r.chainOf !== chainOf || r.hashOid !== hash.oid || !renewalCovers(r, key)) continue;
    stamps.push(atsOf(r, key, timeStampGroup(hash, tokens)));
    tokens.push(r.token);
  }
  return sequence(...stamps);
}

/**
 * The ArchiveTimeStampChains (DER, oldest first) of entry `seq` of `batch` under `renewals` (by number): the
 * batch's chain with its time-stamp renewals, then one chain per hash-tree renewal that covers the entry.
 */
export function recordChains(batch: JournalBatch, seq: number, renewals: readonly JournalRenewal[]): Buffer[] {
  const batchHash = hashOf(batch.hashOid);
  const chains = [chainWithRenewals(atsOf(batch, seq), batch.token, batchHash, renewals, null, batch.batchNo)];
  for (const r of renewals) {
    if (r.kind !== 'hashtree' || !renewalCovers(r, seq)) continue;
    chains.push(chainWithRenewals(atsOf(r, seq), r.token, hashOf(r.hashOid), renewals, r.renewalNo, r.renewalNo));
  }
  return chains;
}

/**
 * A hash-tree renewal's leaf for one entry (RFC 4998 5.3, as BouncyCastle's ERSEvidenceRecord checks it):
 * H(H(data object) || H(DER of the SEQUENCE of the chains so far)), H the new algorithm.
 */
export function hashRenewalLeaf(hash: HashAlgorithm, body: Buffer, chains: readonly Buffer[]): Buffer {
  return digest(hash, Buffer.concat([digest(hash, body), digest(hash, sequence(...chains))]));
}

/** The DER EvidenceRecord of entry `seq` of `batch`, with every renewal (by number) that covers it. */
export function evidenceRecord(batch: JournalBatch, seq: number, renewals: readonly JournalRenewal[] = []): Buffer {
  const chains = recordChains(batch, seq, renewals);
  const algorithms = [
    batch.hashOid,
    ...renewals.filter((r) => r.kind === 'hashtree' && renewalCovers(r, seq)).map((r) => r.hashOid),
  ];
  return sequence(
    integer(1),
    sequence(...[...new Set(algorithms)].map((a) => algorithmIdentifier(a))),
    sequence(...chains),
  );
}

/**
 * The DER EvidenceRecord of entry `seq` under its batch's second time-stamp (another operator's TSA), or
 * undefined when the batch has none: one chain of one ArchiveTimeStamp. A record of its own, not a second chain
 * in the first record: RFC 4998 5.3 makes every chain after the first a hash-tree renewal of those before it
 * (BouncyCastle checks it as one), so parallel time-stamps of one root are parallel records. Renewals extend
 * the first record only.
 */
export function secondEvidenceRecord(batch: JournalBatch, seq: number): Buffer | undefined {
  if (!batch.secondToken) return undefined;
  return sequence(
    integer(1),
    sequence(algorithmIdentifier(batch.hashOid)),
    sequence(sequence(atsOf(batch, seq, undefined, batch.secondToken))),
  );
}

/**
 * The key of a data group's leaf in a hash-tree renewal's tree: its signing.returned seq plus this offset, beyond
 * any entry's seq (entries' leaves are keyed by their seq).
 */
export const GROUP_KEY_OFFSET = 2 ** 52;
export const groupKey = (group: JournalGroup): number => GROUP_KEY_OFFSET + group.returnedSeq;

/**
 * A hash-tree renewal's leaf for a data group (RFC 4998 5.3 with 4.2, as BouncyCastle's ERSDataGroup checks
 * it): per data object its renewal hash (hashRenewalLeaf), those hashed as one group.
 */
export function hashRenewalGroupLeaf(hash: HashAlgorithm, bodies: readonly Buffer[], chains: readonly Buffer[]) {
  return groupHash(nodeHash(hash), renewedMembers(hash, bodies, chains));
}

const renewedMembers = (hash: HashAlgorithm, bodies: readonly Buffer[], chains: readonly Buffer[]) =>
  bodies.map((b) => hashRenewalLeaf(hash, b, chains));

/** the hash-tree renewals that cover a data group (each adds a chain to its record) */
const groupRenewals = (renewals: readonly JournalRenewal[], group: JournalGroup) =>
  renewals.filter((r) => r.kind === 'hashtree' && renewalCovers(r, groupKey(group)));

/**
 * The ArchiveTimeStampChains (DER, oldest first) of a signing's data group, `bodies` its signing.authorized and
 * signing.returned entries as sealed: the chain of the batch that sealed the group with its time-stamp
 * renewals (or the batch's second token alone, `second`), then one chain per hash-tree renewal that covers the
 * group, whose first PartialHashtree holds both data objects' renewal hashes.
 */
export function groupChains(
  batch: JournalBatch,
  group: JournalGroup,
  bodies: readonly [Buffer, Buffer],
  renewals: readonly JournalRenewal[],
  second = false,
): Buffer[] | undefined {
  const at = treeOf(batch).groups?.get(group.returnedSeq);
  if (at === undefined) throw new Error(`journal: entry ${group.returnedSeq} has no data group in its batch`);
  const token = second ? batch.secondToken : batch.token;
  if (!token) return undefined;
  const batchHash = hashOf(batch.hashOid);
  const first = atsAt(
    batch,
    at,
    bodies.map((b) => digest(batchHash, b)),
    token,
  );
  if (second) return [sequence(first)];
  const chains = [chainWithRenewals(first, token, batchHash, renewals, null, batch.batchNo)];
  for (const r of groupRenewals(renewals, group)) {
    const hash = hashOf(r.hashOid);
    const ats = atsOf(r, groupKey(group), renewedMembers(hash, bodies, chains));
    chains.push(chainWithRenewals(ats, r.token, hash, renewals, r.renewalNo, r.renewalNo));
  }
  return chains;
}

/**
 * The DER EvidenceRecord of a signing's data group (RFC 4998 4.2): its signing.authorized and signing.returned
 * entries, `bodies` their data objects as sealed. The group's leaf is in the batch that sealed the
 * signing.returned entry; the first PartialHashtree of each chain holds both hashes, so the record validates
 * over the two data objects together (and over each alone). With our token, its time-stamp renewals and the
 * hash-tree renewals that cover the group, or with the batch's second token alone (`second`).
 */
export function groupEvidenceRecord(
  batch: JournalBatch,
  group: JournalGroup,
  bodies: readonly [Buffer, Buffer],
  renewals: readonly JournalRenewal[],
  second = false,
): Buffer | undefined {
  const chains = groupChains(batch, group, bodies, renewals, second);
  if (!chains) return undefined;
  const algorithms = [batch.hashOid, ...(second ? [] : groupRenewals(renewals, group)).map((r) => r.hashOid)];
  return sequence(
    integer(1),
    sequence(...[...new Set(algorithms)].map((a) => algorithmIdentifier(a))),
    sequence(...chains),
  );
}

/** whether a data group's two data objects are as its batch sealed them (their hashes hash to its leaf) */
export function groupIntact(batch: JournalBatch, group: JournalGroup, bodies: readonly [Buffer, Buffer]): boolean {
  const hash = hashOf(batch.hashOid);
  return groupHash(
    nodeHash(hash),
    bodies.map((b) => digest(hash, b)),
  ).equals(group.hash);
}
