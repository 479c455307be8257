/**
 * X.509 certificate building, signed with node:crypto (pkijs' own sign() goes through WebCrypto, which is
 * async, slower and has no SHA-3). One place builds every certificate we issue: CA, TLS, signer.
 *
 * The TBSCertificate is written with our small DER writer (util/der.ts), not by pkijs' toSchema().toBER():
 * a per-request signer certificate is on the signDoc hot path, and asn1js spent most of its time there
 * encoding (twice: TBS, then the whole certificate) and re-parsing names. Parts that never
 * change (issuer name, constant extensions, authority key identifier) are encoded once and reused. The
 * returned pkijs.Certificate carries the same values for readers (serialNumber, issuer, validity).
 */
import { createHash, hash, randomFillSync, type KeyObject } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { ecPublicPoint } from '../crypto/keys.ts';
import {
  signatureAlgorithm,
  SoftwareSigningKey,
  type SignatureAlgorithm,
  type SignHash,
  type SigningKey,
} from '../crypto/signature.ts';
import {
  algorithmIdentifier,
  bitString,
  booleanTrue,
  children,
  contentOf,
  explicit,
  integer,
  integerFromBytes,
  octetString,
  oid,
  readWhole,
  rememberParts,
  sequence,
  TAG,
  tlv,
  utf8String,
  x509Time,
} from '../util/der.ts';

export const OID = {
  commonName: '2.5.4.3',
  surname: '2.5.4.4',
  serialNumber: '2.5.4.5',
  countryName: '2.5.4.6',
  localityName: '2.5.4.7',
  streetAddress: '2.5.4.9',
  organizationName: '2.5.4.10',
  organizationalUnitName: '2.5.4.11',
  postalCode: '2.5.4.17',
  givenName: '2.5.4.42',
  pseudonym: '2.5.4.65',
  organizationIdentifier: '2.5.4.97',
  subjectDirectoryAttributes: '2.5.29.9',
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  certificatePolicies: '2.5.29.32',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  qcStatements: '1.3.6.1.5.5.7.1.3',
  dateOfBirth: '1.3.6.1.5.5.7.9.1',
  placeOfBirth: '1.3.6.1.5.5.7.9.2',
  countryOfCitizenship: '1.3.6.1.5.5.7.9.4',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
} as const;

/** One RDN attribute; PrintableString where X.520 demands it (country), UTF8String otherwise. */
export interface NameAttribute {
  readonly type: string;
  readonly value: string;
}

/**
 * A Name with one attribute per RDN, in the order given. pkijs would put all attributes into a single
 * multi-valued RDN ("C=DE + O=... + CN=..."), so we encode the SEQUENCE OF SET ourselves; the DER is kept in
 * valueBeforeDecode, which is what pkijs (and issueCertificate) read back.
 */
export function buildName(attributes: readonly NameAttribute[]): pkijs.RelativeDistinguishedNames {
  const typesAndValues = attributes.map(
    ({ type, value }) =>
      new pkijs.AttributeTypeAndValue({
        type,
        value: printable(type) ? new asn1js.PrintableString({ value }) : new asn1js.Utf8String({ value }),
      }),
  );
  return new pkijs.RelativeDistinguishedNames({
    typesAndValues,
    valueBeforeDecode: new Uint8Array(nameDer(attributes)).buffer,
  });
}

const printable = (type: string) => type === OID.countryName || type === OID.serialNumber;

/** The DER of buildName's Name alone, for a certificate request that needs no pkijs view of it (a signer's subject). */
export function nameDer(attributes: readonly NameAttribute[]): Buffer {
  return sequence(
    ...attributes.map(({ type, value }) =>
      tlv(
        TAG.set,
        sequence(
          oid(type),
          printable(type) ? tlv(TAG.printableString, Buffer.from(value, 'latin1')) : utf8String(value),
        ),
      ),
    ),
  );
}

/** OpenSSL's short names of the attribute types we put into names (what `openssl x509 -subject` prints). */
const SHORT_NAMES: Readonly<Record<string, string>> = {
  [OID.commonName]: 'CN',
  [OID.surname]: 'SN',
  [OID.serialNumber]: 'serialNumber',
  [OID.countryName]: 'C',
  [OID.localityName]: 'L',
  [OID.streetAddress]: 'street',
  [OID.organizationName]: 'O',
  [OID.organizationalUnitName]: 'OU',
  [OID.postalCode]: 'postalCode',
  [OID.givenName]: 'GN',
  [OID.pseudonym]: 'pseudonym',
  [OID.organizationIdentifier]: 'organizationIdentifier',
};

