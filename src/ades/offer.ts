/**
 * What this QTSP offers: signature formats, conformance levels and signature algorithms (spec 2.12). A request
 * for anything else is refused (`not_offered`) naming what we do offer, never a wrong signature.
 *
 * One rule decides which format x document hash x signer key combinations we offer: a combination is offered
 * only where an independent validator in our test suite verifies it. OFFER below is that rule written out, the
 * only place that says it; test/unit/ades/offer.test.ts runs each format's validator over every combination,
 * offered (it must verify) and not offered (it fails, which is why).
 *
 * | format | validator                                | hashes                  | signer keys                        |
 * |--------|------------------------------------------|-------------------------|------------------------------------|
 * | C      | openssl cms -verify -cades (OpenSSL 3.0) | SHA-256/384/512, SHA3-* | ECDSA P-256, P-384, RSA-3072       |
 * |        |                                          |                         | PKCS#1 v1.5, RSA-3072 RSASSA-PSS   |
 * | P      | pdfsig (poppler 22.12, NSS): no SHA-3    | SHA-256/384/512         | the same four                      |
 * | X      | xmlsec1 1.2.37: no SHA-3, no RSASSA-PSS  | SHA-256/384/512         | ECDSA P-256, P-384, RSA PKCS#1     |
 *
 * signAlgo rules (spec 2.12 signAlgo / signAlgoParams; ETSI TS 119 432 lets signAlgo name a signature algorithm
 * or a key algorithm). The signature's hash is always the document hash algorithm (documentDigests.
 * hashAlgorithmOID, which is also the CMS digestAlgorithm): a signAlgo naming another hash is refused.
 *
 * | signAlgo                                               | signs with                                       |
 * |--------------------------------------------------------|--------------------------------------------------|
 * | absent                                                 | signer.defaultAlgorithm (default ECDSA P-256)    |
 * | 1.2.840.10045.2.1 ecPublicKey                          | ECDSA; curve from signAlgoParams (namedCurve OID |
 * |                                                        | P-256 or P-384), else the configured default     |
 * |                                                        | curve (P-256 when the default is an RSA one)     |
 * | ecdsa-with-SHA256/384/512, ecdsa-with-SHA3-256/384/512 | ECDSA; P-256 for a 256-bit hash, P-384 for a 384-|
 * | (1.2.840.10045.4.3.2-4, 2.16.840.1.101.3.4.3.10-12)    | or 512-bit one (comparable strength, NIST SP     |
 * |                                                        | 800-57; we offer no P-521); no signAlgoParams    |
 * | 1.2.840.113549.1.1.1 rsaEncryption, sha*WithRSA-       | RSA-3072 PKCS#1 v1.5; signAlgoParams absent or   |
 * | Encryption (.11-.13), RSA with SHA3 (2.16...3.14-16)   | NULL (RFC 4055 2.1)                              |
 * | 1.2.840.113549.1.1.10 id-RSASSA-PSS                    | RSA-3072 PSS; signAlgoParams required: hash =    |
 * |                                                        | document hash, MGF1 with it, salt = hash length, |
 * |                                                        | trailer 1                                        |
 *
 * So P-384 with a 256-bit document hash is ecPublicKey + signAlgoParams = namedCurve secp384r1, and P-256 with
 * SHA-512 is ecPublicKey + namedCurve prime256v1.
 */
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { DomainError } from '../domain-error.ts';
import { SIGNER_ALGORITHMS, type KeyAlgorithm, type SignatureScheme, type SignerAlgorithm } from '../crypto/keys.ts';
import { MGF1_OID, RSASSA_PSS_OID } from '../crypto/signature.ts';
import type { HashAlgorithm } from '../crypto/algorithms.ts';
import { SIGNATURE_OIDS } from '../crypto/algorithms.ts';
import { BUILDERS } from './builders.ts';
import { CONFORMANCE_LEVELS, type ConformanceLevel, type SignatureFormat } from './formats.ts';

