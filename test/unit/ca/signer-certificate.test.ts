/**
 * The per-request signer certificate (spec 2.16), checked with OpenSSL as the independent oracle: the chain
 * verifies, and subject, Subject Directory Attributes, QC statements, policies and key usage are as specified;
 * missing claims are omitted and malformed ones dropped. The EN 319 412-2 subject rules (countryName and
 * commonName always, a pseudonym without names), the Subject Key Identifier, QcPDS and the QSCD rule (QcSSCD
 * and QCP-n-qscd only for keys in a declared QSCD) are read back with `openssl x509 -text` and `asn1parse`.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, createPublicKey, X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadCaMaterial, pkiPaths, type CaMaterial } from '../../../src/ca/material.ts';
import { pkiInit } from '../../../src/ca/init.ts';
import { generateKeyPair } from '../../../src/crypto/keys.ts';
import { loadConfig } from '../../../src/config/load.ts';
import {
  commonNameOf,
  mintSignerCertificate,
  pseudonymOf,
  signerProfile,
  subjectDirectoryAttributesOf,
  type IdentityClaims,
  type MintSignerCertificateInput,
  type SignerCertificate,
} from '../../../src/ca/signer-certificate.ts';
import { toPem } from '../../../src/util/base64.ts';
import { OID } from '../../../src/ca/x509.ts';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';

const run = promisify(execFile);

let dir: string;
let ca: CaMaterial;
let fileCount = 0;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'qtsp-signer-cert-'));
  pkiInit({ dataDir: dir, qtspId: 'sp:test.example:00000000-0000-4000-8000-000000000000' });
  ca = loadCaMaterial(dir);
});

after(() => rmSync(dir, { recursive: true, force: true }));

const PROFILE = signerProfile({ defaultCountry: 'DE', pdsUrls: {} });
const CONSENT = { issuer: 'https://bank.test', txn: 'c6a2b1de-7f4e-4a51-9d3e-0d1f2a3b4c5d' };

async function mint(
  claims: IdentityClaims,
  now?: Date,
  options: Partial<MintSignerCertificateInput> = {},
): Promise<SignerCertificate> {
  const keys = generateKeyPair('P-256');
  return await mintSignerCertificate({
    claims,
    publicKey: keys.publicKey,
    issuingCa: ca.issuing,
    validitySeconds: 600,
    profile: PROFILE,
    keyInQscd: false,
    consent: CONSENT,
    ...(now ? { now } : {}),
    ...options,
  });
}

/** The subject as `openssl x509 -text -nameopt multiline` prints it. */
async function subjectText(file: string): Promise<string> {
  const text = await x509Text(file);
  return text.slice(text.indexOf('Subject:'), text.indexOf('Subject Public Key Info'));
}

/** OIDs of the qcStatements extension, in order, as `openssl asn1parse` decodes them. */
async function qcStatementOids(file: string): Promise<string[]> {
  const qc = await extensionAsn1(file, QC_STATEMENTS);
  assert.ok(qc, 'qcStatements present');
  return [...qc.matchAll(/OBJECT\s+:(\S+)/g)].map((m) => m[1]!);
}

/** Writes the certificate as PEM and returns its path. */
function save(cert: SignerCertificate): string {
  const file = join(dir, `leaf-${++fileCount}.pem`);
  writeFileSync(file, toPem(cert.der, 'CERTIFICATE'));
  return file;
}

async function openssl(...args: string[]): Promise<string> {
  return (await run('openssl', args)).stdout;
}

/** `openssl x509 -text`, names printed as UTF-8 one attribute per line ("givenName = Erika"). */
async function x509Text(file: string): Promise<string> {
  return openssl('x509', '-in', file, '-noout', '-text', '-nameopt', 'multiline,-esc_msb,utf8');
}

/**
 * The DER inside an extension's OCTET STRING, as `openssl asn1parse -strparse` prints it, or undefined when
 * the certificate has no such extension. OpenSSL 3.0's -text prints Subject Directory Attributes and
 * qcStatements only as raw bytes, so asn1parse decodes them.
 */