/** Words of ASCII letters, digits, '.', '-' and '_' separated by single spaces: nothing OpenSSL escapes */
const PLAIN_VALUE = /^[\w.-]+(?: [\w.-]+)*$/;

/**
 * One value as OpenSSL prints it with RFC 2253 and control-character escaping and UTF-8 output (the flags
 * node's X509Certificate.subject uses): `,+"\<>;` get a backslash, so do a leading `#` or space and a
 * trailing space; control characters and DEL become \XX; everything else, non-ASCII included, is printed
 * as is. (OpenSSL a_strex.c do_buf/do_esc_char.)
 */
function opensslEscape(value: string): string {
  if (PLAIN_VALUE.test(value)) return value;
  const bytes = Buffer.from(value, 'utf8');
  let out = '';
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b >= 0x80) {
      const start = i;
      while (i + 1 < bytes.length && bytes[i + 1]! >= 0x80) i++;
      out += bytes.subarray(start, i + 1).toString('utf8');
    } else if (b < 0x20 || b === 0x7f) out += `\\${b.toString(16).toUpperCase().padStart(2, '0')}`;
    else if (
      ',+"\\<>;'.includes(String.fromCharCode(b)) ||
      (i === bytes.length - 1 ? b === 0x20 : i === 0 && (b === 0x23 || b === 0x20))
    )
      out += `\\${String.fromCharCode(b)}`;
    else out += String.fromCharCode(b);
  }
  return out;
}

/**
 * The text of a name built by buildName, exactly as node's `new X509Certificate(der).subject` gives it with
 * its lines joined by ", " (what the store records and `openssl x509 -subject` shows an auditor), without
 * parsing the certificate we just built on every signDoc. undefined for an attribute type we have no
 * OpenSSL short name for: the caller then asks OpenSSL. test/unit/ca/x509.test.ts holds it to
 * X509Certificate over every ASCII character in every position and non-ASCII text.
 */
export function nameText(attributes: readonly NameAttribute[]): string | undefined {
  const parts: string[] = [];
  for (const { type, value } of attributes) {
    const short = SHORT_NAMES[type];
    if (short === undefined) return undefined;
    parts.push(`${short}=${opensslEscape(value)}`);
  }
  return parts.join(', ');
}

export const KEY_USAGE = {
  digitalSignature: 0,
  nonRepudiation: 1,
  keyEncipherment: 2,
  keyAgreement: 4,
  keyCertSign: 5,
  cRLSign: 6,
} as const;

export function keyUsageExtension(bits: readonly (keyof typeof KEY_USAGE)[]): pkijs.Extension {
  let value = 0;
  let highest = 0;
  for (const b of bits) {
    value |= 0x80 >> KEY_USAGE[b];
    highest = Math.max(highest, KEY_USAGE[b]);
  }
  const bitString = new asn1js.BitString({ valueHex: new Uint8Array([value]).buffer, unusedBits: 7 - highest });
  return new pkijs.Extension({ extnID: OID.keyUsage, critical: true, extnValue: bitString.toBER() });
}

export function basicConstraintsExtension(ca: boolean, pathLen?: number): pkijs.Extension {
  const bc = new pkijs.BasicConstraints(
    ca ? { cA: true, ...(pathLen === undefined ? {} : { pathLenConstraint: pathLen }) } : {},
  );
  return new pkijs.Extension({ extnID: OID.basicConstraints, critical: true, extnValue: bc.toSchema().toBER() });
}

export function extKeyUsageExtension(oids: readonly string[], critical = false): pkijs.Extension {
  const eku = new pkijs.ExtKeyUsage({ keyPurposes: [...oids] });
  return new pkijs.Extension({ extnID: OID.extKeyUsage, critical, extnValue: eku.toSchema().toBER() });
}

export function subjectAltNameExtension(dnsNames: readonly string[], ips: readonly string[]): pkijs.Extension {
  const names = [
    ...dnsNames.map((value) => new pkijs.GeneralName({ type: 2, value })),
    ...ips.map((ip) => new pkijs.GeneralName({ type: 7, value: new asn1js.OctetString({ valueHex: ipBytes(ip) }) })),
  ];
  const san = new pkijs.GeneralNames({ names });
  return new pkijs.Extension({ extnID: OID.subjectAltName, critical: false, extnValue: san.toSchema().toBER() });
}