const ALL_KEYS: readonly SignerAlgorithm[] = ['ECDSA-P256', 'ECDSA-P384', 'RSA-3072', 'RSA-PSS-3072'];
const SHA2 = ['SHA-256', 'SHA-384', 'SHA-512'] as const;
const SHA3 = ['SHA3-256', 'SHA3-384', 'SHA3-512'] as const;

/** What one format offers under the rule, and the validator that earns it. */
export interface FormatOffer {
  /** the independent validator in our test suite that verifies every offered combination */
  readonly validator: string;
  /** document hashes (HashAlgorithm.name) */
  readonly hashes: readonly string[];
  readonly keys: readonly SignerAlgorithm[];
  /** what the validator cannot verify, and so what we do not offer */
  readonly limits?: string;
}

/**
 * The rule, as one table: a format x hash x key combination is offered only where the format's independent
 * validator verifies it (every combination of the hashes and keys of a row; nothing else).
 */
export const OFFER: Readonly<Record<SignatureFormat, FormatOffer>> = {
  C: { validator: 'openssl cms -verify -cades (OpenSSL 3.0)', hashes: [...SHA2, ...SHA3], keys: ALL_KEYS },
  P: { validator: 'pdfsig (poppler 22.12, NSS)', hashes: SHA2, keys: ALL_KEYS, limits: 'NSS has no SHA-3' },
  X: {
    validator: 'xmlsec1 1.2.37',
    hashes: SHA2,
    keys: ['ECDSA-P256', 'ECDSA-P384', 'RSA-3072'],
    limits: 'xmlsec1 1.2 knows neither the SHA-3 nor the RSASSA-PSS URIs of RFC 6931',
  },
};

const KEY_NAMES: Readonly<Record<SignerAlgorithm, string>> = {
  'ECDSA-P256': 'ECDSA P-256',
  'ECDSA-P384': 'ECDSA P-384',
  'RSA-3072': 'RSA-3072 PKCS#1 v1.5',
  'RSA-PSS-3072': 'RSA-3072 RSASSA-PSS',
};

/** Whether the rule offers this combination. */
export function isOffered(format: SignatureFormat, hash: HashAlgorithm, algorithm: SignerAlgorithm): boolean {
  return OFFER[format].hashes.includes(hash.name) && OFFER[format].keys.includes(algorithm);
}

function formatOfferText(format: SignatureFormat): string {
  const o = OFFER[format];
  const keys = o.keys.map((k) => KEY_NAMES[k]).join(', ');
  return (
    `signature_format ${format} is offered with ${o.hashes.join(', ')} document hashes and ${keys} signer keys ` +
    `(what ${o.validator} verifies${o.limits ? `; ${o.limits}` : ''})`
  );
}

/** format -> levels with a registered builder */
export const OFFERED: Readonly<Record<SignatureFormat, readonly ConformanceLevel[]>> = Object.fromEntries(
  (Object.keys(BUILDERS) as SignatureFormat[]).map((f) => [f, CONFORMANCE_LEVELS.filter((l) => BUILDERS[f][l])]),
) as Record<SignatureFormat, ConformanceLevel[]>;

/** every level signDoc accepts for some format: what the service configuration advertises (spec 2.13) */
export const OFFERED_LEVELS: readonly ConformanceLevel[] = CONFORMANCE_LEVELS.filter((l) =>
  Object.values(OFFERED).some((levels) => levels.includes(l)),
);

export const EC_PUBLIC_KEY = '1.2.840.10045.2.1';
export const RSA_ENCRYPTION = '1.2.840.113549.1.1.1';
/** RFC 5480 2.1.1.1 named curves */
export const NAMED_CURVES: Readonly<Record<string, 'P-256' | 'P-384'>> = {
  '1.2.840.10045.3.1.7': 'P-256',
  '1.3.132.0.34': 'P-384',
};

export interface SigningChoice {
  readonly format: SignatureFormat;
  readonly level: ConformanceLevel;
  readonly algorithm: SignerAlgorithm;
  readonly keyAlgorithm: KeyAlgorithm;
  readonly scheme: SignatureScheme;
}

function offeredText(): string {
  return Object.entries(OFFERED)
    .filter(([, levels]) => levels.length)
    .map(([f, levels]) => `${f} at ${levels.join(', ')}`)
    .join('; ');
}

