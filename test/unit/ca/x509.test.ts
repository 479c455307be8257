/**
 * nameText (the store's subject text, written without parsing the certificate) against an independent
 * oracle: OpenSSL, through node's X509Certificate.subject, over the certificates issueCertificate builds.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { buildName, issueCertificate, nameText, OID, spkiOf, type NameAttribute } from '../../../src/ca/x509.ts';

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