function ipBytes(ip: string): ArrayBuffer {
  return new Uint8Array(ip.split('.').map(Number)).buffer;
}

/** SHA-1 of the subjectPublicKey BIT STRING contents (RFC 5280 4.2.1.2 method 1); `spki` parsed or as DER. */
export function keyIdentifier(spki: pkijs.PublicKeyInfo | Buffer): Buffer {
  if (!Buffer.isBuffer(spki))
    return createHash('sha1').update(new Uint8Array(spki.subjectPublicKey.valueBlock.valueHexView)).digest();
  return hash('sha1', publicKeyBitsOf(spki), 'buffer');
}

/** The subjectPublicKey BIT STRING content of a DER SubjectPublicKeyInfo past its unused-bits octet (a view). */
function publicKeyBitsOf(spki: Buffer): Buffer {
  const bits = children(spki, readWhole(spki))[1];
  if (bits?.tag !== TAG.bitString) throw new TypeError('not a SubjectPublicKeyInfo');
  return spki.subarray(bits.contentStart + 1, bits.end);
}

export function rawExtension(extnID: string, value: asn1js.AsnType, critical = false): pkijs.Extension {
  return new pkijs.Extension({ extnID, critical, extnValue: value.toBER() });
}

const EC_CURVES: Readonly<Record<string, { oid: string; prefix: Buffer }>> = {
  // SubjectPublicKeyInfo of id-ecPublicKey with the named curve, up to the BIT STRING's 0x04 (RFC 5480 2)
  'P-256': {
    oid: '1.2.840.10045.3.1.7',
    prefix: Buffer.from('3059301306072a8648ce3d020106082a8648ce3d030107034200', 'hex'),
  },
  'P-384': { oid: '1.3.132.0.34', prefix: Buffer.from('3076301006072a8648ce3d020106052b81040022036200', 'hex') },
};

/** The DER of each PublicKeyInfo we made, so issueCertificate does not encode it again. */
const spkiDerOf = new WeakMap<pkijs.PublicKeyInfo, Buffer>();

/**
 * SubjectPublicKeyInfo of a key. EC keys take the fast path: the JWK export is far cheaper than the SPKI
 * export, and the SPKI of a named curve is a fixed prefix and the uncompressed point.
 */
export function spkiOf(publicKey: KeyObject): pkijs.PublicKeyInfo {
  const der = spkiDer(publicKey);
  const info = pkijs.PublicKeyInfo.fromBER(new Uint8Array(der));
  spkiDerOf.set(info, der);
  return info;
}

/** The DER SubjectPublicKeyInfo of a key (spkiOf without the pkijs view: a signer certificate needs none). */
export function spkiDer(publicKey: KeyObject): Buffer {
  const point = ecPublicPoint(publicKey); // a key of generateKeyPair: nothing to read from it (keys.ts)
  if (point) {
    const curve = point.length === 65 ? EC_CURVES['P-256']! : point.length === 97 ? EC_CURVES['P-384'] : undefined;
    if (curve) return Buffer.concat([curve.prefix, point]);
  }
  if (publicKey.asymmetricKeyType === 'ec') {
    const jwk = publicKey.export({ format: 'jwk' });
    const curve = EC_CURVES[jwk.crv ?? ''];
    if (curve)
      return Buffer.concat([
        curve.prefix,
        Buffer.from([4]),
        Buffer.from(jwk.x!, 'base64url'),
        Buffer.from(jwk.y!, 'base64url'),
      ]);
  }
  return publicKey.export({ type: 'spki', format: 'der' });
}

export interface Issuer {
  readonly name: pkijs.RelativeDistinguishedNames;
  readonly keyId: Buffer;
  /** the issuer's key, wherever it lives (custody/) */
  readonly key: SigningKey;
  readonly hash: SignHash;
}

export interface CertificateRequest {
  /** the subject Name, parsed or as DER */
  readonly subject: pkijs.RelativeDistinguishedNames | Buffer;
  /** the SubjectPublicKeyInfo, parsed or as DER */
  readonly publicKey: pkijs.PublicKeyInfo | Buffer;
  /** undefined: self-signed with `selfSignKey` */
  readonly issuer?: Issuer;
  readonly selfSignKey?: KeyObject | SigningKey;
  readonly hash?: SignHash;
  readonly notBefore: Date;
  readonly notAfter: Date;
  /** each parsed, or as the DER of its Extension (what a certificate minted per request builds: nothing to encode) */
  readonly extensions: readonly (pkijs.Extension | Buffer)[];
  /** whether to add subject and authority key identifiers (CA and long-lived certificates) */
  readonly keyIdentifiers?: boolean;
  /** a positive serial chosen by the caller (a renewal every instance computes alike); default randomSerial() */
  readonly serial?: Buffer;
}

