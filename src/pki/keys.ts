/**
 * Key pairs and raw signing with node:crypto. All signatures we make (certificates, CMS, JWT-free) go
 * through signWith, so the algorithm identifier written next to a signature always matches how it was made:
 * both are derived from the key object alone (signatureAlgorithm, signWith).
 *
 * RSASSA-PSS travels with the key, not with a flag beside it: a signer key for PSS is an 'rsa-pss' KeyObject
 * (signingKeyFor), which OpenSSL refuses to use for PKCS#1 v1.5, so no builder can sign PKCS#1 v1.5 with a key
 * the request asked to use for PSS, or label a PSS signature as PKCS#1 v1.5.
 */
import { constants, createPrivateKey, createPublicKey, generateKeyPairSync, sign as nodeSign, type KeyObject, type SignKeyObjectInput } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { HASH_ALGORITHMS, SIGNATURE_OIDS } from '../ades/algorithms.ts';

export type KeyAlgorithm = 'P-256' | 'P-384' | 'RSA-3072';
export const KEY_ALGORITHMS: readonly KeyAlgorithm[] = ['P-256', 'P-384', 'RSA-3072'];

/** How a signer key signs: ECDSA (RFC 5758), RSASSA-PKCS1-v1_5 (RFC 8017 8.2) or RSASSA-PSS (RFC 8017 8.1). */
export type SignatureScheme = 'ecdsa' | 'rsa-pkcs1-v1_5' | 'rsa-pss';

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

/** A fresh key pair, synchronously: ~0.05 ms for EC, ~400 ms for RSA-3072 (signer RSA keys come from key-pool.ts). */
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
  if (pub.asymmetricKeyType === 'rsa' || pub.asymmetricKeyType === 'rsa-pss') return 'RSA-3072';
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

export const RSASSA_PSS_OID = '1.2.840.113549.1.1.10';
export const MGF1_OID = '1.2.840.113549.1.1.8';

export interface SignatureAlgorithm {
  readonly oid: string;
  /** true for RSA PKCS#1 v1.5, whose AlgorithmIdentifier carries an explicit NULL */
  readonly nullParams: boolean;
  readonly hash: SignHash;
  /** DER of the parameters when they are neither absent nor NULL: RSASSA-PSS-params (RFC 4055 3.1) */
  readonly params?: Buffer;
}

const HASH_BY_NODE_NAME = new Map([...HASH_ALGORITHMS.values()].map((h) => [h.node, h]));

function hashOf(hash: SignHash) {
  const h = HASH_BY_NODE_NAME.get(hash);
  if (!h) throw new TypeError(`unknown hash ${hash}`);
  return h;
}

/**
 * A hash AlgorithmIdentifier inside RSASSA-PSS-params. RFC 4055 2.1 lists the SHA-2 identifiers for PSS with
 * NULL parameters (as OpenSSL writes them); SHA-3 identifiers have absent parameters (NIST CSOR, RFC 9688).
 */
function pssHashIdentifier(hash: SignHash): pkijs.AlgorithmIdentifier {
  const { oid } = hashOf(hash);
  return new pkijs.AlgorithmIdentifier(hash.startsWith('sha3-') ? { algorithmId: oid } : { algorithmId: oid, algorithmParams: new asn1js.Null() });
}

const pssParamsCache = new Map<SignHash, Buffer>();

/**
 * RSASSA-PSS-params (RFC 4055 3.1) as we sign: hash = the signature hash, MGF1 with the same hash, salt length =
 * hash length, trailer field 1 (left out: DER omits the DEFAULT). These are also the only parameters we accept
 * in signAlgoParams (offer.ts), the profile RFC 4055 3.1 recommends and ETSI TS 119 312 expects.
 */
