/**
 * Detached XAdES baseline signatures, B-B and B-T (ETSI EN 319 132-1: clause 6 baseline, 5.2 signed and 5.3
 * unsigned properties), over a document digest we were sent: we never see the document (spec 2.12), so the
 * ds:Reference to it carries the given DigestMethod and DigestValue. A second ds:Reference covers
 * xades:SignedProperties (Type http://uri.etsi.org/01903#SignedProperties, exclusive C14N).
 *
 * Built with xadesjs/xmldsigjs types: xadesjs adds the SignedProperties reference, xmldsigjs' transforms
 * canonicalise SignedProperties and SignedInfo, and xml-core writes the tree. The steps of SignedXml.Sign
 * that find, copy and hash what is signed, and the signature itself, are ours (DetachedXadesSignature): it
 * signs with a WebCrypto CryptoKey, we sign with node:crypto like every other signature of this service, and
 * the elements to canonicalise are the ones xadesjs built. ECDSA values are r||s (XML Signature 1.1 6.4.3).
 *
 * Hash algorithms: SHA-256/384/512 only. XML-DSig has URIs for SHA-3 (RFC 6931 2.1.5,
 * http://www.w3.org/2007/05/xmldsig-more#sha3-256 ...), but neither xmlsec1 1.2 (Debian's, our oracle) nor
 * WebCrypto (xmldsigjs' digest engine) knows them: a SHA-3 XAdES would be a signature nobody here can check.
 * RSASSA-PSS: the builder writes the RFC 6931 SignatureMethod URIs, but offer.ts does not offer X with PSS keys,
 * since xmlsec1 1.2 cannot verify them either (the one rule of offer.ts).
 */
import { webcrypto } from 'node:crypto';
import { DOMImplementation, DOMParser, XMLSerializer } from '@xmldom/xmldom';
import * as XAdES from 'xadesjs';
import { XmlObject } from 'xml-core';
import * as XmlDSig from 'xmldsigjs';
import * as pkijs from 'pkijs';
import xpath from 'xpath';
import { digest, type HashAlgorithm } from '../crypto/algorithms.ts';
import type { SigningKey } from '../crypto/signature.ts';
import type { BuiltSignature, SignatureInput } from './types.ts';
import { issuerSerial, type CmsCertificate } from '../crypto/cms.ts';
import { DomainError } from '../domain-error.ts';

// xml-core (under xadesjs) has no DOM of its own in Node; xmldsigjs digests through WebCrypto (node's). Both
// are process-wide settings of those libraries, which nothing else in this service uses.
XAdES.setNodeDependencies({ DOMParser, XMLSerializer, DOMImplementation, xpath });
XAdES.Application.setEngine('NodeJS', webcrypto as unknown as Crypto);

const XMLNS = 'http://www.w3.org/2000/xmlns/';
const dom = new DOMImplementation();
const parsedDocument = XmlObject.CreateDocument.bind(XmlObject);

/**
 * xml-core makes each element of a signature in a document of its own (XmlObject.CreateDocument, twice per
 * element of every GetXml), and makes that document by parsing a text such as `<ds:Signature
 * xmlns:ds="..."></ds:Signature>`. The same document (that root element and its namespace declaration) built
 * by the DOM instead of the parser, once per process for each name: xml-core, xmldsigjs and xadesjs only
 * create elements with it (GetXml, CreateElement, KeyInfoX509Data.GetXml) and never change its tree. The one
 * case xml-core refuses (a prefix without a namespace) still goes to it.
 */
const elementDocuments = new Map<string, Document>();
XmlObject.CreateDocument = (root = 'xml_root', namespaceUri: string | null = null, prefix: string | null = null) => {
  if (prefix && !namespaceUri) return parsedDocument(root, namespaceUri, prefix);
  const name = prefix ? `${prefix}:${root}` : root;
  const key = `${name} ${namespaceUri ?? ''}`;
  let doc = elementDocuments.get(key);
  if (!doc) {
    doc = dom.createDocument(namespaceUri, name, null) as unknown as Document;
    if (namespaceUri) doc.documentElement.setAttributeNS(XMLNS, prefix ? `xmlns:${prefix}` : 'xmlns', namespaceUri);
    elementDocuments.set(key, doc);
  }
  return doc;
};