// ---------------------------------------------------------------------------------------------------------
// signAlgo

type SignAlgoKind = 'ec-key' | 'ecdsa' | 'rsa-key' | 'rsa-pkcs1' | 'rsa-pss';

interface SignAlgoEntry {
  readonly name: string;
  readonly kind: SignAlgoKind;
  /** node:crypto name of the hash the OID fixes, if it fixes one */
  readonly hash?: string;
}

const NAMES: Record<string, string> = {
  sha256: 'SHA256',
  sha384: 'SHA384',
  sha512: 'SHA512',
  'sha3-256': 'SHA3-256',
  'sha3-384': 'SHA3-384',
  'sha3-512': 'SHA3-512',
};

/** Every signAlgo we accept. Anything else (DSA, SHA-1, SHA-224, EdDSA, ...) is not offered. */
const SIGN_ALGOS: ReadonlyMap<string, SignAlgoEntry> = new Map<string, SignAlgoEntry>([
  [EC_PUBLIC_KEY, { name: 'ecPublicKey', kind: 'ec-key' }],
  [RSA_ENCRYPTION, { name: 'rsaEncryption', kind: 'rsa-key' }],
  [RSASSA_PSS_OID, { name: 'id-RSASSA-PSS', kind: 'rsa-pss' }],
  ...Object.entries(SIGNATURE_OIDS.ecdsa).map(([hash, oid]): [string, SignAlgoEntry] => [
    oid,
    { name: `ecdsa-with-${NAMES[hash]}`, kind: 'ecdsa', hash },
  ]),
  ...Object.entries(SIGNATURE_OIDS.rsa).map(([hash, oid]): [string, SignAlgoEntry] => [
    oid,
    {
      name: hash.startsWith('sha3-') ? `id-rsassa-pkcs1-v1_5-with-${hash}` : `${hash}WithRSAEncryption`,
      kind: 'rsa-pkcs1',
      hash,
    },
  ]),
]);

/** What a request with document hashes of `hash` may ask for (among `keys`, the format's), for the refusals. */
export function offeredSignAlgos(hash: HashAlgorithm, keys: readonly SignerAlgorithm[] = ALL_KEYS): string {
  const ecdsa = (SIGNATURE_OIDS.ecdsa as Record<string, string>)[hash.node];
  const rsa = (SIGNATURE_OIDS.rsa as Record<string, string>)[hash.node];
  const curve = ecdsaCurveFor(hash);
  const offers = [
    `${EC_PUBLIC_KEY} (ECDSA; signAlgoParams: namedCurve 1.2.840.10045.3.1.7 P-256 or 1.3.132.0.34 P-384)`,
    `${ecdsa} (ECDSA ${curve} with ${hash.name})`,
    ...(keys.includes('RSA-3072') ? [`${RSA_ENCRYPTION} or ${rsa} (RSA-3072 PKCS#1 v1.5 with ${hash.name})`] : []),
    ...(keys.includes('RSA-PSS-3072')
      ? [`${RSASSA_PSS_OID} (RSA-3072 RSASSA-PSS; signAlgoParams: RSASSA-PSS-params with ${expectedPss(hash)})`]
      : []),
  ];
  return `with ${hash.name} document hashes this QTSP offers signAlgo ${offers.join(', ')}`;
}

function expectedPss(hash: HashAlgorithm): string {
  return `hash ${hash.name}, MGF1 with ${hash.name}, salt length ${hash.length}, trailer field 1`;
}

/** Comparable strength (NIST SP 800-57 part 1, table 3): a 256-bit hash with P-256, longer ones with P-384. */
function ecdsaCurveFor(hash: HashAlgorithm): 'P-256' | 'P-384' {
  return hash.length <= 32 ? 'P-256' : 'P-384';
}

/** A refusal that names what was asked and what we offer: the description the relying party reads. */
const notOffered = (description: string) => new DomainError('not_offered', description);

const ecAlgorithm = (curve: 'P-256' | 'P-384'): SignerAlgorithm => (curve === 'P-256' ? 'ECDSA-P256' : 'ECDSA-P384');