/** CSPRNG octets drawn a block at a time: one call into OpenSSL per block of serials rather than per serial */
const RANDOM_OCTETS = 9;
const serialOctets = Buffer.alloc(RANDOM_OCTETS * 256);
let serialOctetsUsed = serialOctets.length;

/**
 * A positive 16-byte serial number: 0x40, the milliseconds since 1970 in 6 octets, then 9 octets (72 bits) from
 * the CSPRNG (RFC 5280 4.1.2.2; CA/B BR 7.1: non-sequential, at least 64 random bits). Serials issued later sort
 * after earlier ones, so the store's indexes keyed by serial grow at their end instead of at a random page each.
 */
export function randomSerial(now: number = Date.now()): Buffer {
  if (serialOctetsUsed === serialOctets.length) {
    randomFillSync(serialOctets);
    serialOctetsUsed = 0;
  }
  const serial = Buffer.alloc(16);
  serial[0] = 0x40;
  serial.writeUIntBE(now, 1, 6);
  serialOctets.copy(serial, 7, serialOctetsUsed, serialOctetsUsed + RANDOM_OCTETS);
  serialOctets.fill(0, serialOctetsUsed, serialOctetsUsed + RANDOM_OCTETS); // each serial's octets are handed out once
  serialOctetsUsed += RANDOM_OCTETS;
  return serial;
}

export function toAlgorithmIdentifier(oid: string, nullParams: boolean): pkijs.AlgorithmIdentifier {
  return new pkijs.AlgorithmIdentifier(
    nullParams ? { algorithmId: oid, algorithmParams: new asn1js.Null() } : { algorithmId: oid },
  );
}

function whole(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000);
}

/** DER of an object encoded once and reused: constant extensions, names, keys (WeakMap: gone with the object) */
function memo<T extends object>(cache: WeakMap<T, Buffer>, key: T, encode: () => ArrayBuffer | Buffer): Buffer {
  let der = cache.get(key);
  if (!der) {
    der = Buffer.from(encode() as ArrayBuffer);
    cache.set(key, der);
  }
  return der;
}

const extensionDers = new WeakMap<pkijs.Extension, Buffer>();
const nameDers = new WeakMap<pkijs.RelativeDistinguishedNames, Buffer>();
const authorityKeyIds = new Map<string, Buffer>();

function nameDerOf(name: pkijs.RelativeDistinguishedNames | Buffer): Buffer {
  if (Buffer.isBuffer(name)) return name;
  return memo(nameDers, name, () =>
    name.valueBeforeDecode.byteLength ? name.valueBeforeDecode : name.toSchema().toBER(),
  );
}

/** Extension ::= SEQUENCE { extnID, critical BOOLEAN DEFAULT FALSE, extnValue OCTET STRING } */
export function extensionDer(extnID: string, value: Buffer, critical = false): Buffer {
  return sequence(oid(extnID), ...(critical ? [booleanTrue()] : []), octetString(value));
}

/** AuthorityKeyIdentifier ::= SEQUENCE { keyIdentifier [0] IMPLICIT OCTET STRING } (RFC 5280 4.2.1.1) */
function authorityKeyIdentifierDer(keyId: Buffer): Buffer {
  const hex = keyId.toString('hex');
  let der = authorityKeyIds.get(hex);
  if (!der) {
    der = extensionDer(OID.authorityKeyIdentifier, sequence(tlv(0x80, keyId)));
    authorityKeyIds.set(hex, der);
  }
  return der;
}

export interface IssuedCertificate {
  readonly der: Buffer;
  /** the pkijs view, made from `der` when first read (nothing on the signDoc path reads it) */
  readonly certificate: pkijs.Certificate;
  /** lowercase hex of the serial number's content octets (the store's and OCSP's form) */
  readonly serialHex: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
}

/** The key a request is signed with: the issuer's, or the self-signing one. */
function signingKeyOf(req: CertificateRequest): SigningKey {
  const key = req.issuer?.key ?? req.selfSignKey;
  if (!key) throw new TypeError('issueCertificate: an issuer or a self-signing key is required');
  return 'sign' in key ? key : new SoftwareSigningKey(key);
}

