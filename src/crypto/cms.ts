/**
 * CMS SignedData building (RFC 5652) shared by everything that makes a CMS signature: CAdES and PAdES
 * (ades/), time-stamp tokens (timestamping/tsa.ts, RFC 3161) and S/MIME mail (notification/smime.ts). The parts:
 * signed attributes (baselineSignedAttributes: EN 319 122-1 6.3, without signing-time for PAdES,
 * EN 319 142-1 5.4), signSignerInfo (then add unsigned attributes, e.g. the B-T signature-time-stamp, to the
 * SignerInfo), encodeSignedData.
 *
 * Signing is node:crypto (signature.ts signWith): pkijs' own sign() goes through WebCrypto, defaults to SHA-1
 * and knows no SHA-3. Certificates go into the SignedData as the DER we already hold; nothing we built is
 * parsed again.
 *
 * Written with util/der.ts rather than pkijs/asn1js objects: this is signDoc's per-hash path (every signature,
 * and at B-T and above every time-stamp token, is a SignerInfo), and building the same structure as asn1js
 * objects costs about ten times as much and was most of the QTSP's CPU under load. OpenSSL (cms -verify
 * -cades, ts -verify, smime -verify), pdfsig and the DSS-style checks of the test suite read what these
 * functions write.
 */
import { hash as digestOf } from 'node:crypto';
import type * as pkijs from 'pkijs';
import {
  algorithmIdentifier,
  explicit,
  integer,
  octetString,
  oid,
  partsOf,
  sequence,
  tlv,
  x509Time,
} from '../util/der.ts';
import { SIGNATURE_OIDS, type HashAlgorithm } from './algorithms.ts';
import { algorithmIdentifierDer, signatureAlgorithm, type SignHash, type SigningKey } from './signature.ts';

export const CMS_OID = {
  data: '1.2.840.113549.1.7.1',
  signedData: '1.2.840.113549.1.7.2',
  contentType: '1.2.840.113549.1.9.3',
  messageDigest: '1.2.840.113549.1.9.4',
  signingTime: '1.2.840.113549.1.9.5',
  /** RFC 5035 5.4 */
  signingCertificateV2: '1.2.840.113549.1.9.16.2.47',
} as const;

/** The signer certificate of a CMS signature: its DER (what goes into the SignedData) and the parsed form. */
export interface CmsCertificate {
  readonly der: Buffer;
  readonly certificate: pkijs.Certificate;
}

export interface CmsSignerInput {
  /** the document digest we were sent */
  readonly hash: Buffer;
  readonly hashAlgorithm: HashAlgorithm;
  readonly signerCertificate: CmsCertificate;
  /** DER CA certificates to include, e.g. the issuing CA */
  readonly chain: readonly Buffer[];
  /** the signer's key, wherever it lives */
  readonly key: SigningKey;
  /** CAdES: present (EN 319 122-1 5.2.1); undefined: no signing-time (PAdES, EN 319 142-1 5.4: the PDF's /M) */
  readonly signingTime?: Date;
}

/** The node:crypto name of a registry hash, as the signature algorithm tables key it. */
export function signHashOf(hashAlgorithm: HashAlgorithm): SignHash {
  if (!Object.hasOwn(SIGNATURE_OIDS.ecdsa, hashAlgorithm.node)) {
    throw new TypeError(`no signature algorithm for hash ${hashAlgorithm.name}`);
  }
  return hashAlgorithm.node as SignHash;
}

/**
 * A digest AlgorithmIdentifier without parameters: RFC 5754 2 (SHA-2: "SHOULD omit") and RFC 8702 / NIST CSOR
 * (SHA-3: absent).
 */
const digestAlgorithmOf = (hashAlgorithm: HashAlgorithm): Buffer =>
  kept(digestAlgorithms, hashAlgorithm.oid, () => algorithmIdentifier(hashAlgorithm.oid));

/**
 * The DER pieces every signature of a request (and every time-stamp token of the TSA) repeats, encoded once:
 * re-encoding and copying them for each hash cost more than the ECDSA signature itself. Callers never write
 * into a returned Buffer: DER pieces are only concatenated.
 */
function kept<K, V>(cache: Map<K, V> | WeakMap<K & object, V>, key: K, make: () => V): V {
  let value = cache.get(key as K & object);
  if (value === undefined) {
    value = make();
    cache.set(key as K & object, value);
  }
  return value;
}
const digestAlgorithms = new Map<string, Buffer>();
/** CMSVersion INTEGERs (RFC 5652 5.1, 5.3): 1, 3 and 5 */
const versions = new Map<number, Buffer>();
const version = (v: number): Buffer => kept(versions, v, () => integer(v));

/** GeneralNames of an issuer Name, per Name Buffer: the certificates one CA issues share the one (ca/x509.ts) */
const issuerGeneralNames = new WeakMap<Buffer, Buffer>();

/**
 * IssuerSerial (RFC 5035): SEQUENCE { issuer GeneralNames, serialNumber }, the issuer as one directoryName
 * ([4] EXPLICIT Name, RFC 5280 4.2.1.6), both exactly the bytes of the certificate. Also XAdES IssuerSerialV2.
 */
