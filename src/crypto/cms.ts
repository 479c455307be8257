/**
 * CMS SignedData building (RFC 5652) shared by everything that makes a CMS signature: CAdES and PAdES
 * (ades/), time-stamp tokens (pki/tsa.ts, RFC 3161) and S/MIME mail (notification/smime.ts). The parts:
 * signed attributes (baselineSignedAttributes: EN 319 122-1 6.3, without signing-time for PAdES,
 * EN 319 142-1 5.4), signSignerInfo (then add unsigned attributes, e.g. the B-T signature-time-stamp, to the
 * SignerInfo), encodeSignedData.
 *
 * Signing is node:crypto (signature.ts signWith): pkijs' own sign() goes through WebCrypto, defaults to SHA-1
 * and knows no SHA-3 (FIELD-NOTES, CMS). Certificates go into the SignedData as the DER we already hold;
 * nothing we built is parsed again.
 */
import { createHash } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { SIGNATURE_OIDS, type HashAlgorithm } from './algorithms.ts';
import { algorithmIdentifier, signatureAlgorithm, type SignHash, type SigningKey } from './signature.ts';

export const CMS_OID = {
  data: '1.2.840.113549.1.7.1',
  signedData: '1.2.840.113549.1.7.2',
  contentType: '1.2.840.113549.1.9.3',
  messageDigest: '1.2.840.113549.1.9.4',
  signingTime: '1.2.840.113549.1.9.5',
  /** RFC 5035 5.4 */
  signingCertificateV2: '1.2.840.113549.1.9.16.2.47',
} as const;

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

/**
 * DER that is already encoded (certificates we hold as bytes), placed into an asn1js tree as is.
 * asn1js.RawData looks meant for this, but asn1js 4 drops it silently inside a constructed value: constructed
 * blocks pass a writer down, and RawData.toBER ignores it. Parsing the DER again instead costs ~1 ms per
 * certificate (FIELD-NOTES, speed).
 */
export class PreEncoded extends asn1js.BaseBlock {
  readonly #der: ArrayBuffer;

  constructor(der: Uint8Array) {
    super();
    this.#der = new Uint8Array(der).buffer; // a copy: the caller's buffer may be a slice of a pooled one
  }

