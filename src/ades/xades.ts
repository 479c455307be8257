/**
 * Detached XAdES baseline signatures, B-B and B-T (ETSI EN 319 132-1: clause 6 baseline, 5.2 signed and 5.3
 * unsigned properties), over a document digest we were sent: we never see the document (spec 2.12), so the
 * ds:Reference to it carries the given DigestMethod and DigestValue. A second ds:Reference covers
 * xades:SignedProperties (Type http://uri.etsi.org/01903#SignedProperties, exclusive C14N).
 *
 * Written as text, not built through an XML object model: a library's element tree, change tracking and
 * serialiser cost many times the one signature they carry, and our structure is fixed (every element,
 * attribute, namespace declaration and their order are known), so its canonical form is known too. The
 * rules relied on, from Exclusive XML Canonicalization 1.0 (W3C xml-exc-c14n) and Canonical XML 1.0 2.3
 * (which it refers to): an empty element is written as a start and an end tag; attributes are sorted by
 * name (Type before URI), namespace declarations come first; a namespace is declared on each element of
 * the canonicalised subtree that uses it and whose output ancestors do not declare it (so on the apex, and on
 * every ds: element inside xades:SignedProperties). Every text and attribute value we write is Base64, hex,
 * a date or a fixed URI, so nothing needs escaping (XML 1.0 2.4, 3.3.3): names of the certificates travel
 * only inside their Base64 DER (ds:X509Certificate, xades:IssuerSerialV2).
 *
 * Signing follows XML-DSig 3.1.2: digest the canonical SignedProperties into its reference, canonicalise
 * SignedInfo with its CanonicalizationMethod (exclusive C14N) and sign those bytes with node:crypto like
 * every other signature of this service. ECDSA values are r||s (XML Signature 1.1 6.4.3).
 *
 * Hash algorithms: SHA-256/384/512 only. XML-DSig has URIs for SHA-3 (RFC 6931 2.1.5,
 * http://www.w3.org/2007/05/xmldsig-more#sha3-256 ...), but xmlsec1 1.2 (Debian's, our oracle) does not know
 * them: a SHA-3 XAdES would be a signature nobody here can check.
 * RSASSA-PSS: the builder writes the RFC 6931 SignatureMethod URIs, but offer.ts does not offer X with PSS keys,
 * since xmlsec1 1.2 cannot verify them either (the one rule of offer.ts).
 */
import { randomBytes } from 'node:crypto';
import { digest, type HashAlgorithm } from '../crypto/algorithms.ts';
import type { SigningKey } from '../crypto/signature.ts';
import type { BuiltSignature, SignatureInput } from './types.ts';
import { issuerSerial } from '../crypto/cms.ts';
import { DomainError } from '../domain-error.ts';

const DS_NS = 'http://www.w3.org/2000/09/xmldsig#';
const XADES_NS = 'http://uri.etsi.org/01903/v1.3.2#';
const XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n';

/**
 * XML digest method URIs by node:crypto hash name: SHA-256 and SHA-512 from XML Encryption (xmlenc#), SHA-384
 * from RFC 6931 2.1.3 (xmldsig-more#), the one xmlsec1 and EU DSS use.
 */
const DIGEST_URIS: Readonly<Record<string, string>> = {
  sha256: 'http://www.w3.org/2001/04/xmlenc#sha256',
  sha384: 'http://www.w3.org/2001/04/xmldsig-more#sha384',
  sha512: 'http://www.w3.org/2001/04/xmlenc#sha512',
};

/** Exclusive C14N (W3C xml-exc-c14n): output independent of where the signature is later embedded. */
const EXC_C14N = 'http://www.w3.org/2001/10/xml-exc-c14n#';
/** EN 319 132-1: the Type of the reference to SignedProperties */
const SIGNED_PROPERTIES_TYPE = 'http://uri.etsi.org/01903#SignedProperties';
/** We do not know what the document is (spec 2.12 sends digests only): DataObjectFormat says just bytes. */
const DOCUMENT_MIME_TYPE = 'application/octet-stream';

/** The document hashes XAdES is offered with (see the module comment for why SHA-3 is not). */
export function xadesSupportsHash(hashAlgorithm: HashAlgorithm): boolean {
  return Object.hasOwn(DIGEST_URIS, hashAlgorithm.node);
}

/** Names of the hashes X is offered with, for the refusal of the others. */
export const XADES_HASH_NAMES: readonly string[] = ['SHA-256', 'SHA-384', 'SHA-512'];

function digestUri(hashAlgorithm: HashAlgorithm): string {
  const uri = DIGEST_URIS[hashAlgorithm.node];
  if (!uri)
    throw new RangeError(`XAdES is not offered with ${hashAlgorithm.name}; offered: ${XADES_HASH_NAMES.join(', ')}`);
  return uri;
}