async function extensionAsn1(file: string, extensionName: RegExp): Promise<string | undefined> {
  const lines = (await openssl('asn1parse', '-in', file)).split('\n');
  const at = lines.findIndex((l) => extensionName.test(l));
  if (at < 0) return undefined;
  const octets = lines.slice(at + 1).find((l) => l.includes('OCTET STRING'));
  assert.ok(octets, 'extension value');
  const offset = octets.trim().split(':')[0]!;
  return openssl('asn1parse', '-in', file, '-strparse', offset, '-i');
}

const SDA = /:X509v3 Subject Directory Attributes\s*$/;
const QC_STATEMENTS = /:qcStatements\s*$/;

const FULL: IdentityClaims = {
  given_name: 'Erika',
  family_name: 'Mustermann',
  birthdate: '1964-08-12',
  place_of_birth: { country: 'DE', region: 'Berlin', locality: 'Berlin-Mitte' },
  nationalities: ['DE', 'FR'],
  address: { street_address: 'Heidestraße 17', locality: 'Köln', postal_code: '51147', country: 'DE' },
};

describe('mintSignerCertificate', () => {
  test('full claims: chain verifies, subject DN as in spec 2.16', async () => {
    const cert = await mint(FULL);
    const file = save(cert);
    const p = pkiPaths(dir);
    // -x509_strict on top: RFC 5280 profile checks (AKI present, valid encodings); smimesign: the purpose
    // OpenSSL applies to CMS signers, which accepts keyUsage nonRepudiation alone and no EKU
    const verified = await openssl(
      'verify',
      '-x509_strict',
      '-purpose',
      'smimesign',
      '-CAfile',
      p.rootCert,
      '-untrusted',
      p.issuingCert,
      file,
    );
    assert.match(verified, /: OK$/m);

    const subject = await subjectText(file);
    assert.match(subject, /countryName\s+= DE\n/);
    assert.match(subject, /streetAddress\s+= Heidestraße 17\n/);
    assert.match(subject, /postalCode\s+= 51147\n/);
    assert.match(subject, /givenName\s+= Erika\n/);
    assert.match(subject, /surname\s+= Mustermann\n/);
    assert.match(subject, /commonName\s+= Erika Mustermann\n/);
    assert.doesNotMatch(subject, /localityName|Köln|pseudonym/, 'address.locality has no OID in spec 2.16');
    assert.deepEqual(cert.providedClaims, [
      'given_name',
      'family_name',
      'birthdate',
      'place_of_birth',
      'nationalities',
      'address',
    ]);
  });

  test('full claims: extensions (key usage, basic constraints, AKI, SDA)', async () => {
    const text = await x509Text(save(await mint(FULL)));
    assert.match(text, /X509v3 Key Usage: critical\n\s+Non Repudiation\n/);
    assert.match(text, /X509v3 Basic Constraints: critical\n\s+CA:FALSE\n/);
    assert.match(text, /X509v3 Authority Key Identifier: \n/);
    assert.match(text, /X509v3 Subject Directory Attributes: \n/);
    assert.doesNotMatch(text, /X509v3 Subject Directory Attributes: critical/);
    assert.doesNotMatch(text, /Extended Key Usage/);
  });

  test('Subject Key Identifier (RFC 5280 4.2.1.2): SHA-1 of the public key as OpenSSL extracts it', async () => {
    const file = save(await mint(FULL));
    const text = await x509Text(file);
    const ski = /X509v3 Subject Key Identifier: \n\s+([0-9A-F:]+)\n/.exec(text)?.[1];
    assert.ok(ski, 'subjectKeyIdentifier present');
    assert.doesNotMatch(text, /X509v3 Subject Key Identifier: critical/);
    // method (1): SHA-1 of the subjectPublicKey BIT STRING's value; for EC that is the point 04||x||y
    const pem = await openssl('x509', '-in', file, '-noout', '-pubkey');
    const jwk = createPublicKey(pem).export({ format: 'jwk' });
    const point = Buffer.concat([Buffer.from([4]), Buffer.from(jwk.x!, 'base64url'), Buffer.from(jwk.y!, 'base64url')]);
    const expected = createHash('sha1').update(point).digest('hex').toUpperCase().match(/../g)!.join(':');
    assert.equal(ski, expected);
    // a CA-issued certificate's AKI is the issuing CA's SKI
    const caText = await openssl('x509', '-in', pkiPaths(dir).issuingCert, '-noout', '-ext', 'subjectKeyIdentifier');
    const caSki = /\n\s+([0-9A-F:]+)/.exec(caText)?.[1];
    assert.match(text, new RegExp(`X509v3 Authority Key Identifier: \\n\\s+(keyid:)?${caSki}\\n`));
  });

  test('software key (keyInQscd false): policy QCP-n, QC statements without QcSSCD', async () => {
    const file = save(await mint(FULL, undefined, { keyInQscd: false }));
    const text = await x509Text(file);
    assert.match(text, /X509v3 Certificate Policies: \n\s+Policy: 0\.4\.0\.194112\.1\.0\n/);
    assert.doesNotMatch(text, /0\.4\.0\.194112\.1\.2/);
    assert.deepEqual(await qcStatementOids(file), ['0.4.0.1862.1.1', '0.4.0.1862.1.6', '0.4.0.1862.1.6.1']);
  });

  test('key in a declared QSCD (keyInQscd true): policy QCP-n-qscd, QC statements with QcSSCD', async () => {
    const file = save(await mint(FULL, undefined, { keyInQscd: true }));
    const text = await x509Text(file);
    assert.match(text, /X509v3 Certificate Policies: \n\s+Policy: 0\.4\.0\.194112\.1\.2\n/);
    assert.doesNotMatch(text, /0\.4\.0\.194112\.1\.0\n/);
    assert.deepEqual(await qcStatementOids(file), [
      '0.4.0.1862.1.1',
      '0.4.0.1862.1.4',
      '0.4.0.1862.1.6',
      '0.4.0.1862.1.6.1',
    ]);
  });

  test('QcPDS (EN 319 412-5 4.3.4): one PdsLocation per configured language, IA5String URL, PrintableString language', async () => {
    const profile = signerProfile({
      defaultCountry: 'DE',
      pdsUrls: { en: 'https://qtsp.example/pds/en.pdf', de: 'https://qtsp.example/pds/de.pdf' },
    });
    const file = save(await mint(FULL, undefined, { profile, keyInQscd: true }));
    const qc = await extensionAsn1(file, QC_STATEMENTS);
    assert.ok(qc);
    assert.deepEqual(await qcStatementOids(file), [
      '0.4.0.1862.1.1',
      '0.4.0.1862.1.4',
      '0.4.0.1862.1.5',
      '0.4.0.1862.1.6',
      '0.4.0.1862.1.6.1',
    ]);
    const locations = [...qc.matchAll(/IA5STRING\s+:(\S+)\n.*PRINTABLESTRING\s+:(\S+)\n/g)].map((m) => [m[1], m[2]]);
    assert.deepEqual(locations, [
      ['https://qtsp.example/pds/en.pdf', 'en'],
      ['https://qtsp.example/pds/de.pdf', 'de'],
    ]);
    // without configured PDS locations there is no QcPDS statement (Table 2: optional)
    assert.ok(!(await qcStatementOids(save(await mint(FULL)))).includes('0.4.0.1862.1.5'));
  });

  test('full claims: Subject Directory Attributes dateOfBirth, placeOfBirth, one countryOfCitizenship each', async () => {
    const sda = await extensionAsn1(save(await mint(FULL)), SDA);
    assert.ok(sda);
    assert.match(sda, /OBJECT\s+:id-pda-dateOfBirth\n.*SET\s*\n.*GENERALIZEDTIME\s+:19640812120000Z\n/);
    assert.match(sda, /OBJECT\s+:id-pda-placeOfBirth\n.*SET\s*\n.*UTF8STRING\s+:Berlin-Mitte, Berlin, DE\n/);
    const citizenship = [
      ...sda.matchAll(/OBJECT\s+:id-pda-countryOfCitizenship\n.*SET\s*\n.*PRINTABLESTRING\s+:(\S+)\n/g),
    ];
    assert.deepEqual(
      citizenship.map((m) => m[1]),
      ['DE', 'FR'],
    );
  });

  test('validity: notBefore now - 60 s, notAfter now + validitySeconds', async () => {
    const now = new Date('2031-05-17T10:20:30.400Z');
    const dates = await openssl('x509', '-in', save(await mint(FULL, now)), '-noout', '-dates');
    const notBefore = /notBefore=(.*)/.exec(dates)?.[1];
    const notAfter = /notAfter=(.*)/.exec(dates)?.[1];
    assert.equal(new Date(notBefore!).toISOString(), '2031-05-17T10:19:30.000Z');
    assert.equal(new Date(notAfter!).toISOString(), '2031-05-17T10:30:30.000Z');
  });

  test('countryName always present: the address country, else the configured country of the identity scheme', async () => {
    assert.match(await subjectText(save(await mint({ given_name: 'Erika' }))), /countryName\s+= DE\n/, 'default DE');
    const austria = signerProfile({ defaultCountry: 'AT', pdsUrls: {} });
    assert.match(
      await subjectText(save(await mint({ given_name: 'Erika' }, undefined, { profile: austria }))),
      /countryName\s+= AT\n/,
    );
    const fromAddress = await subjectText(
      save(await mint({ given_name: 'Erika', address: { country: 'fr' } }, undefined, { profile: austria })),
    );
    assert.match(fromAddress, /countryName\s+= FR\n/, 'the claim wins over the setting');
    assert.equal([...fromAddress.matchAll(/countryName/g)].length, 1);
    const badClaim = await subjectText(
      save(await mint({ given_name: 'Erika', address: { country: 'Germany' } }, undefined, { profile: austria })),
    );
    assert.match(badClaim, /countryName\s+= AT\n/, 'a malformed address country falls back to the setting');
  });

  test('no names: pseudonym and commonName carry the same pseudonym, derived from the consent; no SDA', async () => {
    const a = await mint({});
    const file = save(a);
    const text = await x509Text(file);
    const subject = await subjectText(file);
    const pseudonym = /pseudonym\s+= ([0-9a-f]+)\n/.exec(subject)?.[1];
    assert.ok(pseudonym && pseudonym.length === 24);
    assert.equal(pseudonym, pseudonymOf(CONSENT));
    assert.match(subject, new RegExp(`commonName\\s+= ${pseudonym}\\n`), 'commonName is always present (NAT-4.2.4-1)');
    assert.match(subject, /countryName\s+= DE\n/);
    assert.doesNotMatch(subject, /givenName|surname|street|postalCode/);
    assert.equal(await extensionAsn1(file, SDA), undefined);
    assert.deepEqual(a.providedClaims, []);
    // the same consent gives the same pseudonym; another transaction (or another bank) another one
    const again = /pseudonym\s+= ([0-9a-f]+)\n/.exec(await subjectText(save(await mint({}))))?.[1];
    assert.equal(again, pseudonym);
    const otherCert = await mint({}, undefined, { consent: { ...CONSENT, txn: 'another-txn' } });
    const other = /pseudonym\s+= ([0-9a-f]+)\n/.exec(await subjectText(save(otherCert)))?.[1];
    assert.notEqual(other, pseudonym);
    assert.notEqual(pseudonymOf({ issuer: 'https://other-bank.test', txn: CONSENT.txn }), pseudonym);
    // the qualified-certificate parts do not depend on claims
    assert.match(text, /X509v3 Key Usage: critical\n\s+Non Repudiation\n/);
    assert.match(text, /X509v3 Subject Key Identifier: \n/);
    assert.ok(await extensionAsn1(file, QC_STATEMENTS));
  });

  test('partial claims: only what was provided goes in', async () => {
    const cert = await mint({ family_name: 'Mustermann', nationalities: ['AT'] });
    const file = save(cert);
    const subject = await subjectText(file);
    assert.match(subject, /countryName\s+= DE\n\s+surname\s+= Mustermann\n\s+commonName\s+= Mustermann\n/);
    assert.doesNotMatch(subject, /givenName|pseudonym|street|postalCode/);
    const sda = await extensionAsn1(file, SDA);
    assert.ok(sda);
    assert.doesNotMatch(sda, /dateOfBirth|placeOfBirth/);
    assert.match(sda, /PRINTABLESTRING\s+:AT\n/);
    assert.deepEqual(cert.providedClaims, ['family_name', 'nationalities'], 'the default country is no claim');
  });

  test('malformed claims are dropped, never encoded', async () => {
    const claims = {
      given_name: 'Eve\u0000',
      family_name: 42,
      birthdate: '1990-02-30',
      place_of_birth: { locality: 'Evil\u202Etxt.exe', region: '', country: ['DE'] },
      nationalities: ['GERMANY', 'XX', 'EU', 'DEU', 7, null, ' de ', 'de'],
      address: { street_address: '   ', postal_code: '1'.repeat(41), country: 'Germany' },
    } as unknown as IdentityClaims;
    const cert = await mint(claims);
    const file = save(cert);
    const subject = await subjectText(file);
    assert.doesNotMatch(subject, /givenName|surname|street|postalCode|Germany/);
    assert.match(subject, /countryName\s+= DE\n/, 'the configured country');
    assert.match(subject, /pseudonym\s+= [0-9a-f]{24}\n\s+commonName\s+= [0-9a-f]{24}\n/, 'no usable name: pseudonym');
    const sda = await extensionAsn1(file, SDA);
    assert.ok(sda, 'the one valid nationality remains');
    assert.doesNotMatch(sda, /dateOfBirth|placeOfBirth/);
    const citizenship = [...sda.matchAll(/PRINTABLESTRING\s+:(\S+)\n/g)].map((m) => m[1]);
    assert.deepEqual(citizenship, ['DE'], "' de ' and 'de' are DE once; GERMANY, XX, EU, DEU, 7, null dropped");
    assert.deepEqual(cert.providedClaims, ['nationalities']);
  });

  test('malformed values of otherwise good claims: birthdate forms, non-object claims', async () => {
    const now = new Date();
    const tomorrow = new Date(now.getTime() + 86_400_000).toISOString().slice(0, 10);
    for (const birthdate of [
      '0000-08-12',
      '1964',
      '1964-8-12',
      '12.08.1964',
      '1964-13-01',
      tomorrow,
      '1964-08-12T00:00:00Z',
    ]) {
      const cert = await mint({ given_name: 'Erika', birthdate });
      assert.deepEqual(cert.providedClaims, ['given_name'], birthdate);
    }
    const odd = await mint({
      given_name: 'Erika',
      place_of_birth: 'Berlin',
      address: 'Heidestraße 17',
      nationalities: 'DE',
    } as unknown as IdentityClaims);
    assert.deepEqual(odd.providedClaims, ['given_name']);
    assert.equal(await extensionAsn1(save(odd), SDA), undefined);
    // a leap day is a real date
    assert.deepEqual((await mint({ birthdate: '2000-02-29' })).providedClaims, ['birthdate']);
  });

  test('a 70-character name: commonName shortened to 64 characters (initials), givenName and surname whole', async () => {
    const given = 'Maximiliane Friederike Augusta';
    const family = 'von Hohenzollern-Sigmaringen-Veringen-H';
    assert.equal(`${given} ${family}`.length, 70);
    const cert = await mint({
      given_name: given,
      family_name: family,
      address: { street_address: 'c/o Muster GmbH\r\nHeidestraße 17\n', country: 'de' },
    });
    const subject = await subjectText(save(cert));
    assert.match(subject, /countryName\s+= DE\n/);
    assert.match(subject, /streetAddress\s+= c\/o Muster GmbH, Heidestraße 17\n/);
    assert.match(subject, new RegExp(`givenName\\s+= ${given}\\n\\s+surname\\s+= ${family}\\n`));
    const commonName = /commonName\s+= (.*)\n/.exec(subject)?.[1];
    assert.equal(commonName, `M. F. A. ${family}`);
    assert.ok([...commonName!].length <= 64);
    assert.deepEqual(cert.providedClaims, ['given_name', 'family_name', 'address']);
  });

  test('commonName shortening: exactly 64 kept, a longer surname cut at 64 on a character boundary', async () => {
    const sixtyFour = `${'A'.repeat(31)} ${'B'.repeat(32)}`;
    assert.equal(commonNameOf('A'.repeat(31), 'B'.repeat(32)), sixtyFour);
    const surname = 'Ö'.repeat(70);
    const cert = await mint({ family_name: surname });
    const commonName = /commonName\s+= (.*)\n/.exec(await subjectText(save(cert)))?.[1];
    assert.equal(commonName, 'Ö'.repeat(64));
    // combining sequences are not split: e + U+0301 counts two characters and stays whole (or goes whole)
    const decomposed = 'e\u0301'.repeat(40); // NFC turns it into é; the claim cleaner normalises first
    assert.equal(commonNameOf(undefined, decomposed.normalize('NFC')), 'é'.repeat(40));
    const cut = commonNameOf(undefined, `${'x'.repeat(63)}👩‍👩‍👧`);
    assert.equal(
      cut,
      'x'.repeat(63),
      'a family emoji (5 code points) does not fit in the last place and is left out whole',
    );
    // initials do not make it fit either: the full name is cut, keeping the given names whole
    assert.equal(commonNameOf('Erika Maria', 'X'.repeat(60)), `Erika Maria ${'X'.repeat(52)}`);
  });
});

