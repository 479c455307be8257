/**
 * X.509 certificate building with pkijs/asn1js, signed with node:crypto (pkijs' own sign() goes through
 * WebCrypto, which is async, slower and has no SHA-3). One place builds every certificate we issue:
 * CA, TLS, signer.
 */
import { createHash, randomBytes, type KeyObject } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { signWith, signatureAlgorithm, type SignHash } from './keys.ts';

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
 * multi-valued RDN ("C=DE + O=... + CN=..."), so we encode the SEQUENCE OF SET ourselves.
 */
export function buildName(attributes: readonly NameAttribute[]): pkijs.RelativeDistinguishedNames {
  const typesAndValues = attributes.map(
    ({ type, value }) =>
      new pkijs.AttributeTypeAndValue({
        type,
        value:
          type === OID.countryName || type === OID.serialNumber
            ? new asn1js.PrintableString({ value })
            : new asn1js.Utf8String({ value }),
      }),
  );
  const der = new asn1js.Sequence({ value: typesAndValues.map((tv) => new asn1js.Set({ value: [tv.toSchema()] })) }).toBER();
  return new pkijs.RelativeDistinguishedNames({ typesAndValues, valueBeforeDecode: der });
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
  const bc = new pkijs.BasicConstraints(ca ? { cA: true, ...(pathLen === undefined ? {} : { pathLenConstraint: pathLen }) } : {});
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

/** SHA-1 of the subjectPublicKey BIT STRING contents (RFC 5280 4.2.1.2 method 1). */
export function keyIdentifier(spki: pkijs.PublicKeyInfo): Buffer {
  return createHash('sha1').update(new Uint8Array(spki.subjectPublicKey.valueBlock.valueHexView)).digest();
}

export function rawExtension(extnID: string, value: asn1js.AsnType, critical = false): pkijs.Extension {
  return new pkijs.Extension({ extnID, critical, extnValue: value.toBER() });
}

export function spkiOf(publicKey: KeyObject): pkijs.PublicKeyInfo {
  return pkijs.PublicKeyInfo.fromBER(publicKey.export({ type: 'spki', format: 'der' }));
}

export interface Issuer {
  readonly name: pkijs.RelativeDistinguishedNames;
  readonly keyId: Buffer;
  readonly privateKey: KeyObject;
  readonly hash: SignHash;
}

export interface CertificateRequest {
  readonly subject: pkijs.RelativeDistinguishedNames;
  readonly publicKey: pkijs.PublicKeyInfo;
  /** undefined: self-signed with `selfSignKey` */
  readonly issuer?: Issuer;
  readonly selfSignKey?: KeyObject;
  readonly hash?: SignHash;
  readonly notBefore: Date;
  readonly notAfter: Date;
  readonly extensions: readonly pkijs.Extension[];
  /** whether to add subject and authority key identifiers (CA and long-lived certificates) */
  readonly keyIdentifiers?: boolean;
}

/** A positive, random 16-byte serial number (RFC 5280 4.1.2.2, CA/B BR 7.1: at least 64 random bits). */
export function randomSerial(): Buffer {
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x40;
  return serial;
}

export function toAlgorithmIdentifier(oid: string, nullParams: boolean): pkijs.AlgorithmIdentifier {
  return new pkijs.AlgorithmIdentifier(nullParams ? { algorithmId: oid, algorithmParams: new asn1js.Null() } : { algorithmId: oid });
}

function whole(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000);
}

export function issueCertificate(req: CertificateRequest): { der: Buffer; certificate: pkijs.Certificate } {
  const signingKey = req.issuer?.privateKey ?? req.selfSignKey;
  if (!signingKey) throw new TypeError('issueCertificate: an issuer or a self-signing key is required');
  const hash = req.issuer?.hash ?? req.hash ?? 'sha256';
  const alg = signatureAlgorithm(signingKey, hash);
  const algId = toAlgorithmIdentifier(alg.oid, alg.nullParams);
  const extensions = [...req.extensions];
  if (req.keyIdentifiers) {
    const skid = keyIdentifier(req.publicKey);
    extensions.push(rawExtension(OID.subjectKeyIdentifier, new asn1js.OctetString({ valueHex: skid })));
    const akid = req.issuer?.keyId ?? skid;
    const aki = new pkijs.AuthorityKeyIdentifier({ keyIdentifier: new asn1js.OctetString({ valueHex: akid }) });
    extensions.push(rawExtension(OID.authorityKeyIdentifier, aki.toSchema()));
  } else if (req.issuer) {
    const aki = new pkijs.AuthorityKeyIdentifier({ keyIdentifier: new asn1js.OctetString({ valueHex: req.issuer.keyId }) });
    extensions.push(rawExtension(OID.authorityKeyIdentifier, aki.toSchema()));
  }
  const cert = new pkijs.Certificate({
    version: 2,
    serialNumber: new asn1js.Integer({ valueHex: randomSerial() }),
    signature: algId,
    issuer: req.issuer?.name ?? req.subject,
    notBefore: new pkijs.Time({ type: 0, value: whole(req.notBefore) }),
    notAfter: new pkijs.Time({ type: 0, value: whole(req.notAfter) }),
    subject: req.subject,
    subjectPublicKeyInfo: req.publicKey,
    extensions,
    signatureAlgorithm: algId,
  });
  const tbs = cert.encodeTBS().toBER();
  cert.tbsView = new Uint8Array(tbs);
  cert.signatureValue = new asn1js.BitString({ valueHex: signWith(signingKey, hash, cert.tbsView) });
  const der = Buffer.from(cert.toSchema(true).toBER());
  return { der, certificate: cert };
}