/**
 * The reference to the detached document. RFC 6920 `ni:` URI naming the object by the digest we were sent:
 * signDoc never learns a file name, and the URI is signed, so it must not pretend to know one. A verifier
 * maps it to the document (xmlsec1: --url-map), or, holding one detached document, uses that.
 */
export function documentUri(hash: Buffer, hashAlgorithm: HashAlgorithm): string {
  return `ni:///${hashAlgorithm.name.toLowerCase()};${hash.toString('base64url')}`;
}

/** How a key signs SignedInfo: the SignatureMethod URI and the node:crypto options that match it. */
export interface XmlSignatureMethod {
  readonly uri: string;
  readonly sign: (data: Uint8Array) => Promise<Buffer>;
}

const SIGNATURE_METHOD_URIS = {
  /** RFC 6931 (RFC 4051): ECDSA; the value is r||s, each as long as the curve order (XML Signature 1.1 6.4.3) */
  ec: {
    sha256: 'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256',
    sha384: 'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384',
    sha512: 'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha512',
  },
  /** RFC 6931 (RFC 4051): RSASSA-PKCS1-v1_5 */
  rsa: {
    sha256: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256',
    sha384: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha384',
    sha512: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha512',
  },
  /** RFC 6931 RSASSA-PSS without parameters: MGF1 with the same hash, salt as long as the hash, trailer 1 */
  'rsa-pss': {
    sha256: 'http://www.w3.org/2007/05/xmldsig-more#sha256-rsa-MGF1',
    sha384: 'http://www.w3.org/2007/05/xmldsig-more#sha384-rsa-MGF1',
    sha512: 'http://www.w3.org/2007/05/xmldsig-more#sha512-rsa-MGF1',
  },
} as const;

type XmlHash = keyof (typeof SIGNATURE_METHOD_URIS)['ec'];

/**
 * The signature algorithm follows the key's scheme, the hash is the document's (as in CAdES): ECDSA signs
 * ecdsa-sha* (r||s), RSA PKCS#1 v1.5 rsa-sha*, RSASSA-PSS sha*-rsa-MGF1 (salt as long as the hash). The key
 * signs, wherever it lives (crypto/signature.ts SigningKey): nothing is exported into WebCrypto.
 */
export function xmlSignatureMethod(key: SigningKey, hashAlgorithm: HashAlgorithm): XmlSignatureMethod {
  digestUri(hashAlgorithm);
  const hash = hashAlgorithm.node as XmlHash;
  switch (key.scheme) {
    case 'ecdsa':
      return { uri: SIGNATURE_METHOD_URIS.ec[hash], sign: (data) => key.sign(hash, data, 'ieee-p1363') };
    case 'rsa-pkcs1-v1_5':
      return { uri: SIGNATURE_METHOD_URIS.rsa[hash], sign: (data) => key.sign(hash, data) };
    case 'rsa-pss':
      return { uri: SIGNATURE_METHOD_URIS['rsa-pss'][hash], sign: (data) => key.sign(hash, data) };
  }
}

/**
 * Where an element is written: in the signature document (empty elements as `<a/>`, namespaces declared
 * once, on ds:Signature and xades:QualifyingProperties), or as the canonical form of a signed subtree
 * (empty elements as `<a></a>`, namespaces declared on the elements that use them: see the module comment).
 */
type Form = 'document' | 'canonical';

/** An element without content; `attributes` are ` name="value"` pairs, declarations first, in canonical order. */
function empty(form: Form, name: string, attributes: string): string {
  return form === 'canonical' ? `<${name}${attributes}></${name}>` : `<${name}${attributes}/>`;
}

/** The declaration a ds: element inside SignedProperties carries in canonical form (no ancestor has it). */
function dsInside(form: Form): string {
  return form === 'canonical' ? ` xmlns:ds="${DS_NS}"` : '';
}

/** What is signed, fixed before SignedProperties and SignedInfo are written. */
interface Signed {
  /** ds:Signature's Id; the Ids of the other elements derive from it */
  readonly id: string;
  readonly digestUri: string;
  readonly input: SignatureInput;
  /** SigningCertificateV2's values, in Base64: written twice (canonical form, document), computed once */
  readonly certificateDigest: string;
  readonly issuerSerialV2: string;
}

/** SigningTime as xsd:dateTime in UTC, to the second (EN 319 132-1 5.2.1). */
function signingTime(time: Date): string {
  return `${time.toISOString().slice(0, 19)}Z`;
}