/**
 * A certificate signed by a key in this process, synchronously: TLS and sandbox certificates, and software
 * CAs. A key in a token signs through issueCertificateAsync.
 */
export function issueCertificate(req: CertificateRequest): IssuedCertificate {
  const key = signingKeyOf(req);
  if (!(key instanceof SoftwareSigningKey))
    throw new TypeError('issueCertificate signs with software keys only: use issueCertificateAsync');
  const tbs = toBeSigned(req, key);
  return assemble(tbs, key.signSync(tbs.alg.hash, tbs.der));
}

/** A certificate signed by its issuer's key wherever that lives (a per-request signer certificate, pki init). */
export async function issueCertificateAsync(req: CertificateRequest): Promise<IssuedCertificate> {
  const key = signingKeyOf(req);
  const tbs = toBeSigned(req, key);
  return assemble(tbs, await key.sign(tbs.alg.hash, tbs.der));
}

interface ToBeSigned {
  readonly der: Buffer;
  readonly alg: SignatureAlgorithm;
  readonly algIdDer: Buffer;
  /** the serialNumber INTEGER */
  readonly serial: Buffer;
  readonly issuer: Buffer;
  readonly subject: Buffer;
  readonly spki: Buffer;
  readonly notBefore: Date;
  readonly notAfter: Date;
}

/** TBSCertificate (RFC 5280 4.1) */
function toBeSigned(req: CertificateRequest, signingKey: SigningKey): ToBeSigned {
  const hash = req.issuer?.hash ?? req.hash ?? 'sha256';
  const alg = signatureAlgorithm(signingKey, hash);
  const algIdDer = algorithmIdentifier(alg.oid, alg.nullParams);
  const extensionDers_ = req.extensions.map((e) =>
    Buffer.isBuffer(e) ? e : memo(extensionDers, e, () => e.toSchema().toBER()),
  );
  if (req.keyIdentifiers) {
    const skid = keyIdentifier(req.publicKey);
    extensionDers_.push(extensionDer(OID.subjectKeyIdentifier, octetString(skid)));
    extensionDers_.push(authorityKeyIdentifierDer(req.issuer?.keyId ?? skid));
  } else if (req.issuer) {
    extensionDers_.push(authorityKeyIdentifierDer(req.issuer.keyId));
  }
  const serial = integerFromBytes(req.serial ?? randomSerial());
  const notBefore = whole(req.notBefore);
  const notAfter = whole(req.notAfter);
  const issuer = nameDerOf(req.issuer?.name ?? req.subject);
  const subject = nameDerOf(req.subject);
  const spki = Buffer.isBuffer(req.publicKey)
    ? req.publicKey
    : memo(spkiDerOf, req.publicKey, () => (req.publicKey as pkijs.PublicKeyInfo).toSchema().toBER());
  const tbs = sequence(
    V3,
    serial,
    algIdDer,
    issuer,
    sequence(x509Time(notBefore), x509Time(notAfter)),
    subject,
    spki,
    ...(extensionDers_.length ? [explicit(3, sequence(...extensionDers_))] : []),
  );
  return { der: tbs, alg, algIdDer, serial, issuer, subject, spki, notBefore, notAfter };
}

/** version [0] EXPLICIT INTEGER v3 */
const V3 = explicit(0, integer(2));

/**
 * Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }. The pkijs view is parsed from
 * the DER when someone reads it: building it from asn1js objects on every signDoc is a cost for nothing, as what
 * the pipeline needs of a certificate (serial, validity) it knows already.
 */
function assemble(tbs: ToBeSigned, signature: Buffer): IssuedCertificate {
  const der = sequence(tbs.der, tbs.algIdDer, bitString(signature));
  const serialHex = contentOf(tbs.serial).toString('hex');
  // what the CMS and the store read of the certificate, known here: partsOf need not walk what we just wrote
  rememberParts({
    der,
    tbs: tbs.der,
    serial: tbs.serial,
    serialHex,
    issuer: tbs.issuer,
    subject: tbs.subject,
    spki: tbs.spki,
    publicKeyBits: publicKeyBitsOf(tbs.spki),
    signatureAlgorithm: tbs.alg.oid,
    signature,
  });
  let view: pkijs.Certificate | undefined;
  return {
    der,
    get certificate() {
      view ??= pkijs.Certificate.fromBER(new Uint8Array(der));
      return view;
    },
    serialHex,
    notBefore: tbs.notBefore,
    notAfter: tbs.notAfter,
  };
}