export function issuerSerial(certificateDer: Buffer): Buffer {
  const parts = partsOf(certificateDer);
  return sequence(
    kept(issuerGeneralNames, parts.issuer, () => sequence(tlv(0xa4, parts.issuer))),
    parts.serial,
  );
}

/** An Attribute ::= SEQUENCE { attrType OID, attrValues SET OF ANY } with one value, as DER, and its type. */
export interface CmsAttribute {
  readonly type: string;
  readonly der: Buffer;
}

function attribute(type: string, value: Buffer): CmsAttribute {
  return { type, der: sequence(oid(type), tlv(0x31, value)) };
}

// ---------------------------------------------------------------------------------------------------------
// Signed attributes (RFC 5652 5.3, 11; RFC 5035; EN 319 122-1 5.2)

const contentTypes = new Map<string, CmsAttribute>();

/** content-type: id-data for signatures over documents, id-ct-TSTInfo in a time-stamp token (RFC 3161 2.4.2) */
export function contentTypeAttribute(contentType: string = CMS_OID.data): CmsAttribute {
  let attr = contentTypes.get(contentType);
  if (!attr) {
    attr = attribute(CMS_OID.contentType, oid(contentType));
    contentTypes.set(contentType, attr);
  }
  return attr;
}

export function messageDigestAttribute(hash: Uint8Array): CmsAttribute {
  return attribute(CMS_OID.messageDigest, octetString(hash));
}

/** the last signing-time attribute made: a request's signatures share one signing time */
let lastSigningTime: { readonly seconds: number; readonly attr: CmsAttribute } | undefined;

/** RFC 5652 11.3: UTCTime for 1950 to 2049, GeneralizedTime otherwise; whole seconds (DER has no ".000"). */
export function signingTimeAttribute(time: Date): CmsAttribute {
  const seconds = Math.floor(time.getTime() / 1000);
  if (lastSigningTime?.seconds !== seconds)
    lastSigningTime = { seconds, attr: attribute(CMS_OID.signingTime, x509Time(time)) };
  return lastSigningTime.attr;
}

const signingCertificates = new WeakMap<Buffer, CmsAttribute>();

/**
 * signing-certificate-v2 (RFC 5035 5.4, EN 319 122-1 5.2.2.3):
 *   SigningCertificateV2 ::= SEQUENCE { certs SEQUENCE OF ESSCertIDv2 }
 *   ESSCertIDv2 ::= SEQUENCE { hashAlgorithm DEFAULT id-sha256, certHash OCTET STRING, issuerSerial IssuerSerial }
 * hashAlgorithm is omitted: the hash is SHA-256, the DEFAULT, and DER leaves DEFAULT values out.
 */
export function signingCertificateV2Attribute(signer: { readonly der: Buffer }): CmsAttribute {
  // once per certificate: a request's hashes share the signer's, every time-stamp token the TSA's
  let attr = signingCertificates.get(signer.der);
  if (!attr) {
    const certHash = digestOf('sha256', signer.der, 'buffer');
    attr = attribute(
      CMS_OID.signingCertificateV2,
      sequence(sequence(sequence(octetString(certHash), issuerSerial(signer.der)))),
    );
    signingCertificates.set(signer.der, attr);
  }
  return attr;
}

/** The signed attributes of a baseline B-B signature: EN 319 122-1 6.3 (CAdES) and EN 319 142-1 6.3 (PAdES). */
export function baselineSignedAttributes(input: {
  readonly hash: Buffer;
  readonly signerCertificate: { readonly der: Buffer };
  readonly signingTime?: Date | undefined;
}): CmsAttribute[] {
  const attributes = [contentTypeAttribute(), messageDigestAttribute(input.hash)];
  if (input.signingTime) attributes.push(signingTimeAttribute(input.signingTime));
  attributes.push(signingCertificateV2Attribute(input.signerCertificate));
  return attributes;
}

/**
 * The encodings of attributes in DER SET OF order. X.690 11.6 orders a SET OF by the encodings of its elements;
 * OpenSSL accepts any order, but BouncyCastle and EU DSS re-sort and then report a broken signature.
 */
export function sortedAttributes(attributes: readonly CmsAttribute[]): Buffer[] {
  return attributes.map((a) => a.der).sort(Buffer.compare);
}

// ---------------------------------------------------------------------------------------------------------
// SignerInfo and SignedData

export interface SignerInfoInput {
  readonly hashAlgorithm: HashAlgorithm;
  readonly signerCertificate: { readonly der: Buffer };
  readonly key: SigningKey;
  readonly signedAttributes: readonly CmsAttribute[];
}

/** A signed SignerInfo as its parts: unsigned attributes (a B-T time-stamp) go after them (signerInfo()). */
export interface SignedSignerInfo {
  /** the six field TLVs version .. signature, in order */
  readonly fields: readonly Buffer[];
  /** the signature value (the content of the last field): what a signature-time-stamp covers */
  readonly signatureValue: Buffer;
}