/**
 * xml-core's CreateElement, without the deep `document.importNode` of the new element whose copy it drops
 * (a walk and a clone of every element of a signature, for nothing).
 */
(XmlObject.prototype as unknown as { CreateElement: typeof createElement }).CreateElement = createElement;
function createElement(
  this: XmlObject,
  document?: Document,
  localName?: string,
  namespaceUri: string | null = null,
  prefix: string | null = null,
): Element {
  const doc = document ?? XmlObject.CreateDocument(this.LocalName, this.NamespaceURI, this.Prefix);
  const name = localName || this.LocalName;
  const uri = namespaceUri || this.NamespaceURI;
  const tagName = (prefix || this.Prefix ? `${prefix || this.Prefix}:` : '') + name;
  return uri ? doc.createElementNS(uri, tagName) : doc.createElement(tagName);
}

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
 * xades:IssuerSerialV2 of SigningCertificateV2 (EN 319 132-1 5.2.2): Base64 of the DER IssuerSerial of RFC 5035,
 *   IssuerSerial ::= SEQUENCE { issuer GeneralNames, serialNumber CertificateSerialNumber }
 * with the issuer as one directoryName ([4] EXPLICIT Name), the same structure as the CAdES
 * signing-certificate-v2. The issuer Name is written as the DER it was built or decoded from, so it matches
 * the certificate byte for byte.
 */
function issuerSerialV2(signer: CmsCertificate): Uint8Array {
  return issuerSerial(signer.der);
}

/**
 * xadesjs' SignedXml, signed by node:crypto, with the SignedProperties reference canonicalised by exclusive
 * C14N.
 */
class DetachedXadesSignature extends XAdES.SignedXml {
  private signedPropertiesReference?: XmlDSig.Reference;

  /**
   * The steps of xmldsigjs' SignedXml.Sign, with the signature value made by node:crypto rather than a
   * WebCrypto key: ApplySignOptions (xadesjs: SigningTime, the SignedProperties reference), the digest of
   * SignedProperties (the document reference keeps the digest we were sent), SignatureMethod, SignedInfo
   * through xmldsigjs' C14N.
   */
  async signWith(method: XmlSignatureMethod, hashAlgorithm: HashAlgorithm, signingTime: Date): Promise<void> {
    // xadesjs takes the hash of the SignedProperties reference from `algorithm` merged with key.algorithm;
    // xmldsigjs reads nothing else of the key unless asked to write a KeyValue. So no CryptoKey is needed.
    const algorithm = { name: method.uri, hash: hashAlgorithm.name };
    const options: XAdES.OptionsXAdES = { signingTime: { value: signingTime, format: 'isoUtcDateTime' } };
    await this.ApplySignOptions(this.XmlSignature, algorithm, { algorithm } as unknown as CryptoKey, options);
    this.digestSignedProperties(hashAlgorithm);
    const signatureMethod = new XmlDSig.SignatureMethod();
    signatureMethod.Algorithm = method.uri;
    this.XmlSignature.SignedInfo.SignatureMethod = signatureMethod;
    this.XmlSignature.SignatureValue = new Uint8Array(
      await method.sign(Buffer.from(this.TransformSignedInfo(), 'utf8')),
    );
  }

  /**
   * What xmldsigjs' DigestReferences does for the one reference without a digest: its transforms over the
   * element it names, hashed with its DigestMethod (xadesjs wrote the URI of `hashAlgorithm` there). The
   * element is the SignedProperties xadesjs holds: xmldsigjs would build KeyInfo and every ds:Object to find
   * it by Id, copy it, and hash through WebCrypto's thread pool.
   */
  private digestSignedProperties(hashAlgorithm: HashAlgorithm): void {
    const ref = this.signedPropertiesReference;
    const element = this.SignedProperties.GetXml();
    if (!ref || !element) throw new Error('xadesjs made no SignedProperties reference');
    const canonical: string = this.ApplyTransforms(ref.Transforms, element);
    ref.DigestValue = new Uint8Array(digest(hashAlgorithm, Buffer.from(canonical, 'utf8')));
  }

