/**
 * Key pairs and signer keys with node:crypto; signing itself is crypto/signature.ts (signWith).
 *
 * RSASSA-PSS travels with the key, not with a flag beside it: a signer key for PSS is an 'rsa-pss' KeyObject
 * (signingKeyFor), which OpenSSL refuses to use for PKCS#1 v1.5, so no builder can sign PKCS#1 v1.5 with a key
 * the request asked to use for PSS, or label a PSS signature as PKCS#1 v1.5.
 */
import { createECDH, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { TAG, tlv } from '../util/der.ts';
import { keyAlgorithmOf, type KeyAlgorithm, type SignatureScheme } from './signature.ts';

export { keyAlgorithmOf, type KeyAlgorithm, type SignatureScheme };
export const KEY_ALGORITHMS: readonly KeyAlgorithm[] = ['P-256', 'P-384', 'RSA-3072'];

/**
 * The signer algorithms we offer (spec 2.12 signAlgo; configuration signer.defaultAlgorithm): a key type and
 * a scheme. RSA-3072 and RSA-PSS-3072 use the same kind of key (one pool serves both).
 */
export const SIGNER_ALGORITHMS = {
  'ECDSA-P256': { key: 'P-256', scheme: 'ecdsa' },
  'ECDSA-P384': { key: 'P-384', scheme: 'ecdsa' },
  'RSA-3072': { key: 'RSA-3072', scheme: 'rsa-pkcs1-v1_5' },
  'RSA-PSS-3072': { key: 'RSA-3072', scheme: 'rsa-pss' },
} as const satisfies Record<string, { key: KeyAlgorithm; scheme: SignatureScheme }>;
export type SignerAlgorithm = keyof typeof SIGNER_ALGORITHMS;

export interface KeyPair {
  readonly algorithm: KeyAlgorithm;
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
}

/** A fresh key pair, synchronously. RSA-3072 generation is slow: signer RSA keys come from custody/key-pool.ts. */
export function generateKeyPair(algorithm: KeyAlgorithm): KeyPair {
  if (algorithm === 'RSA-3072') {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 3072 });
    return { algorithm, privateKey, publicKey };
  }
  return generateEcKeyPair(algorithm);
}

const EC_CURVES: Readonly<Record<'P-256' | 'P-384', { readonly openssl: string; readonly bytes: number }>> = {
  'P-256': { openssl: 'prime256v1', bytes: 32 },
  'P-384': { openssl: 'secp384r1', bytes: 48 },
};

/** The uncompressed public point (0x04 || X || Y) of EC public keys made by generateKeyPair. */
const ecPoints = new WeakMap<KeyObject, Buffer>();

/** The uncompressed point of an EC public key from generateKeyPair, known without reading the key; else undefined. */
export function ecPublicPoint(publicKey: KeyObject): Buffer | undefined {
  return ecPoints.get(publicKey);
}

/**
 * EC key pairs are made with ECDH.generateKeys (the same OpenSSL key generation) and imported, not with
 * generateKeyPairSync. Node 20's EC generation leaves a KeyGenJob for the garbage collector whose destructor takes
 * the key's mutex, while reading a fresh key (export, asymmetricKeyDetails) holds that mutex and allocates: a
 * collection at that moment deadlocks the event loop for good (main thread in futex_wait, ~KeyGenJob called
 * from GetEcKeyDetail's allocation). signDoc reads every fresh signer key for its certificate, so under load it
 * is a matter of time. Imported keys have no job, and the public point is kept (ecPublicPoint), so the
 * certificate needs no export at all.
 */
function generateEcKeyPair(algorithm: 'P-256' | 'P-384'): KeyPair {
  const curve = EC_CURVES[algorithm];
  const ecdh = createECDH(curve.openssl);
  const point = ecdh.generateKeys();
  const raw = ecdh.getPrivateKey(); // without leading zero octets
  const scalar = Buffer.alloc(curve.bytes); // the private scalar at full length (RFC 7518 6.2.2.1)
  raw.copy(scalar, curve.bytes - raw.length);
  raw.fill(0);
  const x = point.subarray(1, 1 + curve.bytes).toString('base64url');
  const y = point.subarray(1 + curve.bytes).toString('base64url');
  try {
    const privateKey = createPrivateKey({
      key: { kty: 'EC', crv: algorithm, x, y, d: scalar.toString('base64url') },
      format: 'jwk',
    });
    // the public half of the imported key, not a second JWK import: that one validates the point again, a large
    // part of the cost of generating the key; deriving it from the private KeyObject costs next to nothing
    const publicKey = createPublicKey(privateKey);
    ecPoints.set(publicKey, point);
    return { algorithm, privateKey, publicKey };
  } finally {
    scalar.fill(0);
  }
}

/** The hash a key of this type signs with by default (certificates and CMS). */
export function defaultHashFor(algorithm: KeyAlgorithm): 'sha256' | 'sha384' {
  return algorithm === 'P-384' ? 'sha384' : 'sha256';
}

// ---------------------------------------------------------------------------------------------------------
// Signer keys for a scheme

/** version 0 (INTEGER), then AlgorithmIdentifier { id-RSASSA-PSS } with absent parameters: an unrestricted PSS key */
const PSS_PKCS8_PREFIX = Buffer.from('020100300b06092a864886f70d01010a', 'hex');

/**
 * The same RSA private key as an 'rsa-pss' KeyObject: PKCS#8 with AlgorithmIdentifier id-RSASSA-PSS and absent
 * parameters (RFC 4055 1.2: any hash, MGF1, salt length). Node and OpenSSL then sign only RSASSA-PSS with it.
 * No parameters restrict the key: OpenSSL 3.0 cannot encode PSS key restrictions naming a SHA-3 hash.
 *
 * The DER is written with util/der.ts, not with asn1js, so that every copy of the private key bytes is ours to
 * overwrite after the import (asn1js keeps internal copies). The bytes never leave this function.
 */
function asRsaPssKey(privateKey: KeyObject): KeyObject {
  const rsaPrivateKey = privateKey.export({ type: 'pkcs1', format: 'der' });
  const privateKeyOctets = tlv(TAG.octetString, rsaPrivateKey);
  const pkcs8 = tlv(TAG.sequence, PSS_PKCS8_PREFIX, privateKeyOctets);
  try {
    return createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
  } finally {
    rsaPrivateKey.fill(0);
    privateKeyOctets.fill(0);
    pkcs8.fill(0);
  }
}

/**
 * The private key to sign with in a scheme. The certificate keeps the rsaEncryption SPKI of the generated key
 * for both RSA schemes (RFC 4055 1.2 allows rsaEncryption keys for RSASSA-PSS, and every validator reads it).
 */
export function signingKeyFor(privateKey: KeyObject, scheme: SignatureScheme): KeyObject {
  const type = privateKey.asymmetricKeyType;
  if (scheme === 'ecdsa' && type === 'ec') return privateKey;
  if (scheme === 'rsa-pkcs1-v1_5' && type === 'rsa') return privateKey;
  if (scheme === 'rsa-pss' && type === 'rsa') return asRsaPssKey(privateKey);
  if (scheme === 'rsa-pss' && type === 'rsa-pss') return privateKey;
  throw new TypeError(`a ${type} key cannot sign with ${scheme}`);
}
