/**
 * RFC 4998 hash trees (section 4.2): a node's hash is the hash of its children's hashes sorted in ascending
 * binary order and concatenated; the tree is binary and a node left without a partner is carried up unchanged.
 * A leaf's reduced hash tree (ArchiveTimeStamp.reducedHashtree) is the list of PartialHashtrees from the leaf
 * to the root: the first holds the leaf and its first partner, each later one the partner at the next level
 * where there is one. Verification (section 4.3) sorts, concatenates and hashes the way back up.
 */
import { createHash } from 'node:crypto';
import type { HashAlgorithm } from '../crypto/algorithms.ts';

export type NodeHash = (data: Buffer) => Buffer;

export const sha256: NodeHash = (data) => createHash('sha256').update(data).digest();

/** the node hash of an algorithm */
export const nodeHash =
  (alg: HashAlgorithm): NodeHash =>
  (data) =>
    createHash(alg.node).update(data).digest();

/** the hash of two nodes: sorted, concatenated, hashed */
export function branch(hash: NodeHash, a: Buffer, b: Buffer): Buffer {
  return hash(Buffer.compare(a, b) <= 0 ? Buffer.concat([a, b]) : Buffer.concat([b, a]));
}

/** the hash of a group of values (one PartialHashtree): a single value is itself, more are sorted and hashed */
export function groupHash(hash: NodeHash, values: readonly Buffer[]): Buffer {
  if (values.length === 1) return values[0]!;
  return hash(Buffer.concat([...values].sort(Buffer.compare)));
}

/** the tree's levels, leaves first, root last */
function levels(hash: NodeHash, leaves: readonly Buffer[]): Buffer[][] {
  if (leaves.length === 0) throw new RangeError('a hash tree needs at least one leaf');
  const all = [[...leaves]];
  while (all.at(-1)!.length > 1) {
    const below = all.at(-1)!;
    const up: Buffer[] = [];
    for (let i = 0; i < below.length; i += 2)
      up.push(i + 1 < below.length ? branch(hash, below[i]!, below[i + 1]!) : below[i]!);
    all.push(up);
  }
  return all;
}

export function treeRoot(hash: NodeHash, leaves: readonly Buffer[]): Buffer {
  return levels(hash, leaves).at(-1)![0]!;
}

/** The reduced hash tree of leaf `index`: PartialHashtrees, each a list of hashes; [] for a one-leaf tree. */
export function reducedHashtree(hash: NodeHash, leaves: readonly Buffer[], index: number): Buffer[][] {
  const path: Buffer[][] = [];
  let at = index;
  for (const level of levels(hash, leaves).slice(0, -1)) {
    const partner = at % 2 === 0 ? at + 1 : at - 1;
    if (partner < level.length) path.push(path.length === 0 ? [level[at]!, level[partner]!] : [level[partner]!]);
    at = Math.floor(at / 2);
  }
  if (path.length === 0 && leaves.length > 1) throw new Error('unreachable: a leaf without partners');
  return path;
}

/**
 * A tree built once, for many reduced hash trees (an export asks for one per entry). A leaf may be a data group
 * (RFC 4998 4.2): then its value is the group's hash, and its reduced hash tree starts with the group's
 * values, the partner following in the next PartialHashtree.
 */
export class HashTree {
  readonly #hash: NodeHash;
  readonly #levels: Buffer[][];

  constructor(hash: NodeHash, leaves: readonly Buffer[]) {
    this.#hash = hash;
    this.#levels = levels(hash, leaves);
  }

  get root(): Buffer {
    return this.#levels.at(-1)![0]!;
  }

  /** the reduced hash tree of leaf `index`; `group`: the values whose group hash that leaf is */
  path(index: number, group?: readonly Buffer[]): Buffer[][] {
    const grouped = group !== undefined && group.length > 1;
    if (grouped && !groupHash(this.#hash, group).equals(this.#levels[0]![index]!))
      throw new Error('the group does not hash to its leaf');
    const path: Buffer[][] = grouped ? [[...group]] : [];
    let at = index;
    for (const level of this.#levels.slice(0, -1)) {
      const partner = at % 2 === 0 ? at + 1 : at - 1;
      if (partner < level.length) path.push(path.length === 0 ? [level[at]!, level[partner]!] : [level[partner]!]);
      at = Math.floor(at / 2);
    }
    return path;
  }
}

/** The root a reduced hash tree leads to (RFC 4998 4.3), or `leaf` itself when the tree is empty. */
export function recoverRoot(hash: NodeHash, leaf: Buffer, path: readonly (readonly Buffer[])[]): Buffer {
  if (path.length === 0) return leaf;
  if (!path[0]!.some((v) => v.equals(leaf))) throw new Error('the leaf is not in the first partial hash tree');
  return pathRoot(hash, path);
}

/** The root of a non-empty reduced hash tree: the first PartialHashtree's group hash, then up (RFC 4998 4.3). */
export function pathRoot(hash: NodeHash, path: readonly (readonly Buffer[])[]): Buffer {
  let node = groupHash(hash, path[0]!);
  for (const group of path.slice(1)) node = branch(hash, node, groupHash(hash, group));
  return node;
}
