/**
 * Key pairs and raw signing with node:crypto. All signatures we make (certificates, CMS, JWT-free) go
 * through signWith, so the algorithm identifier written next to a signature always matches how it was made.
 */
import { generateKeyPairSync, sign as nodeSign, createPublicKey, type KeyObject } from 'node:crypto';
import { SIGNATURE_OIDS } from '../ades/algorithms.ts';

export type KeyAlgorithm = 'P-256' | 'P-384' | 'RSA-3072';
export const KEY_ALGORITHMS: readonly KeyAlgorithm[] = ['P-256', 'P-384', 'RSA-3072'];

export interface KeyPair {
  readonly algorithm: KeyAlgorithm;
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
}

export function generateKeyPair(algorithm: KeyAlgorithm): KeyPair {
  if (algorithm === 'RSA-3072') {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 3072 });
    return { algorithm, privateKey, publicKey };
  }
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: algorithm });
  return { algorithm, privateKey, publicKey };
}

export function keyAlgorithmOf(key: KeyObject): KeyAlgorithm {
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  if (pub.asymmetricKeyType === 'rsa') return 'RSA-3072';
  const curve = pub.asymmetricKeyDetails?.namedCurve;
  if (curve === 'prime256v1' || curve === 'P-256') return 'P-256';
  if (curve === 'secp384r1' || curve === 'P-384') return 'P-384';
  throw new TypeError(`unsupported key: ${pub.asymmetricKeyType} ${curve ?? ''}`);
}

/** The hash a key of this type signs with by default (certificates and CMS). */
export function defaultHashFor(algorithm: KeyAlgorithm): 'sha256' | 'sha384' {
  return algorithm === 'P-384' ? 'sha384' : 'sha256';
}

export type SignHash = keyof typeof SIGNATURE_OIDS.ecdsa;

export interface SignatureAlgorithm {
  readonly oid: string;
  /** true for RSA PKCS#1 v1.5, whose AlgorithmIdentifier carries an explicit NULL */
  readonly nullParams: boolean;
  readonly hash: SignHash;
}

export function signatureAlgorithm(key: KeyObject, hash: SignHash): SignatureAlgorithm {
  const rsa = keyAlgorithmOf(key) === 'RSA-3072';
  return { oid: (rsa ? SIGNATURE_OIDS.rsa : SIGNATURE_OIDS.ecdsa)[hash], nullParams: rsa, hash };
}

/** Signs data; ECDSA signatures are DER (X.509 and CMS), not IEEE P1363. */
export function signWith(key: KeyObject, hash: SignHash, data: Uint8Array): Buffer {
  return nodeSign(hash, data, key.asymmetricKeyType === 'ec' ? { key, dsaEncoding: 'der' } : key);
}