  override toBER(_sizeOnly?: boolean, writer?: asn1js.ViewWriter): ArrayBuffer {
    if (!writer) return this.#der;
    writer.write(this.#der);
    return new ArrayBuffer(0);
  }
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
function digestAlgorithmOf(hashAlgorithm: HashAlgorithm): pkijs.AlgorithmIdentifier {
  return new pkijs.AlgorithmIdentifier({ algorithmId: hashAlgorithm.oid });
}

/**
 * A Name as the DER it was decoded from or built as (buildName keeps it): pkijs' RelativeDistinguishedNames
 * toSchema() parses that DER again on every call, and rebuilding it from typesAndValues would merge all
 * attributes into one multi-valued RDN. The issuer name must match the certificate byte for byte anyway.
 */
function nameBlock(name: pkijs.RelativeDistinguishedNames): asn1js.BaseBlock {
  return name.valueBeforeDecode.byteLength > 0 ? new PreEncoded(new Uint8Array(name.valueBeforeDecode)) : name.toSchema();
}

/** IssuerAndSerialNumber ::= SEQUENCE { issuer Name, serialNumber CertificateSerialNumber } (RFC 5652 10.2.4) */
function issuerAndSerialNumber(certificate: pkijs.Certificate): asn1js.Sequence {
  return new asn1js.Sequence({ value: [nameBlock(certificate.issuer), certificate.serialNumber] });
}

function attribute(type: string, value: asn1js.AsnType): pkijs.Attribute {
  return new pkijs.Attribute({ type, values: [value] });
}

// ---------------------------------------------------------------------------------------------------------
// Signed attributes (RFC 5652 5.3, 11; RFC 5035; EN 319 122-1 5.2)

export function contentTypeAttribute(): pkijs.Attribute {
  return attribute(CMS_OID.contentType, new asn1js.ObjectIdentifier({ value: CMS_OID.data }));
}

export function messageDigestAttribute(hash: Uint8Array): pkijs.Attribute {
  return attribute(CMS_OID.messageDigest, new asn1js.OctetString({ valueHex: hash }));
}

/** RFC 5652 11.3: UTCTime for 1950 to 2049, GeneralizedTime otherwise; whole seconds (DER has no ".000"). */
export function signingTimeAttribute(time: Date): pkijs.Attribute {
  const whole = new Date(Math.floor(time.getTime() / 1000) * 1000);
  const year = whole.getUTCFullYear();
  const value = year >= 1950 && year < 2050 ? new asn1js.UTCTime({ valueDate: whole }) : new asn1js.GeneralizedTime({ valueDate: whole });
  return attribute(CMS_OID.signingTime, value);
}

/**
 * signing-certificate-v2 (RFC 5035 5.4, EN 319 122-1 5.2.2.3):
 *   SigningCertificateV2 ::= SEQUENCE { certs SEQUENCE OF ESSCertIDv2 }
 *   ESSCertIDv2 ::= SEQUENCE { hashAlgorithm DEFAULT id-sha256, certHash OCTET STRING, issuerSerial IssuerSerial }
 *   IssuerSerial ::= SEQUENCE { issuer GeneralNames, serialNumber CertificateSerialNumber }
 * hashAlgorithm is omitted: the hash is SHA-256, the DEFAULT, and DER leaves DEFAULT values out. The issuer is
 * one GeneralName directoryName ([4] EXPLICIT Name, RFC 5280 4.2.1.6). Composed here rather than with
 * pkijs.IssuerSerial/GeneralName, which would parse the issuer name's DER again (see nameBlock).
 */
export function signingCertificateV2Attribute(signer: CmsCertificate): pkijs.Attribute {
  const directoryName = new asn1js.Constructed({ idBlock: { tagClass: 3, tagNumber: 4 }, value: [nameBlock(signer.certificate.issuer)] });
  const issuerSerial = new asn1js.Sequence({
    value: [new asn1js.Sequence({ value: [directoryName] }), signer.certificate.serialNumber],
  });
  const essCertIdV2 = new asn1js.Sequence({
    value: [new asn1js.OctetString({ valueHex: createHash('sha256').update(signer.der).digest() }), issuerSerial],
  });
  const signingCertificateV2 = new asn1js.Sequence({ value: [new asn1js.Sequence({ value: [essCertIdV2] })] });
  return attribute(CMS_OID.signingCertificateV2, signingCertificateV2);
}

/** The signed attributes of a baseline B-B signature: EN 319 122-1 6.3 (CAdES) and EN 319 142-1 6.3 (PAdES). */
export function baselineSignedAttributes(input: {
  readonly hash: Buffer;
  readonly signerCertificate: CmsCertificate;
  readonly signingTime?: Date;
}): pkijs.Attribute[] {
  const attributes = [contentTypeAttribute(), messageDigestAttribute(input.hash)];
  if (input.signingTime) attributes.push(signingTimeAttribute(input.signingTime));
  attributes.push(signingCertificateV2Attribute(input.signerCertificate));
  return attributes;
}

export interface EncodedAttributes {
  /** the attributes in DER order, as they must appear in SignerInfo.signedAttrs */
  readonly attributes: pkijs.Attribute[];
  /** the DER of each attribute, in the same order */
  readonly encodings: Buffer[];
  /** DER of the SET OF Attribute (tag 0x31): the bytes the signature covers (RFC 5652 5.4) */
  readonly der: Buffer;
}

/**
 * DER of the signed attributes. X.690 11.6 orders a SET OF by the encodings of its elements; pkijs keeps
 * insertion order (PKI.js #402), which OpenSSL accepts but BouncyCastle and EU DSS re-sort and then report a
 * broken signature (FIELD-NOTES, CMS). Each attribute is encoded once; the SET is assembled from those bytes.
 */
export function encodeSignedAttributes(attributes: readonly pkijs.Attribute[]): EncodedAttributes {
  const encoded = attributes.map((a) => ({ attribute: a, der: Buffer.from(a.toSchema().toBER()) }));
  encoded.sort((x, y) => Buffer.compare(x.der, y.der));
  const set = new asn1js.Set({ value: encoded.map((e) => new PreEncoded(e.der)) });
  return { attributes: encoded.map((e) => e.attribute), encodings: encoded.map((e) => e.der), der: Buffer.from(set.toBER()) };
}

/**
 * SignerInfo.signedAttrs ([0] IMPLICIT SET OF Attribute) that writes exactly the encodings that were signed,
 * instead of encoding the attributes again. Signed attributes cannot change after signing anyway.
 */
class SignedAttributes extends pkijs.SignedAndUnsignedAttributes {
  readonly #encodings: readonly Buffer[];

  constructor(encoded: EncodedAttributes) {
    super({ type: 0, attributes: encoded.attributes, encodedValue: new Uint8Array(encoded.der).buffer });
    this.#encodings = encoded.encodings;
  }

  override toSchema(): asn1js.Constructed {
    return new asn1js.Constructed({ idBlock: { tagClass: 3, tagNumber: 0 }, value: this.#encodings.map((der) => new PreEncoded(der)) });
  }
}

// ---------------------------------------------------------------------------------------------------------
// SignerInfo and SignedData

export interface SignerInfoInput {
  readonly hashAlgorithm: HashAlgorithm;
  readonly signerCertificate: CmsCertificate;
  readonly key: SigningKey;
  readonly signedAttributes: readonly pkijs.Attribute[];
}

/**
 * A version 1 SignerInfo (sid issuerAndSerialNumber, RFC 5652 5.3), signed over the DER-sorted signed
 * attributes with the document's hash: ECDSA with SHA-2/SHA-3 (RFC 5758, NIST CSOR; no parameters) or
 * sha*WithRSAEncryption (RFC 4055, NULL parameters) or id-RSASSA-PSS with its RSASSA-PSS-params (RFC 4056 2.1,
 * 'rsa-pss' keys), as signatureAlgorithm() of signature.ts picks from the key's scheme.
 */
export async function signSignerInfo(input: SignerInfoInput): Promise<pkijs.SignerInfo> {
  const hash = signHashOf(input.hashAlgorithm);
  const signed = encodeSignedAttributes(input.signedAttributes);
  const alg = signatureAlgorithm(input.key, hash);
  const signature = await input.key.sign(hash, signed.der);
  return new pkijs.SignerInfo({
    version: 1,
    sid: issuerAndSerialNumber(input.signerCertificate.certificate),
    digestAlgorithm: digestAlgorithmOf(input.hashAlgorithm),
    signedAttrs: new SignedAttributes(signed),
    signatureAlgorithm: algorithmIdentifier(alg),
    signature: new asn1js.OctetString({ valueHex: signature }),
  });
}

export interface SignedDataInput {
  readonly hashAlgorithm: HashAlgorithm;
  readonly signerInfo: pkijs.SignerInfo;
  /** DER certificates, the signing certificate first (EN 319 122-1 5.2.2.3: it must be in the SignedData) */
  readonly certificates: readonly Buffer[];
}

/**
 * DER ContentInfo(SignedData), detached: encapContentInfo is id-data without eContent (RFC 5652 5.2). Built
 * from the RFC 5652 5.1 parts rather than pkijs.SignedData, which wants certificates as parsed objects.
 * version 1: id-data content, v1 SignerInfos, no attribute certificates, no other certificate or revocation
 * formats (RFC 5652 5.1).
 */
export function encodeSignedData(input: SignedDataInput): Buffer {
  const signedData = new asn1js.Sequence({
    value: [
      new asn1js.Integer({ value: 1 }),
      new asn1js.Set({ value: [digestAlgorithmOf(input.hashAlgorithm).toSchema()] }),
      new pkijs.EncapsulatedContentInfo({ eContentType: CMS_OID.data }).toSchema(),
      new asn1js.Constructed({
        idBlock: { tagClass: 3, tagNumber: 0 }, // certificates [0] IMPLICIT CertificateSet
        value: input.certificates.map((der) => new PreEncoded(der)),
      }),
      new asn1js.Set({ value: [input.signerInfo.toSchema()] }),
    ],
  });
  const contentInfo = new pkijs.ContentInfo({ contentType: CMS_OID.signedData, content: signedData });
  return Buffer.from(contentInfo.toSchema().toBER());
}
