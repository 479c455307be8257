/**
 * RFC 4998 EvidenceRecords for journal entries: the entry's canonical JSON bytes are the data object, its batch's
 * hash tree gives the reduced hash tree, and the batch's time-stamp the ArchiveTimeStamp's timeStamp.
 *
 *   EvidenceRecord ::= SEQUENCE { version INTEGER { v1(1) }, digestAlgorithms SEQUENCE OF AlgorithmIdentifier,
 *     cryptoInfos [0] OPTIONAL, encryptionInfo [1] OPTIONAL, archiveTimeStampSequence ArchiveTimeStampSequence }
 *   ArchiveTimeStampSequence ::= SEQUENCE OF ArchiveTimeStampChain
 *   ArchiveTimeStampChain ::= SEQUENCE OF ArchiveTimeStamp
 *   ArchiveTimeStamp ::= SEQUENCE { digestAlgorithm [0] AlgorithmIdentifier OPTIONAL, attributes [1] OPTIONAL,
 *     reducedHashtree [2] SEQUENCE OF PartialHashtree OPTIONAL, timeStamp ContentInfo }
 *   PartialHashtree ::= SEQUENCE OF OCTET STRING
 *
 * The module's tags are IMPLICIT (RFC 4998 appendix A). Neither pkijs nor any other library here has these
 * structures, so they are written by hand with asn1js's element types; the time-stamp token is parsed by
 * asn1js and re-encoded, and refused if that would change one byte of it.
 */
import * as asn1js from 'asn1js';
import { hashByOid } from '../crypto/algorithms.ts';
import type { JournalBatch } from '../store/types.ts';
import { recoverRoot, reducedHashtree, sha256 } from './hash-tree.ts';
import { batchLeaves } from './seal.ts';

const contextTag = (tagNumber: number, value: asn1js.AsnType[]) =>
  new asn1js.Constructed({ idBlock: { tagClass: 3, tagNumber }, value });

/** AlgorithmIdentifier without parameters (RFC 5754 for the SHA-2 family) */
const algorithm = (oid: string) => new asn1js.Sequence({ value: [new asn1js.ObjectIdentifier({ value: oid })] });

/** the token as an asn1js element that encodes to exactly its bytes */
function tokenElement(token: Buffer): asn1js.AsnType {
  const parsed = asn1js.fromBER(new Uint8Array(token));
  if (parsed.offset !== token.length) throw new Error('journal: the batch time-stamp is not one DER element');
  if (!Buffer.from(parsed.result.toBER()).equals(token))
    throw new Error('journal: the batch time-stamp does not re-encode to its own bytes');
  return parsed.result;
}

/** ArchiveTimeStamp over a reduced hash tree (omitted for a one-leaf tree: the token then covers the leaf) */
function archiveTimeStamp(hashOid: string, path: readonly (readonly Buffer[])[], token: Buffer): asn1js.Sequence {
  const tree = path.map(
    (group) =>
      new asn1js.Sequence({ value: group.map((h) => new asn1js.OctetString({ valueHex: new Uint8Array(h) })) }),
  );
  return new asn1js.Sequence({
    value: [
      contextTag(0, [new asn1js.ObjectIdentifier({ value: hashOid })]),
      ...(tree.length > 0 ? [contextTag(2, tree)] : []),
      tokenElement(token),
    ],
  });
}

/** The DER EvidenceRecord of entry `seq` of `batch` (whose leaf hash is `leafHash`, the data object's hash). */
export function evidenceRecord(batch: JournalBatch, seq: number): Buffer {
  if (!hashByOid(batch.hashOid)) throw new Error(`journal: unknown hash ${batch.hashOid}`);
  const index = batch.leaves.findIndex((l) => l.seq === seq);
  if (index < 0) throw new Error(`journal: entry ${seq} is not in batch ${batch.batchNo}`);
  const leaves = batchLeaves(batch.prevRoot, batch.leaves);
  const at = index + (batch.prevRoot ? 1 : 0);
  const path = reducedHashtree(sha256, leaves, at);
  if (!recoverRoot(sha256, leaves[at]!, path).equals(batch.root))
    throw new Error(`journal: batch ${batch.batchNo} does not lead to its root`);
  const record = new asn1js.Sequence({
    value: [
      new asn1js.Integer({ value: 1 }),
      new asn1js.Sequence({ value: [algorithm(batch.hashOid)] }),
      new asn1js.Sequence({
        value: [new asn1js.Sequence({ value: [archiveTimeStamp(batch.hashOid, path, batch.token)] })],
      }),
    ],
  });
  return Buffer.from(record.toBER());
}
