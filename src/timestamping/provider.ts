/**
 * The time-stamping a signature at B-T and above needs, as an interface: the signature builders in ades/
 * depend on it; the in-process TSA and the client of an external one (tsa.ts) implement it.
 */
import type { HashAlgorithm } from '../crypto/algorithms.ts';

/** RFC 3161 time-stamping: a TimeStampToken (DER ContentInfo) over a message imprint. */
export interface TimestampProvider {
  timestamp(messageImprint: Uint8Array, hashAlgorithm: HashAlgorithm): Promise<Buffer>;
  /** DER certificates of the TSA chain (TSA certificate first), for B-LT validation material */
  readonly chain: readonly Buffer[];
}