/**
 * xades:SigningCertificateV2 (EN 319 132-1 5.2.2): the digest of the signer certificate, and IssuerSerialV2,
 * Base64 of the DER IssuerSerial of RFC 5035 with the issuer as one directoryName, the same structure as the
 * CAdES signing-certificate-v2 (the issuer Name as the certificate's own DER).
 */
function signingCertificate(signed: Signed, form: Form): string {
  const ds = dsInside(form);
  return (
    '<xades:SigningCertificateV2><xades:Cert><xades:CertDigest>' +
    empty(form, 'ds:DigestMethod', `${ds} Algorithm="${signed.digestUri}"`) +
    `<ds:DigestValue${ds}>${signed.certificateDigest}</ds:DigestValue></xades:CertDigest>` +
    `<xades:IssuerSerialV2>${signed.issuerSerialV2}</xades:IssuerSerialV2>` +
    '</xades:Cert></xades:SigningCertificateV2>'
  );
}

/**
 * xades:SignedProperties of B-B (EN 319 132-1 6.3): SigningTime, SigningCertificateV2, and DataObjectFormat
 * for the document reference. In canonical form its apex declares the xades namespace.
 */
function signedProperties(signed: Signed, form: Form): string {
  const xmlns = form === 'canonical' ? ` xmlns:xades="${XADES_NS}"` : '';
  return (
    `<xades:SignedProperties${xmlns} Id="xades-${signed.id}"><xades:SignedSignatureProperties>` +
    `<xades:SigningTime>${signingTime(signed.input.signingTime)}</xades:SigningTime>` +
    `${signingCertificate(signed, form)}</xades:SignedSignatureProperties>` +
    `<xades:SignedDataObjectProperties><xades:DataObjectFormat ObjectReference="#${signed.id}-ref-document">` +
    `<xades:MimeType>${DOCUMENT_MIME_TYPE}</xades:MimeType></xades:DataObjectFormat>` +
    '</xades:SignedDataObjectProperties></xades:SignedProperties>'
  );
}

/**
 * SignedInfo's two references: the detached document with the digest we were sent, then SignedProperties
 * digested after exclusive C14N. In canonical form the second one's attributes are sorted (Type, URI).
 */
function references(signed: Signed, propertiesDigest: string, form: Form): string {
  const { input, id, digestUri } = signed;
  const target = `URI="#xades-${id}"`;
  const type = `Type="${SIGNED_PROPERTIES_TYPE}"`;
  const digestMethod = empty(form, 'ds:DigestMethod', ` Algorithm="${digestUri}"`);
  return (
    `<ds:Reference Id="${id}-ref-document" URI="${documentUri(input.hash, input.hashAlgorithm)}">${digestMethod}` +
    `<ds:DigestValue>${input.hash.toString('base64')}</ds:DigestValue></ds:Reference>` +
    `<ds:Reference ${form === 'canonical' ? `${type} ${target}` : `${target} ${type}`}>` +
    `<ds:Transforms>${empty(form, 'ds:Transform', ` Algorithm="${EXC_C14N}"`)}</ds:Transforms>${digestMethod}` +
    `<ds:DigestValue>${propertiesDigest}</ds:DigestValue></ds:Reference>`
  );
}

/** ds:SignedInfo (XML-DSig 4.4): exclusive C14N, the key's SignatureMethod, the references. */
function signedInfo(signed: Signed, method: XmlSignatureMethod, propertiesDigest: string, form: Form): string {
  const xmlns = form === 'canonical' ? ` xmlns:ds="${DS_NS}"` : '';
  return (
    `<ds:SignedInfo${xmlns}>${empty(form, 'ds:CanonicalizationMethod', ` Algorithm="${EXC_C14N}"`)}` +
    `${empty(form, 'ds:SignatureMethod', ` Algorithm="${method.uri}"`)}` +
    `${references(signed, propertiesDigest, form)}</ds:SignedInfo>`
  );
}

/**
 * KeyInfo (EN 319 132-1 6.3 "shall contain the signing certificate"): one X509Data with the signer
 * certificate and the CA certificates up to the root, which XML-DSig 4.5.4 reads as one chain.
 */
function keyInfo(input: SignatureInput): string {
  const certificates = [input.signerCertificate.der, ...input.chain]
    .map((der) => `<ds:X509Certificate>${der.toString('base64')}</ds:X509Certificate>`)
    .join('');
  return `<ds:KeyInfo><ds:X509Data>${certificates}</ds:X509Data></ds:KeyInfo>`;
}

/**
 * B-T's xades:UnsignedProperties (EN 319 132-1 5.3): one SignatureTimeStamp, whose RFC 3161 token covers
 * ds:SignatureValue canonicalised with the CanonicalizationMethod it names.
 */