  /**
   * SignedInfo canonicalised with its CanonicalizationMethod. xmldsigjs copies the element first, to declare on
   * the copy the namespaces of its ancestors and of the signed data; ours has neither (no data, and SignedInfo
   * is not yet in the signature's tree), so the element itself gives the same text.
   */
  protected override TransformSignedInfo(): string {
    const signedInfo = this.XmlSignature.SignedInfo;
    const element = signedInfo.GetXml();
    if (!element) throw new Error('xmldsigjs made no SignedInfo');
    const c14n = XmlDSig.CryptoConfig.CreateFromName(signedInfo.CanonicalizationMethod.Algorithm);
    c14n.LoadInnerXml(element);
    return c14n.GetOutput();
  }

  protected override async ApplySignOptions(
    signature: XmlDSig.Signature,
    algorithm: Algorithm,
    key: CryptoKey,
    options: XAdES.OptionsXAdES,
  ): Promise<void> {
    await super.ApplySignOptions(signature, algorithm, key, options);
    // xadesjs adds the SignedProperties reference without transforms, which means inclusive C14N (XML-DSig
    // 4.4.3.3): its digest would then depend on the namespaces of wherever the signature is embedded later.
    const ref = signature.SignedInfo.References.Filter((r) => r.Type === SIGNED_PROPERTIES_TYPE).Item(0);
    if (!ref) throw new Error('xadesjs added no SignedProperties reference');
    ref.Transforms = new XmlDSig.Transforms();
    ref.Transforms.Add(new XmlDSig.XmlDsigExcC14NTransform());
    this.signedPropertiesReference = ref;
  }
}

/**
 * A ds:X509Certificate as the DER we hold. xmldsigjs' X509Certificate parses its DER with pkijs in its
 * constructor, which was most of the time a XAdES B-B took, while KeyInfo only writes the bytes back in
 * Base64; the parsed form is made if something reads it.
 */
class HeldX509Certificate extends XmlDSig.X509Certificate {
  protected override LoadRaw(rawData: BufferSource): void {
    let parsed: pkijs.Certificate | undefined;
    Object.defineProperty(this, 'simpl', {
      get: () => (parsed ??= pkijs.Certificate.fromBER(rawData)),
      configurable: true,
    });
  }
}

/**
 * KeyInfo (EN 319 132-1 6.3 "shall contain the signing certificate"): one X509Data with the signer
 * certificate and the CA certificates up to the root, which XML-DSig 4.5.4 reads as one chain; xadesjs'
 * `x509` option would write one X509Data per certificate.
 */
function keyInfo(input: SignatureInput): XmlDSig.KeyInfo {
  const data = new XmlDSig.KeyInfoX509Data();
  for (const der of [input.signerCertificate.der, ...input.chain])
    data.AddCertificate(new HeldX509Certificate(new Uint8Array(der)));
  const info = new XmlDSig.KeyInfo();
  info.Add(data);
  return info;
}

/** SignedInfo's first reference: the detached document, with the digest we were sent. */
function documentReference(input: SignatureInput, id: string): XmlDSig.Reference {
  const reference = new XmlDSig.Reference(documentUri(input.hash, input.hashAlgorithm));
  reference.Id = id;
  reference.DigestMethod.Algorithm = digestUri(input.hashAlgorithm);
  reference.DigestValue = new Uint8Array(input.hash);
  return reference;
}

/**
 * SignedProperties of B-B (EN 319 132-1 6.3): SigningTime, SigningCertificateV2 (digest of the signer
 * certificate and IssuerSerialV2), DataObjectFormat for the document reference. SigningTime itself is set by
 * xadesjs from the sign options.
 */
function addSignedProperties(signed: DetachedXadesSignature, input: SignatureInput, documentReferenceId: string): void {
  const cert = new XAdES.xml.CertV2();
  cert.CertDigest.DigestMethod.Algorithm = digestUri(input.hashAlgorithm);
  cert.CertDigest.DigestValue = new Uint8Array(digest(input.hashAlgorithm, input.signerCertificate.der));
  cert.IssuerSerial = issuerSerialV2(input.signerCertificate);
  signed.SignedProperties.SignedSignatureProperties.SigningCertificateV2.Add(cert);

  const format = new XAdES.xml.DataObjectFormat();
  format.ObjectReference = `#${documentReferenceId}`;
  format.MimeType = DOCUMENT_MIME_TYPE;
  signed.SignedProperties.SignedDataObjectProperties.DataObjectFormats.Add(format);
}