describe('subjectDirectoryAttributesOf: the DER writer against the pkijs composition (the whole Extension)', () => {
  // what the extension was composed of before the DER writer took over (pkijs/asn1js, an encoder we did not write)
  function pkijsComposition(
    birth: string | undefined,
    place: string | undefined,
    nationalities: readonly string[],
  ): Buffer {
    const attributes: pkijs.Attribute[] = [];
    if (birth)
      attributes.push(
        new pkijs.Attribute({ type: OID.dateOfBirth, values: [new asn1js.GeneralizedTime({ value: birth })] }),
      );
    if (place)
      attributes.push(
        new pkijs.Attribute({ type: OID.placeOfBirth, values: [new asn1js.Utf8String({ value: place })] }),
      );
    for (const code of nationalities)
      attributes.push(
        new pkijs.Attribute({ type: OID.countryOfCitizenship, values: [new asn1js.PrintableString({ value: code })] }),
      );
    return Buffer.from(new pkijs.SubjectDirectoryAttributes({ attributes }).toSchema().toBER());
  }
  const now = new Date('2026-01-01T00:00:00Z');
  const cases: [IdentityClaims, string | undefined, string | undefined, string[]][] = [
    [
      { birthdate: '1964-08-12', place_of_birth: { locality: 'Köln', country: 'DE' }, nationalities: ['DE', 'fr'] },
      '19640812120000Z',
      'Köln, DE',
      ['DE', 'FR'],
    ],
    [{ birthdate: '0099-01-31' }, '00990131120000Z', undefined, []],
    [{ place_of_birth: { locality: 'Ζάκυνθος 😀'.repeat(3) } }, undefined, 'Ζάκυνθος 😀'.repeat(3), []],
    [{ nationalities: ['AT', 'AT', 'IT', 'DE', 'NL'] }, undefined, undefined, ['AT', 'IT', 'DE', 'NL']],
  ];
  for (const [claims, birth, place, nationalities] of cases) {
    test(`byte for byte: ${JSON.stringify(claims)}`, () => {
      const { extension } = subjectDirectoryAttributesOf(claims, now);
      assert.ok(extension);
      const expected = new pkijs.Extension({
        extnID: OID.subjectDirectoryAttributes,
        critical: false,
        extnValue: new Uint8Array(pkijsComposition(birth, place, nationalities)).buffer,
      });
      assert.equal(extension.toString('hex'), Buffer.from(expected.toSchema().toBER()).toString('hex'));
    });
  }
  test('no claim for it: no extension (SIZE 1..MAX)', () => {
    assert.equal(subjectDirectoryAttributesOf({ given_name: 'Erika' }, now).extension, undefined);
  });
});