function unsignedProperties(id: string, token: Buffer): string {
  return (
    '<xades:UnsignedProperties><xades:UnsignedSignatureProperties>' +
    `<xades:SignatureTimeStamp Id="${id}-signature-time-stamp">` +
    `${empty('document', 'ds:CanonicalizationMethod', ` Algorithm="${EXC_C14N}"`)}` +
    `<xades:EncapsulatedTimeStamp>${token.toString('base64')}</xades:EncapsulatedTimeStamp>` +
    '</xades:SignatureTimeStamp></xades:UnsignedSignatureProperties></xades:UnsignedProperties>'
  );
}

/** A signature whose SignedInfo is signed; B-T adds its time-stamp before it is written out. */
interface SignedSignature {
  readonly signed: Signed;
  readonly signedInfo: string;
  readonly signatureValue: string;
}

/** A fresh ds:Signature Id: `id-` and 6 random bytes in hex. */
function signatureId(): string {
  return `id-${randomBytes(6).toString('hex')}`;
}

function checkInput(input: SignatureInput): void {
  digestUri(input.hashAlgorithm);
  if (input.hash.length !== input.hashAlgorithm.length) {
    throw new RangeError(
      `document hash has ${input.hash.length} bytes, ${input.hashAlgorithm.name} has ${input.hashAlgorithm.length}`,
    );
  }
}

/**
 * XML-DSig 3.1 core generation: the SignedProperties reference's digest over its canonical form, then the
 * signature over canonical SignedInfo.
 */
async function signDetached(input: SignatureInput, id: string): Promise<SignedSignature> {
  checkInput(input);
  const der = input.signerCertificate.der;
  const signed: Signed = {
    id,
    digestUri: digestUri(input.hashAlgorithm),
    input,
    certificateDigest: digest(input.hashAlgorithm, der).toString('base64'),
    issuerSerialV2: issuerSerial(der).toString('base64'),
  };
  const method = xmlSignatureMethod(input.key, input.hashAlgorithm);
  const canonicalProperties = Buffer.from(signedProperties(signed, 'canonical'), 'utf8');
  const propertiesDigest = digest(input.hashAlgorithm, canonicalProperties).toString('base64');
  const canonicalSignedInfo = Buffer.from(signedInfo(signed, method, propertiesDigest, 'canonical'), 'utf8');
  const value = await method.sign(canonicalSignedInfo);
  return {
    signed,
    signedInfo: signedInfo(signed, method, propertiesDigest, 'document'),
    signatureValue: value.toString('base64'),
  };
}

/** The whole ds:Signature as UTF-8 bytes, with B-T's unsigned properties when there are some. */
function serialise(signature: SignedSignature, unsigned = ''): Buffer {
  const { signed } = signature;
  const xml =
    `${XML_DECLARATION}<ds:Signature Id="${signed.id}" xmlns:ds="${DS_NS}">${signature.signedInfo}` +
    `<ds:SignatureValue>${signature.signatureValue}</ds:SignatureValue>${keyInfo(signed.input)}` +
    `<ds:Object><xades:QualifyingProperties Target="#${signed.id}" xmlns:xades="${XADES_NS}">` +
    `${signedProperties(signed, 'document')}${unsigned}</xades:QualifyingProperties></ds:Object></ds:Signature>`;
  return Buffer.from(xml, 'utf8');
}

/**
 * XAdES baseline B-B, detached, over the document hash we were sent: UTF-8 XML bytes. `id` is the
 * ds:Signature Id, fresh unless a test fixes it to compare outputs.
 */
export async function buildXadesBaselineB(input: SignatureInput, id = signatureId()): Promise<BuiltSignature> {
  return { signature: serialise(await signDetached(input, id)) };
}

/**
 * XAdES baseline B-T: B-B plus xades:SignatureTimeStamp in UnsignedSignatureProperties (EN 319 132-1 5.3),
 * an RFC 3161 token over the exclusive-C14N form of ds:SignatureValue (which declares the ds namespace and
 * has no attributes), hashed with the document's hash algorithm.
 */
export async function buildXadesBaselineT(input: SignatureInput, id = signatureId()): Promise<BuiltSignature> {
  const tsa = input.services.timestamps;
  if (!tsa)
    throw new DomainError('not_configured', 'XAdES-B-T needs a time-stamping authority, and none is configured');
  const signature = await signDetached(input, id);
  const canonicalValue = `<ds:SignatureValue xmlns:ds="${DS_NS}">${signature.signatureValue}</ds:SignatureValue>`;
  const token = await tsa.timestamp(
    digest(input.hashAlgorithm, Buffer.from(canonicalValue, 'utf8')),
    input.hashAlgorithm,
  );
  return { signature: serialise(signature, unsignedProperties(id, token)) };
}