function checkInput(input: SignatureInput): void {
  digestUri(input.hashAlgorithm);
  if (input.hash.length !== input.hashAlgorithm.length) {
    throw new RangeError(
      `document hash has ${input.hash.length} bytes, ${input.hashAlgorithm.name} has ${input.hashAlgorithm.length}`,
    );
  }
}

/** The signature as xadesjs built it, before it is serialised (B-T adds to its unsigned properties). */
async function signDetached(input: SignatureInput): Promise<DetachedXadesSignature> {
  checkInput(input);
  const signed = new DetachedXadesSignature();
  const id = signed.XmlSignature.Id; // xadesjs: id-<random hex>
  const referenceId = `${id}-ref-document`;
  signed.XmlSignature.SignedInfo.CanonicalizationMethod.Algorithm = EXC_C14N;
  signed.XmlSignature.SignedInfo.References.Add(documentReference(input, referenceId));
  addSignedProperties(signed, input, referenceId);
  signed.XmlSignature.KeyInfo = keyInfo(input);
  await signed.signWith(xmlSignatureMethod(input.key, input.hashAlgorithm), input.hashAlgorithm, input.signingTime);
  return signed;
}

function serialise(signed: DetachedXadesSignature): Buffer {
  return Buffer.from(`<?xml version="1.0" encoding="UTF-8"?>\n${signed.toString()}`, 'utf8');
}

/**
 * The bytes a B-T signature time-stamp covers (EN 319 132-1 5.3, SignatureTimeStamp): the ds:SignatureValue element,
 * canonicalised with the CanonicalizationMethod written into the SignatureTimeStamp (exclusive C14N).
 */
function canonicalSignatureValue(signed: DetachedXadesSignature): string {
  // A child of ds:Signature (XML-DSig 4.1): looked up among the children, not by an XPath over the tree.
  const signature = signed.XmlSignature.GetXml();
  const value = signature && XmlObject.GetFirstChild(signature, 'SignatureValue', XmlDSig.XmlSignature.NamespaceURI);
  if (!value) throw new Error('signature has no ds:SignatureValue');
  const c14n = new XmlDSig.XmlDsigExcC14NTransform();
  c14n.LoadInnerXml(value);
  return c14n.GetOutput();
}

/** XAdES baseline B-B, detached, over the document hash we were sent: UTF-8 XML bytes. */
export async function buildXadesBaselineB(input: SignatureInput): Promise<BuiltSignature> {
  return { signature: serialise(await signDetached(input)) };
}

/**
 * XAdES baseline B-T: B-B plus xades:SignatureTimeStamp in UnsignedSignatureProperties (EN 319 132-1 5.3),
 * an RFC 3161 token over the canonicalised ds:SignatureValue, hashed with the document's hash algorithm.
 */
export async function buildXadesBaselineT(input: SignatureInput): Promise<BuiltSignature> {
  const tsa = input.services.timestamps;
  if (!tsa)
    throw new DomainError('not_configured', 'XAdES-B-T needs a time-stamping authority, and none is configured');
  const signed = await signDetached(input);
  const imprint = digest(input.hashAlgorithm, Buffer.from(canonicalSignatureValue(signed), 'utf8'));
  const token = await tsa.timestamp(imprint, input.hashAlgorithm);

  const timeStamp = new XAdES.xml.SignatureTimeStamp();
  timeStamp.Id = `${signed.XmlSignature.Id}-signature-time-stamp`;
  timeStamp.CanonicalizationMethod.Algorithm = EXC_C14N;
  const encapsulated = new XAdES.xml.EncapsulatedTimeStamp();
  encapsulated.Value = new Uint8Array(token);
  timeStamp.EncapsulatedTimeStamp.Add(encapsulated);
  signed.UnsignedProperties.UnsignedSignatureProperties.Add(timeStamp);
  return { signature: serialise(signed) };
}