/**
 * signAlgoParams: strict standard Base64 (the round trip rejects URL-safe, whitespace, missing padding) of one
 * DER value.
 */
function decodeParams(value: string): asn1js.AsnType {
  const bytes = Buffer.from(value, 'base64');
  if (value.length === 0 || bytes.toString('base64') !== value)
    throw notOffered('signAlgoParams is not standard Base64 (RFC 4648 section 4)');
  const parsed = asn1js.fromBER(bytes);
  if (parsed.offset === -1 || parsed.offset !== bytes.length)
    throw notOffered('signAlgoParams is not one DER-encoded ASN.1 value');
  return parsed.result;
}

/** ecPublicKey parameters (RFC 5480 2.1.1): a namedCurve OID; implicit and specified curves are not offered. */
function curveFromParams(signAlgoParams: string): 'P-256' | 'P-384' {
  const value = decodeParams(signAlgoParams);
  const oid = value instanceof asn1js.ObjectIdentifier ? value.getValue() : undefined;
  const curve = oid === undefined ? undefined : NAMED_CURVES[oid];
  if (!curve) {
    throw notOffered(
      'signAlgoParams for ecPublicKey must be the namedCurve OID 1.2.840.10045.3.1.7 (P-256) or 1.3.132.0.34 ' +
        `(P-384); got ${oid ?? 'another ASN.1 value'}`,
    );
  }
  return curve;
}

/** RSA PKCS#1 v1.5 identifiers carry NULL parameters; absent is accepted as well (RFC 4055 2.1, RFC 3279 2.3.1). */
function checkNullParams(entry: SignAlgoEntry, signAlgoParams: string | undefined): void {
  if (signAlgoParams === undefined) return;
  if (!(decodeParams(signAlgoParams) instanceof asn1js.Null))
    throw notOffered(`signAlgoParams for ${entry.name} must be absent or NULL`);
}

/** A hash AlgorithmIdentifier inside RSASSA-PSS-params: the document hash, parameters NULL or absent (RFC 4055 2.1). */
function isHashIdentifier(ai: pkijs.AlgorithmIdentifier, hash: HashAlgorithm): boolean {
  return ai.algorithmId === hash.oid && (ai.algorithmParams === undefined || ai.algorithmParams instanceof asn1js.Null);
}

/**
 * RSASSA-PSS-params (RFC 4055 3.1) must be exactly what we sign with (crypto/signature.ts rsaPssParams); reasons
 * name the field.
 */
export function checkRsaPssParams(signAlgoParams: string | undefined, hash: HashAlgorithm): void {
  const expected = `expected RSASSA-PSS-params with ${expectedPss(hash)}`;
  if (signAlgoParams === undefined)
    throw notOffered(`signAlgo ${RSASSA_PSS_OID} (RSASSA-PSS) needs signAlgoParams: ${expected}`);
  let params: pkijs.RSASSAPSSParams;
  try {
    params = new pkijs.RSASSAPSSParams({ schema: decodeParams(signAlgoParams) });
  } catch (err) {
    if (err instanceof DomainError) throw err;
    throw notOffered(`signAlgoParams is not RSASSA-PSS-params; ${expected}`);
  }
  const problems: string[] = [];
  if (!isHashIdentifier(params.hashAlgorithm, hash))
    problems.push(
      `hashAlgorithm ${params.hashAlgorithm.algorithmId} is not the document hash ${hash.name} ${hash.oid}`,
    );
  const mgf = params.maskGenAlgorithm;
  let mgfHash: pkijs.AlgorithmIdentifier | undefined;
  try {
    mgfHash = new pkijs.AlgorithmIdentifier({ schema: mgf.algorithmParams });
  } catch {
    mgfHash = undefined;
  }
  if (mgf.algorithmId !== MGF1_OID || !mgfHash || !isHashIdentifier(mgfHash, hash))
    problems.push(`maskGenAlgorithm is not MGF1 with ${hash.name}`);
  if (params.saltLength !== hash.length) problems.push(`saltLength ${params.saltLength} is not ${hash.length}`);
  if (params.trailerField !== 1) problems.push(`trailerField ${params.trailerField} is not 1`);
  if (problems.length) throw notOffered(`signAlgoParams not offered: ${problems.join('; ')}; ${expected}`);
}

