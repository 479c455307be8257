/**
 * The per-request signer certificate (spec 2.16), checked with OpenSSL as the independent oracle: the chain
 * verifies, and subject, Subject Directory Attributes, QC statements, policies and key usage are as specified;
 * missing claims are omitted and malformed ones dropped.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadCaMaterial, pkiInit, pkiPaths, type CaMaterial } from '../../src/pki/init.ts';
import { generateKeyPair } from '../../src/pki/keys.ts';
import { mintSignerCertificate, type IdentityClaims, type SignerCertificate } from '../../src/pki/signer-certificate.ts';
import { toPem } from '../../src/util/base64.ts';

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

function mint(claims: IdentityClaims, now?: Date): SignerCertificate {
  const keys = generateKeyPair('P-256');
  return mintSignerCertificate({ claims, publicKey: keys.publicKey, issuingCa: ca.issuing, validitySeconds: 600, ...(now ? { now } : {}) });
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
    const cert = mint(FULL);
    const file = save(cert);
    const p = pkiPaths(dir);
    // -x509_strict on top: RFC 5280 profile checks (AKI present, valid encodings); smimesign: the purpose
    // OpenSSL applies to CMS signers, which accepts keyUsage nonRepudiation alone and no EKU
    const verified = await openssl('verify', '-x509_strict', '-purpose', 'smimesign', '-CAfile', p.rootCert, '-untrusted', p.issuingCert, file);
    assert.match(verified, /: OK$/m);

    const text = await x509Text(file);
    const subject = text.slice(text.indexOf('Subject:'), text.indexOf('Subject Public Key Info'));
    assert.match(subject, /countryName\s+= DE\n/);
    assert.match(subject, /streetAddress\s+= Heidestraße 17\n/);
    assert.match(subject, /postalCode\s+= 51147\n/);
    assert.match(subject, /givenName\s+= Erika\n/);
    assert.match(subject, /surname\s+= Mustermann\n/);
    assert.match(subject, /commonName\s+= Erika Mustermann\n/);
    assert.doesNotMatch(subject, /localityName|Köln|pseudonym/, 'address.locality has no OID in spec 2.16');
    assert.deepEqual(cert.providedClaims, ['given_name', 'family_name', 'birthdate', 'place_of_birth', 'nationalities', 'address']);
  });

  test('full claims: extensions (key usage, basic constraints, policy, AKI)', async () => {
    const text = await x509Text(save(mint(FULL)));
    assert.match(text, /X509v3 Key Usage: critical\n\s+Non Repudiation\n/);
    assert.match(text, /X509v3 Basic Constraints: critical\n\s+CA:FALSE\n/);
    assert.match(text, /X509v3 Certificate Policies: \n\s+Policy: 0\.4\.0\.194112\.1\.2\n/);
    assert.match(text, /X509v3 Authority Key Identifier: \n/);
    assert.match(text, /X509v3 Subject Directory Attributes: \n/);
    assert.doesNotMatch(text, /X509v3 Subject Directory Attributes: critical/);
    assert.doesNotMatch(text, /Extended Key Usage/);
  });

  test('full claims: QC statements QcCompliance, QcSSCD, QcType esign', async () => {
    const qc = await extensionAsn1(save(mint(FULL)), QC_STATEMENTS);
    assert.ok(qc);
    const oids = [...qc.matchAll(/OBJECT\s+:(\S+)/g)].map((m) => m[1]);
    assert.deepEqual(oids, ['0.4.0.1862.1.1', '0.4.0.1862.1.4', '0.4.0.1862.1.6', '0.4.0.1862.1.6.1']);
  });

  test('full claims: Subject Directory Attributes dateOfBirth, placeOfBirth, one countryOfCitizenship each', async () => {
    const sda = await extensionAsn1(save(mint(FULL)), SDA);
    assert.ok(sda);
    assert.match(sda, /OBJECT\s+:id-pda-dateOfBirth\n.*SET\s*\n.*GENERALIZEDTIME\s+:19640812120000Z\n/);
    assert.match(sda, /OBJECT\s+:id-pda-placeOfBirth\n.*SET\s*\n.*UTF8STRING\s+:Berlin-Mitte, Berlin, DE\n/);
    const citizenship = [...sda.matchAll(/OBJECT\s+:id-pda-countryOfCitizenship\n.*SET\s*\n.*PRINTABLESTRING\s+:(\S+)\n/g)];
    assert.deepEqual(citizenship.map((m) => m[1]), ['DE', 'FR']);
  });

  test('validity: notBefore now - 60 s, notAfter now + validitySeconds', async () => {
    const now = new Date('2031-05-17T10:20:30.400Z');
    const dates = await openssl('x509', '-in', save(mint(FULL, now)), '-noout', '-dates');
    const notBefore = /notBefore=(.*)/.exec(dates)?.[1];
    const notAfter = /notAfter=(.*)/.exec(dates)?.[1];
    assert.equal(new Date(notBefore!).toISOString(), '2031-05-17T10:19:30.000Z');
    assert.equal(new Date(notAfter!).toISOString(), '2031-05-17T10:30:30.000Z');
  });

  test('no claims: subject is a random pseudonym, no Subject Directory Attributes', async () => {
    const a = mint({});
    const b = mint({});
    const file = save(a);
    const text = await x509Text(file);
    const subject = text.slice(text.indexOf('Subject:'), text.indexOf('Subject Public Key Info'));
    const pseudonym = /pseudonym\s+= ([0-9a-f]+)\n/.exec(subject)?.[1];
    assert.ok(pseudonym && pseudonym.length === 24);
    assert.doesNotMatch(subject, /givenName|surname|commonName|countryName|street|postalCode/);
    assert.equal(await extensionAsn1(file, SDA), undefined);
    assert.deepEqual(a.providedClaims, []);
    const other = /pseudonym\s+= ([0-9a-f]+)\n/.exec(await x509Text(save(b)))?.[1];
    assert.notEqual(pseudonym, other, 'random per certificate');
    // the qualified-certificate parts do not depend on claims
    assert.match(text, /X509v3 Key Usage: critical\n\s+Non Repudiation\n/);
    assert.ok(await extensionAsn1(file, QC_STATEMENTS));
  });

  test('partial claims: only what was provided goes in', async () => {
    const cert = mint({ family_name: 'Mustermann', nationalities: ['AT'] });
    const file = save(cert);
    const text = await x509Text(file);
    const subject = text.slice(text.indexOf('Subject:'), text.indexOf('Subject Public Key Info'));
    assert.match(subject, /surname\s+= Mustermann\n\s+commonName\s+= Mustermann\n/);
    assert.doesNotMatch(subject, /givenName|pseudonym|countryName|street|postalCode/);
    const sda = await extensionAsn1(file, SDA);
    assert.ok(sda);
    assert.doesNotMatch(sda, /dateOfBirth|placeOfBirth/);
    assert.match(sda, /PRINTABLESTRING\s+:AT\n/);
    assert.deepEqual(cert.providedClaims, ['family_name', 'nationalities']);
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
    const cert = mint(claims);
    const file = save(cert);
    const text = await x509Text(file);
    const subject = text.slice(text.indexOf('Subject:'), text.indexOf('Subject Public Key Info'));
    assert.doesNotMatch(subject, /givenName|surname|commonName|countryName|street|postalCode/);
    assert.match(subject, /pseudonym\s+= [0-9a-f]{24}\n/, 'no usable name: pseudonym');
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
    for (const birthdate of ['0000-08-12', '1964', '1964-8-12', '12.08.1964', '1964-13-01', tomorrow, '1964-08-12T00:00:00Z']) {
      const cert = mint({ given_name: 'Erika', birthdate });
      assert.deepEqual(cert.providedClaims, ['given_name'], birthdate);
    }
    const odd = mint({ given_name: 'Erika', place_of_birth: 'Berlin', address: 'Heidestraße 17', nationalities: 'DE' } as unknown as IdentityClaims);
    assert.deepEqual(odd.providedClaims, ['given_name']);
    assert.equal(await extensionAsn1(save(odd), SDA), undefined);
    // a leap day is a real date
    assert.deepEqual(mint({ birthdate: '2000-02-29' }).providedClaims, ['birthdate']);
  });

  test('multi-line street address becomes one line; over-long common name is left out', async () => {
    const given = 'Maximiliane Friederike Augusta';
    const family = 'von Hohenzollern-Sigmaringen-Veringen';
    const cert = mint({ given_name: given, family_name: family, address: { street_address: 'c/o Muster GmbH\r\nHeidestraße 17\n', country: 'de' } });
    const text = await x509Text(save(cert));
    const subject = text.slice(text.indexOf('Subject:'), text.indexOf('Subject Public Key Info'));
    assert.match(subject, /countryName\s+= DE\n/);
    assert.match(subject, /streetAddress\s+= c\/o Muster GmbH, Heidestraße 17\n/);
    assert.match(subject, new RegExp(`givenName\\s+= ${given}\\n\\s+surname\\s+= ${family}\\n`));
    assert.doesNotMatch(subject, /commonName/, `"${given} ${family}" exceeds ub-common-name (64)`);
    assert.deepEqual(cert.providedClaims, ['given_name', 'family_name', 'address']);
  });
});