/**
 * A version 1 SignerInfo (sid issuerAndSerialNumber, RFC 5652 5.3), signed over the DER-sorted signed
 * attributes with the document's hash: ECDSA with SHA-2/SHA-3 (RFC 5758, NIST CSOR; no parameters) or
 * sha*WithRSAEncryption (RFC 4055, NULL parameters) or id-RSASSA-PSS with its RSASSA-PSS-params (RFC 4056 2.1,
 * 'rsa-pss' keys), as signatureAlgorithm() of signature.ts picks from the key's scheme.
 */
export async function signSignerInfo(input: SignerInfoInput): Promise<SignedSignerInfo> {
  const hash = signHashOf(input.hashAlgorithm);
  const attributes = sortedAttributes(input.signedAttributes);
  // the signature covers the SET OF (tag 0x31); the SignerInfo holds the same bytes under [0] IMPLICIT (RFC 5652 5.4)
  const signatureValue = await input.key.sign(hash, tlv(0x31, ...attributes));
  const fields = [
    version(1),
    signerIdentifier(input.signerCertificate.der),
    digestAlgorithmOf(input.hashAlgorithm),
    tlv(0xa0, ...attributes),
    algorithmIdentifierDer(signatureAlgorithm(input.key, hash)),
    octetString(signatureValue),
  ];
  return { fields, signatureValue };
}

const signerIdentifiers = new WeakMap<Buffer, Buffer>();

/** sid: IssuerAndSerialNumber, the certificate's own bytes; once per certificate */
function signerIdentifier(certificateDer: Buffer): Buffer {
  return kept(signerIdentifiers, certificateDer, () => {
    const signer = partsOf(certificateDer);
    return sequence(signer.issuer, signer.serial);
  });
}

/** The SignerInfo SEQUENCE, with unsigned attributes ([1] IMPLICIT SET OF Attribute, DER-sorted) when given. */
export function signerInfo(signed: SignedSignerInfo, unsignedAttributes: readonly Buffer[] = []): Buffer {
  return sequence(
    ...signed.fields,
    ...(unsignedAttributes.length ? [tlv(0xa1, ...[...unsignedAttributes].sort(Buffer.compare))] : []),
  );
}

export interface SignedDataInput {
  readonly hashAlgorithm: HashAlgorithm;
  /** the SignerInfo DER (signerInfo()) */
  readonly signerInfo: Buffer;
  /** DER certificates, the signing certificate first (EN 319 122-1 5.2.2.3: it must be in the SignedData) */
  readonly certificates: readonly Buffer[];
  /** RevocationInfoChoices: CRLs, or [1] OtherRevocationInfoFormat (RFC 5940: OCSP responses in B-LT) */
  readonly crls?: readonly Buffer[];
  /** encapContentInfo's eContentType and, when not detached, its eContent (a time-stamp token's TSTInfo) */
  readonly content?: { readonly type: string; readonly eContent?: Buffer };
}

const digestAlgorithmSets = new Map<string, Buffer>();
const detachedContents = new Map<string, Buffer>();
const certificateSets = new WeakMap<Buffer, { readonly certificates: readonly Buffer[]; readonly der: Buffer }>();

/**
 * certificates [0] IMPLICIT CertificateSet, kept for the last list seen with this first certificate: every
 * signature of a request carries the same signer certificate and chain (the same Buffers)
 */
function certificateSet(certificates: readonly Buffer[]): Buffer {
  const first = certificates[0]!;
  const last = certificateSets.get(first);
  if (
    last &&
    last.certificates.length === certificates.length &&
    last.certificates.every((c, i) => c === certificates[i])
  )
    return last.der;
  const der = tlv(0xa0, ...certificates);
  certificateSets.set(first, { certificates: [...certificates], der });
  return der;
}

/**
 * DER ContentInfo(SignedData) (RFC 5652 5.1). Detached by default: encapContentInfo is id-data without
 * eContent (RFC 5652 5.2). version: 5 when crls holds an OtherRevocationInfoFormat, 3 when the content is not
 * id-data, else 1 (v1 SignerInfos, no attribute certificates).
 */
export function encodeSignedData(input: SignedDataInput): Buffer {
  const crls = input.crls ?? [];
  const type = input.content?.type ?? CMS_OID.data;
  const eContent = input.content?.eContent;
  const signedData = sequence(
    version(crls.some((c) => c[0] === 0xa1) ? 5 : type !== CMS_OID.data ? 3 : 1),
    kept(digestAlgorithmSets, input.hashAlgorithm.oid, () => tlv(0x31, digestAlgorithmOf(input.hashAlgorithm))),
    eContent
      ? sequence(oid(type), explicit(0, octetString(eContent)))
      : kept(detachedContents, type, () => sequence(oid(type))),
    ...(input.certificates.length ? [certificateSet(input.certificates)] : []),
    ...(crls.length ? [tlv(0xa1, ...crls)] : []), // crls [1] IMPLICIT RevocationInfoChoices
    tlv(0x31, input.signerInfo),
  );
  return sequence(oid(CMS_OID.signedData), explicit(0, signedData));
}
