/**
 * Signature primitives. Every signature we make (certificates, CMS, OCSP, time-stamps, XML) is made by a
 * SigningKey, wherever its private key lives (in this process, or in a PKCS#11 token: custody/), so that
 * the algorithm identifier written next to a signature always matches how it was made: both follow from the
 * key alone (signatureAlgorithm, SigningKey.sign). Below everything that signs (ca/, revocation/, ades/, ...).
 */
import { constants, sign as nodeSign, type KeyObject, type SignKeyObjectInput } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { HASH_ALGORITHMS, SIGNATURE_OIDS } from './algorithms.ts';

export type SignHash = keyof typeof SIGNATURE_OIDS.ecdsa;

export type KeyAlgorithm = 'P-256' | 'P-384' | 'RSA-3072';

/** How a key signs: ECDSA (RFC 5758), RSASSA-PKCS1-v1_5 (RFC 8017 8.2) or RSASSA-PSS (RFC 8017 8.1). */
export type SignatureScheme = 'ecdsa' | 'rsa-pkcs1-v1_5' | 'rsa-pss';

/** ECDSA signature encodings: DER (X.509, CMS; RFC 5480 2.2) or r||s (XML-DSig: RFC 4050, IEEE P1363). */
export type EcdsaEncoding = 'der' | 'ieee-p1363';

/** A private key to sign with, wherever it lives (custody/ decides). */
export interface SigningKey {
  readonly algorithm: KeyAlgorithm;
  /** how it signs: fixed per key */
  readonly scheme: SignatureScheme;
  /** A signature over `data` with `hash`; ECDSA signatures are DER unless `encoding` asks for r||s. */
  sign(hash: SignHash, data: Uint8Array, encoding?: EcdsaEncoding): Promise<Buffer>;
}

/** The key's algorithm, read from the key itself: a private KeyObject tells its type and curve as well. */
export function keyAlgorithmOf(key: KeyObject): KeyAlgorithm {
  if (key.asymmetricKeyType === 'rsa' || key.asymmetricKeyType === 'rsa-pss') return 'RSA-3072';
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (curve === 'prime256v1' || curve === 'P-256') return 'P-256';
  if (curve === 'secp384r1' || curve === 'P-384') return 'P-384';
  throw new TypeError(`unsupported key: ${key.asymmetricKeyType} ${curve ?? ''}`);
}

/** The scheme a node:crypto private key signs with: an 'rsa-pss' KeyObject only RSASSA-PSS (keys.ts signingKeyFor). */
export function schemeOf(key: KeyObject): SignatureScheme {
  switch (key.asymmetricKeyType) {
    case 'ec':
      return 'ecdsa';
    case 'rsa':
      return 'rsa-pkcs1-v1_5';
    case 'rsa-pss':
      return 'rsa-pss';
    default:
      throw new TypeError(`unsupported signing key type ${key.asymmetricKeyType}`);
  }
}

/**
 * A node:crypto private key as a SigningKey (software custody). signSync is for the few places that sign
 * with software keys only and synchronously (TLS and sandbox certificates).
 */
export class SoftwareSigningKey implements SigningKey {
  readonly privateKey: KeyObject;
  readonly algorithm: KeyAlgorithm;
  readonly scheme: SignatureScheme;

  constructor(privateKey: KeyObject, algorithm: KeyAlgorithm = keyAlgorithmOf(privateKey)) {
    this.privateKey = privateKey;
    this.algorithm = algorithm;
    this.scheme = schemeOf(privateKey);
  }

  signSync(hash: SignHash, data: Uint8Array, encoding: EcdsaEncoding = 'der'): Buffer {
    if (encoding === 'der') return signWith(this.privateKey, hash, data);
    return nodeSign(hash, data, { key: this.privateKey, dsaEncoding: 'ieee-p1363' });
  }

  async sign(hash: SignHash, data: Uint8Array, encoding: EcdsaEncoding = 'der'): Promise<Buffer> {
    return this.signSync(hash, data, encoding);
  }
}

/** A SigningKey for a node:crypto private key (already one: returned as it is). */
export function softwareKey(key: KeyObject | SigningKey): SigningKey {
  return 'sign' in key ? key : new SoftwareSigningKey(key);
}

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
  return new pkijs.AlgorithmIdentifier(
    hash.startsWith('sha3-') ? { algorithmId: oid } : { algorithmId: oid, algorithmParams: new asn1js.Null() },
  );
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
      maskGenAlgorithm: new pkijs.AlgorithmIdentifier({
        algorithmId: MGF1_OID,
        algorithmParams: pssHashIdentifier(hash).toSchema(),
      }),
      saltLength: hashOf(hash).length,
    });
    der = Buffer.from(params.toSchema().toBER());
    pssParamsCache.set(hash, der);
  }
  return der;
}

/** The signature algorithm of a key (its scheme) with a hash. */
export function signatureAlgorithm(key: KeyObject | SigningKey, hash: SignHash): SignatureAlgorithm {
  switch ('scheme' in key ? key.scheme : schemeOf(key)) {
    case 'ecdsa':
      return { oid: SIGNATURE_OIDS.ecdsa[hash], nullParams: false, hash };
    case 'rsa-pkcs1-v1_5':
      return { oid: SIGNATURE_OIDS.rsa[hash], nullParams: true, hash };
    case 'rsa-pss':
      return { oid: RSASSA_PSS_OID, nullParams: false, hash, params: rsaPssParams(hash) };
  }
}

/** The AlgorithmIdentifier (RFC 5280 4.1.1.2) of a signature algorithm, with its parameters. */
export function algorithmIdentifier(alg: SignatureAlgorithm): pkijs.AlgorithmIdentifier {
  if (alg.params)
    return new pkijs.AlgorithmIdentifier({ algorithmId: alg.oid, algorithmParams: asn1js.fromBER(alg.params).result });
  return new pkijs.AlgorithmIdentifier(
    alg.nullParams ? { algorithmId: alg.oid, algorithmParams: new asn1js.Null() } : { algorithmId: alg.oid },
  );
}

const algorithmIdentifierDers = new Map<string, Buffer>();

/** The DER of algorithmIdentifier(alg), kept once computed: a signDoc signs with a handful of algorithms, per hash. */
export function algorithmIdentifierDer(alg: SignatureAlgorithm): Buffer {
  const key = `${alg.oid} ${alg.hash} ${alg.nullParams}`; // PSS parameters follow from the hash (rsaPssParams)
  let der = algorithmIdentifierDers.get(key);
  if (!der) {
    der = Buffer.from(algorithmIdentifier(alg).toSchema().toBER());
    algorithmIdentifierDers.set(key, der);
  }
  return der;
}

/**
 * Signs data; ECDSA signatures are DER (X.509 and CMS), not IEEE P1363. RSASSA-PSS ('rsa-pss' keys): MGF1 with
 * the signature hash (OpenSSL's default for an unrestricted PSS key) and a salt as long as the hash, matching
 * rsaPssParams.
 */
export function signWith(key: KeyObject, hash: SignHash, data: Uint8Array): Buffer {
  let input: KeyObject | SignKeyObjectInput = key;
  if (key.asymmetricKeyType === 'ec') input = { key, dsaEncoding: 'der' };
  else if (key.asymmetricKeyType === 'rsa-pss')
    input = { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST };
  return nodeSign(hash, data, input);
}
