/**
 * Algorithm registry: the six hash algorithms of spec 2.7 and the signature algorithms we sign with.
 * node:crypto does all hashing and signing (WebCrypto has no SHA-3, and the sync API is faster).
 */
import { createHash } from 'node:crypto';

export interface HashAlgorithm {
  readonly oid: string;
  readonly name: string;
  /** node:crypto digest name */
  readonly node: string;
  /** raw digest length in bytes */
  readonly length: number;
}

const hashes: readonly HashAlgorithm[] = [
  { oid: '2.16.840.1.101.3.4.2.1', name: 'SHA-256', node: 'sha256', length: 32 },
  { oid: '2.16.840.1.101.3.4.2.2', name: 'SHA-384', node: 'sha384', length: 48 },
  { oid: '2.16.840.1.101.3.4.2.3', name: 'SHA-512', node: 'sha512', length: 64 },
  { oid: '2.16.840.1.101.3.4.2.8', name: 'SHA3-256', node: 'sha3-256', length: 32 },
  { oid: '2.16.840.1.101.3.4.2.9', name: 'SHA3-384', node: 'sha3-384', length: 48 },
  { oid: '2.16.840.1.101.3.4.2.10', name: 'SHA3-512', node: 'sha3-512', length: 64 },
];

export const HASH_ALGORITHMS: ReadonlyMap<string, HashAlgorithm> = new Map(hashes.map((h) => [h.oid, h]));
export const SHA256 = HASH_ALGORITHMS.get('2.16.840.1.101.3.4.2.1')!;

export function hashByOid(oid: string): HashAlgorithm | undefined {
  return HASH_ALGORITHMS.get(oid);
}

/** Looks a hash algorithm up by a name such as "sha-256", "SHA3-384" or "sha512". */
export function hashByName(name: string): HashAlgorithm | undefined {
  const wanted = name.toLowerCase().replace(/[^a-z0-9]/g, '');
  return hashes.find((h) => h.name.toLowerCase().replace(/[^a-z0-9]/g, '') === wanted);
}

export function digest(alg: HashAlgorithm, data: Uint8Array): Buffer {
  return createHash(alg.node).update(data).digest();
}

/** Signature algorithm identifiers (RFC 5758, RFC 4055, NIST CSOR for SHA-3). */
export const SIGNATURE_OIDS = {
  ecdsa: {
    sha256: '1.2.840.10045.4.3.2',
    sha384: '1.2.840.10045.4.3.3',
    sha512: '1.2.840.10045.4.3.4',
    'sha3-256': '2.16.840.1.101.3.4.3.10',
    'sha3-384': '2.16.840.1.101.3.4.3.11',
    'sha3-512': '2.16.840.1.101.3.4.3.12',
  },
  rsa: {
    sha256: '1.2.840.113549.1.1.11',
    sha384: '1.2.840.113549.1.1.12',
    sha512: '1.2.840.113549.1.1.13',
    'sha3-256': '2.16.840.1.101.3.4.3.14',
    'sha3-384': '2.16.840.1.101.3.4.3.15',
    'sha3-512': '2.16.840.1.101.3.4.3.16',
  },
} as const;