describe('signerProfile: settings are checked', () => {
  test('defaultCountry must be an assigned ISO 3166-1 alpha-2 code in upper case', async () => {
    for (const bad of ['XX', 'de', 'DEU', 'EU', '']) {
      assert.throws(() => signerProfile({ defaultCountry: bad, pdsUrls: {} }), /signer\.defaultCountry/, bad);
    }
  });

  test('PDS URLs: https, ASCII, ISO 639-1 lower-case language, English required', async () => {
    const bad: Record<string, string>[] = [
      { en: 'http://qtsp.example/pds.pdf' },
      { en: 'https://qtsp.example/pds ü.pdf' },
      { EN: 'https://qtsp.example/pds.pdf' },
      { en: 'https://qtsp.example/en.pdf', xx: 'https://qtsp.example/xx.pdf' },
      { de: 'https://qtsp.example/de.pdf' },
    ];
    for (const pdsUrls of bad)
      assert.throws(() => signerProfile({ defaultCountry: 'DE', pdsUrls }), /signer\.pdsUrls/, JSON.stringify(pdsUrls));
    assert.deepEqual(
      signerProfile({ defaultCountry: 'DE', pdsUrls: { en: 'https://qtsp.example/en.pdf' } }).pdsLocations,
      [{ language: 'en', url: 'https://qtsp.example/en.pdf' }],
    );
  });

  test('configuration: QTSP_SIGNER_DEFAULT_COUNTRY and QTSP_SIGNER_PDS_URLS, bad values name the setting', async () => {
    const config = loadConfig(
      {},
      {
        QTSP_SIGNER_DEFAULT_COUNTRY: 'AT',
        QTSP_SIGNER_PDS_URLS: 'en=https://qtsp.example/en.pdf, de=https://qtsp.example/de.pdf',
      },
    );
    assert.equal(config.signer.defaultCountry, 'AT');
    assert.deepEqual(config.signer.pdsUrls, { en: 'https://qtsp.example/en.pdf', de: 'https://qtsp.example/de.pdf' });
    const defaults = loadConfig({}, {});
    assert.equal(defaults.signer.defaultCountry, 'DE');
    assert.deepEqual(defaults.signer.pdsUrls, {});
    assert.throws(
      () => loadConfig({}, { QTSP_SIGNER_DEFAULT_COUNTRY: 'Germany' }),
      /signer\.defaultCountry \(QTSP_SIGNER_DEFAULT_COUNTRY\)/,
    );
    assert.throws(() => loadConfig({}, { QTSP_SIGNER_PDS_URLS: 'en=http://qtsp.example/en.pdf' }), /signer\.pdsUrls/);
    assert.throws(
      () => loadConfig({}, { QTSP_SIGNER_PDS_URLS: 'de=https://qtsp.example/de.pdf' }),
      /QTSP_SIGNER_PDS_URLS.*English/,
    );
    assert.throws(() => loadConfig({}, { QTSP_SIGNER_PDS_URLS: 'english=https://qtsp.example/en.pdf' }), /ISO 639-1/);
  });
});

describe('subjectText (what the store records without parsing the certificate)', () => {
  test('equals the subject OpenSSL reads from the certificate, for names, addresses, escapes and pseudonyms', async () => {
    const cases: IdentityClaims[] = [
      { given_name: 'Erika', family_name: 'Mustermann' },
      {
        given_name: 'Jürgen, Jr.',
        family_name: 'Müller+Lüdenscheidt "Max" <x>;',
        // a leading number sign (\x23), escaped in a name (RFC 4514 2.4)
        address: { street_address: '\x231 Main St\nApt 2', postal_code: '10115', country: 'de' },
      },
      {
        given_name: 'Maximiliane Friederike Johanna Theresia Walburga',
        family_name: 'von und zu Hohenzollern-Sigmaringen-Lüdenscheidt',
      },
      { birthdate: '1964-08-12' },
      { family_name: '李', address: { country: 'AT' } },
    ];
    for (const claims of cases) {
      const cert = await mint(claims);
      assert.equal(
        cert.subjectText,
        new X509Certificate(cert.der).subject.split('\n').join(', '),
        JSON.stringify(claims),
      );
    }
  });
});
