/**
 * nameText (the store's subject text, written without parsing the certificate) against an independent
 * oracle: OpenSSL, through node's X509Certificate.subject, over the certificates issueCertificate builds; and
 * the parts of an issued certificate that the builder records (der.ts partsOf) against reading its DER.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject, X509Certificate } from 'node:crypto';
import {
  buildName,
  issueCertificate,
  keyIdentifier,
  nameText,
  OID,
  randomSerial,
  spkiOf,
  type NameAttribute,
} from '../../../src/ca/x509.ts';
import { SoftwareSigningKey } from '../../../src/crypto/signature.ts';
import { certificateParts, partsOf } from '../../../src/util/der.ts';

const key = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const spki = spkiOf(key.publicKey);

function openssl(attributes: NameAttribute[]): string {
  const { der } = issueCertificate({
    subject: buildName(attributes),
    publicKey: spki,
    selfSignKey: key.privateKey,
    notBefore: new Date(0),
    notAfter: new Date(86_400_000),
    extensions: [],
  });
  return new X509Certificate(der).subject.split('\n').join(', ');
}

describe('nameText equals OpenSSL subject text', () => {
  test('every attribute type we write', () => {
    const utf8Types = [
      OID.commonName,
      OID.surname,
      OID.localityName,
      OID.streetAddress,
      OID.organizationName,
      OID.organizationalUnitName,
      OID.postalCode,
      OID.givenName,
      OID.pseudonym,
      OID.organizationIdentifier,
    ];
    const attributes: NameAttribute[] = [
      { type: OID.countryName, value: 'DE' },
      { type: OID.serialNumber, value: 'PNODE-123' },
      ...utf8Types.map((type, i) => ({ type, value: `value ${i}` })),
    ];
    assert.equal(nameText(attributes), openssl(attributes));
  });

  test('every ASCII character at the start, in the middle and at the end of a value', () => {
    for (let c = 1; c < 0x80; c++) {
      const ch = String.fromCharCode(c);
      const attributes = [
        { type: OID.countryName, value: 'DE' },
        { type: OID.givenName, value: `${ch}a${ch}b${ch}` },
        { type: OID.commonName, value: `${ch}${ch}` },
        { type: OID.surname, value: ch },
      ];
      assert.equal(nameText(attributes), openssl(attributes), `character 0x${c.toString(16)}`);
    }
  });

  test('non-ASCII names', () => {
    for (const value of [
      'Jürgen Müller-Lüdenscheidt',
      'Åsa Ødegård',
      'Zoë Ñúñez',
      'Σωκράτης',
      'Анна Павлова',
      '李小龙',
      'José 😀 Ωmega',
      'e\u0301 combining',
      '\u00a0nbsp\u00a0',
      'ß#,+;',
    ]) {
      const attributes = [
        { type: OID.countryName, value: 'DE' },
        { type: OID.commonName, value },
        { type: OID.pseudonym, value: `#${value} ` },
      ];
      assert.equal(nameText(attributes), openssl(attributes), value);
    }
  });

  test('an attribute type without an OpenSSL short name here: undefined (the caller asks OpenSSL)', () => {
    assert.equal(nameText([{ type: '2.5.4.8', value: 'Bayern' }]), undefined);
  });
});

describe('the parts of a certificate issueCertificate built', () => {
  const ca = generateKeyPairSync('ec', { namedCurve: 'P-384' });
  const caName = buildName([{ type: OID.commonName, value: 'Parts CA' }]);
  const issuer = {
    name: caName,
    keyId: keyIdentifier(spkiOf(ca.publicKey)),
    key: new SoftwareSigningKey(ca.privateKey),
    hash: 'sha384' as const,
  };
  const leaf = (publicKey: KeyObject, subject: string) =>
    issueCertificate({
      subject: buildName([{ type: OID.commonName, value: subject }]),
      publicKey: spkiOf(publicKey),
      issuer,
      keyIdentifiers: true,
      notBefore: new Date(0),
      notAfter: new Date(86_400_000),
      extensions: [],
    }).der;

  test('are what reading its DER gives, for EC, RSA and RSASSA-PSS keys', () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 });
    const pss = generateKeyPairSync('rsa-pss', { modulusLength: 1024 });
    const certificates = [
      leaf(key.publicKey, 'EC leaf'),
      issueCertificate({
        subject: buildName([{ type: OID.commonName, value: 'RSA self-signed' }]),
        publicKey: spkiOf(rsa.publicKey),
        selfSignKey: rsa.privateKey,
        notBefore: new Date(0),
        notAfter: new Date(86_400_000),
        extensions: [],
        serial: Buffer.from('80ff', 'hex'),
      }).der,
      issueCertificate({
        subject: buildName([{ type: OID.commonName, value: 'PSS self-signed' }]),
        publicKey: spkiOf(pss.publicKey),
        selfSignKey: pss.privateKey,
        hash: 'sha256',
        notBefore: new Date(0),
        notAfter: new Date(86_400_000),
        extensions: [],
      }).der,
    ];
    for (const der of certificates) {
      assert.deepEqual({ ...partsOf(der) }, { ...certificateParts(Buffer.from(der)) });
      assert.equal(
        new X509Certificate(der).serialNumber.toLowerCase().replace(/^0+/, ''),
        partsOf(der).serialHex.replace(/^0+/, ''),
      );
    }
  });

  test('are known without reading the certificate: its issuer is the Name its CA issues under, not a copy', () => {
    const first = partsOf(leaf(key.publicKey, 'one'));
    const second = partsOf(leaf(key.publicKey, 'two'));
    assert.equal(first.issuer, second.issuer);
  });
});

describe('serial numbers of issued certificates', () => {
  test('are positive 16-octet INTEGERs as OpenSSL reads them, later ones sort after earlier ones, 72 bits differ', () => {
    const serials = Array.from({ length: 64 }, () => {
      const der = leafWithDefaultSerial();
      const hex = new X509Certificate(der).serialNumber.toLowerCase();
      assert.equal(hex, partsOf(der).serialHex);
      return hex;
    });
    for (const hex of serials) assert.match(hex, /^40[0-9a-f]{30}$/, 'a 0x40 octet first: positive, 16 octets');
    assert.equal(new Set(serials.map((s) => s.slice(14))).size, serials.length, 'the random part differs each time');
    assert.deepEqual(
      [...serials].sort((a, b) => a.slice(0, 14).localeCompare(b.slice(0, 14))),
      serials,
    );
    const early = randomSerial(Date.parse('2026-01-01T00:00:00Z')).toString('hex');
    const late = randomSerial(Date.parse('2026-01-01T00:00:00.001Z')).toString('hex');
    assert.ok(early < late, 'a millisecond later sorts after');
  });
});

function leafWithDefaultSerial(): Buffer {
  return Buffer.from(
    issueCertificate({
      subject: buildName([{ type: OID.commonName, value: 'serial' }]),
      publicKey: spki,
      selfSignKey: key.privateKey,
      notBefore: new Date(0),
      notAfter: new Date(86_400_000),
      extensions: [],
    }).der,
  );
}