/**
 * The signer algorithm for a request (rules in the header comment). Refuses naming what we offer.
 */
export function resolveSignAlgo(
  hash: HashAlgorithm,
  signAlgo?: string,
  signAlgoParams?: string,
  defaultAlgorithm: SignerAlgorithm = 'ECDSA-P256',
  keys: readonly SignerAlgorithm[] = ALL_KEYS,
): SignerAlgorithm {
  if (signAlgo === undefined) {
    if (signAlgoParams !== undefined) throw notOffered('signAlgoParams was sent without signAlgo');
    // RSA-PSS-3072 as default: our parameters for the document hash (crypto/signature.ts rsaPssParams)
    return defaultAlgorithm;
  }
  const entry = SIGN_ALGOS.get(signAlgo);
  if (!entry) throw notOffered(`signAlgo ${signAlgo} is not offered; ${offeredSignAlgos(hash, keys)}`);
  if (entry.hash !== undefined && entry.hash !== hash.node) {
    const named = [...SIGN_ALGOS.values()].find((e) => e.hash === entry.hash)!;
    throw notOffered(
      `signAlgo ${signAlgo} (${entry.name}) hashes with ${NAMES[named.hash!]}, ` +
        `but the document hashes are ${hash.name}: ` +
        `the signature hash is always the document hash algorithm; ${offeredSignAlgos(hash, keys)}`,
    );
  }
  switch (entry.kind) {
    case 'ec-key': {
      if (signAlgoParams !== undefined) return ecAlgorithm(curveFromParams(signAlgoParams));
      return SIGNER_ALGORITHMS[defaultAlgorithm].scheme === 'ecdsa' ? defaultAlgorithm : 'ECDSA-P256';
    }
    case 'ecdsa':
      // RFC 5758 3.2: the ecdsa-with-* identifiers have absent parameters
      if (signAlgoParams !== undefined)
        throw notOffered(`signAlgoParams must be absent for ${entry.name} (RFC 5758 3.2)`);
      return ecAlgorithm(ecdsaCurveFor(hash));
    case 'rsa-key':
    case 'rsa-pkcs1':
      checkNullParams(entry, signAlgoParams);
      return 'RSA-3072';
    case 'rsa-pss':
      checkRsaPssParams(signAlgoParams, hash);
      return 'RSA-PSS-3072';
  }
}

/**
 * The whole choice for a request: the level must have a builder, and format x hash x key must be offered by
 * the rule (OFFER). Without signAlgo the key is signer.defaultAlgorithm, or ECDSA P-256 where the format does
 * not offer the configured default (an RSASSA-PSS default does not make XAdES unusable for RPs that leave the
 * key to us). Refuses naming what is offered.
 */
export function chooseSigning(
  format: SignatureFormat,
  level: ConformanceLevel,
  hash: HashAlgorithm,
  signAlgo?: string,
  signAlgoParams?: string,
  defaultAlgorithm: SignerAlgorithm = 'ECDSA-P256',
): SigningChoice {
  if (!OFFERED[format].includes(level)) {
    throw notOffered(`signature_format ${format} at ${level} is not offered; this QTSP signs ${offeredText()}`);
  }
  const offer = OFFER[format];
  if (!offer.hashes.includes(hash.name))
    throw notOffered(`${formatOfferText(format)}, not with ${hash.name} document hashes`);
  const fallback = offer.keys.includes(defaultAlgorithm) ? defaultAlgorithm : offer.keys[0]!;
  const algorithm = resolveSignAlgo(hash, signAlgo, signAlgoParams, fallback, offer.keys);
  if (!isOffered(format, hash, algorithm))
    throw notOffered(`${formatOfferText(format)}, not with ${KEY_NAMES[algorithm]} signer keys`);
  const { key, scheme } = SIGNER_ALGORITHMS[algorithm];
  return { format, level, algorithm, keyAlgorithm: key, scheme };
}