export function rsaPssParams(hash: SignHash): Buffer {
  let der = pssParamsCache.get(hash);
  if (!der) {
    const params = new pkijs.RSASSAPSSParams({
      hashAlgorithm: pssHashIdentifier(hash),
      maskGenAlgorithm: new pkijs.AlgorithmIdentifier({ algorithmId: MGF1_OID, algorithmParams: pssHashIdentifier(hash).toSchema() }),
      saltLength: hashOf(hash).length,
    });
    der = Buffer.from(params.toSchema().toBER());
    pssParamsCache.set(hash, der);
  }
  return der;
}

export function signatureAlgorithm(key: KeyObject, hash: SignHash): SignatureAlgorithm {
  switch (key.asymmetricKeyType) {
    case 'ec':
      return { oid: SIGNATURE_OIDS.ecdsa[hash], nullParams: false, hash };
    case 'rsa':
      return { oid: SIGNATURE_OIDS.rsa[hash], nullParams: true, hash };
    case 'rsa-pss':
      return { oid: RSASSA_PSS_OID, nullParams: false, hash, params: rsaPssParams(hash) };
    default:
      throw new TypeError(`unsupported signing key type ${key.asymmetricKeyType}`);
  }
}

/** The AlgorithmIdentifier (RFC 5280 4.1.1.2) of a signature algorithm, with its parameters. */
export function algorithmIdentifier(alg: SignatureAlgorithm): pkijs.AlgorithmIdentifier {
  if (alg.params) return new pkijs.AlgorithmIdentifier({ algorithmId: alg.oid, algorithmParams: asn1js.fromBER(alg.params).result });
  return new pkijs.AlgorithmIdentifier(alg.nullParams ? { algorithmId: alg.oid, algorithmParams: new asn1js.Null() } : { algorithmId: alg.oid });
}

/**
 * Signs data; ECDSA signatures are DER (X.509 and CMS), not IEEE P1363. RSASSA-PSS ('rsa-pss' keys): MGF1 with
 * the signature hash (OpenSSL's default for an unrestricted PSS key) and a salt as long as the hash, matching
 * rsaPssParams.
 */
export function signWith(key: KeyObject, hash: SignHash, data: Uint8Array): Buffer {
  let input: KeyObject | SignKeyObjectInput = key;
  if (key.asymmetricKeyType === 'ec') input = { key, dsaEncoding: 'der' };
  else if (key.asymmetricKeyType === 'rsa-pss') input = { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST };
  return nodeSign(hash, data, input);
}

// ---------------------------------------------------------------------------------------------------------
// Signer keys for a scheme

/** DER length octets (X.690 8.1.3): short form below 128, long form otherwise. */
function derLength(length: number): Buffer {
  if (length < 0x80) return Buffer.from([length]);
  const bytes: number[] = [];
  for (let n = length; n > 0; n >>= 8) bytes.unshift(n & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/** version 0 (INTEGER), then AlgorithmIdentifier { id-RSASSA-PSS } with absent parameters: an unrestricted PSS key */
const PSS_PKCS8_PREFIX = Buffer.from('020100300b06092a864886f70d01010a', 'hex');

/**
 * The same RSA private key as an 'rsa-pss' KeyObject: PKCS#8 with AlgorithmIdentifier id-RSASSA-PSS and absent
 * parameters (RFC 4055 1.2: any hash, MGF1, salt length). Node and OpenSSL then sign only RSASSA-PSS with it.
 * No parameters restrict the key: OpenSSL 3.0 cannot encode PSS key restrictions naming a SHA-3 hash.
 *
 * The DER is composed by hand, not with asn1js, so that every copy of the private key bytes is ours to
 * overwrite after the import (asn1js keeps internal copies). The bytes never leave this function.
 */
function asRsaPssKey(privateKey: KeyObject): KeyObject {
  const rsaPrivateKey = privateKey.export({ type: 'pkcs1', format: 'der' });
  const body = Buffer.concat([PSS_PKCS8_PREFIX, Buffer.from([0x04]), derLength(rsaPrivateKey.length), rsaPrivateKey]);
  const pkcs8 = Buffer.concat([Buffer.from([0x30]), derLength(body.length), body]);
  try {
    return createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
  } finally {
    rsaPrivateKey.fill(0);
    body.fill(0);
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
