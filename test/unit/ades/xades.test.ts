/**
 * XAdES baseline B-B and B-T (EN 319 132-1) built by src/ades/xades.ts, checked by tools we did not write:
 * xmlsec1 (XML-DSig core validation and the certificate chain, see test/helpers/xmlsec.ts) over every offered
 * hash and signer key type, and `openssl ts -verify` for the B-T signature time-stamp. The time-stamps here
 * come from an OpenSSL TSA (`openssl ts -reply`) so B-T is tested apart from our own TSA.
 */
import { after, before, describe, test } from 'node:test';
import { SoftwareSigningKey } from '../../../src/crypto/signature.ts';
import assert from 'node:assert/strict';
import { generateKeyPairSync, verify as nodeVerify, constants, createPublicKey, type KeyObject } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as asn1js from 'asn1js';
import { DOMParser } from '@xmldom/xmldom';
import * as XmlDSig from 'xmldsigjs';
import { HASH_ALGORITHMS, digest, hashByName, type HashAlgorithm } from '../../../src/crypto/algorithms.ts';
import type { SignatureInput } from '../../../src/ades/types.ts';
import { buildXadesBaselineB, buildXadesBaselineT, documentUri, xadesSupportsHash } from '../../../src/ades/xades.ts';
import { loadCaMaterial, pkiPaths, type CaMaterial } from '../../../src/ca/material.ts';
import { pkiInit } from '../../../src/ca/init.ts';
import type { TimestampProvider } from '../../../src/timestamping/provider.ts';
import { mintSignerCertificate, signerProfile } from '../../../src/ca/signer-certificate.ts';
import { toPem } from '../../../src/util/base64.ts';
import { opensslNewKey, opensslOk, run } from '../../helpers/openssl.ts';
import { xmlsecVerify } from '../../helpers/xmlsec.ts';

const DS = 'http://www.w3.org/2000/09/xmldsig#';
const XADES = 'http://uri.etsi.org/01903/v1.3.2#';
const DOCUMENT = Buffer.from('%PDF-1.7\nbytes with \r\n and \n line ends and \x00\xff binary\n', 'latin1');
const SHA2 = ['SHA-256', 'SHA-384', 'SHA-512'].map((n) => hashByName(n)!);

let dir: string;
let ca: CaMaterial;
let rootPem: string;
let issuingPem: string;
const keys = new Map<string, KeyObject>();

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'qtsp-xades-'));
  pkiInit({ dataDir: dir, qtspId: 'sp:test.example:00000000-0000-4000-8000-000000000000' });
  ca = loadCaMaterial(dir);
  rootPem = pkiPaths(dir).rootCert;
  issuingPem = join(dir, 'issuing.pem');
  writeFileSync(issuingPem, toPem(ca.issuing.der, 'CERTIFICATE'));
  keys.set('P-256', generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey);
  keys.set('P-384', generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey);
  keys.set('RSA-3072', generateKeyPairSync('rsa', { modulusLength: 3072 }).privateKey);
  keys.set('RSASSA-PSS-3072', generateKeyPairSync('rsa-pss', { modulusLength: 3072 }).privateKey);
});

after(() => rmSync(dir, { recursive: true, force: true }));

async function input(
  keyName: string,
  hashAlgorithm: HashAlgorithm,
  extra: Partial<SignatureInput> = {},
): Promise<SignatureInput & { privateKey: KeyObject }> {
  const privateKey = keys.get(keyName)!;
  const signerCertificate = await mintSignerCertificate({
    claims: { given_name: 'Erika', family_name: 'Mustermann' },
    publicKey: createPublicKey(privateKey),
    issuingCa: ca.issuing,
    validitySeconds: 600,
    profile: signerProfile({ defaultCountry: 'DE', pdsUrls: {} }),
    keyInQscd: false,
    consent: { issuer: 'https://as.test', txn: 'test-txn' },
  });
  return {
    hash: digest(hashAlgorithm, DOCUMENT),
    hashAlgorithm,
    signerCertificate,
    chain: [ca.issuing.der],
    key: new SoftwareSigningKey(privateKey),
    privateKey,
    signingTime: new Date(),
    services: {},
    ...extra,
  };
}

function parse(xml: Buffer): Document {
  return new DOMParser().parseFromString(xml.toString('utf8'), 'application/xml') as unknown as Document;
}

function elements(doc: Document | Element, ns: string, name: string): Element[] {
  return Array.from(doc.getElementsByTagNameNS(ns, name));
}

function one(doc: Document | Element, ns: string, name: string): Element {
  const found = elements(doc, ns, name);
  assert.equal(found.length, 1, `exactly one ${name}`);
  return found[0]!;
}

async function verify(xml: Buffer, document = DOCUMENT) {
  return xmlsecVerify(xml, document, { trustedPem: rootPem, untrustedPem: issuingPem });
}

function assertVerified(result: { ok: boolean; output: string }): void {
  assert.ok(result.ok, result.output);
  assert.match(result.output, /^OK$/m);
  assert.match(result.output, /SignedInfo References \(ok\/all\): 2\/2/);
}

describe('buildXadesBaselineB: xmlsec1 verifies every offered hash x signer key', () => {
  for (const hashAlgorithm of SHA2) {
    for (const keyName of ['P-256', 'P-384', 'RSA-3072']) {
      test(`${hashAlgorithm.name} with ${keyName}`, async () => {
        const { signature } = await buildXadesBaselineB(await input(keyName, hashAlgorithm));
        assertVerified(await verify(signature));
      });
    }
  }
});

describe('buildXadesBaselineB: structure (EN 319 132-1 B-B)', () => {
  test('a detached reference carrying the digest we were sent, and the SignedProperties reference', async () => {
    const sha384 = hashByName('SHA-384')!;
    const i = await input('P-384', sha384);
    const { signature } = await buildXadesBaselineB(i);
    assert.match(signature.toString('utf8'), /^<\?xml version="1\.0" encoding="UTF-8"\?>\n<ds:Signature /);
    const doc = parse(signature);
    const signedInfo = one(doc, DS, 'SignedInfo');
    assert.equal(
      one(signedInfo, DS, 'CanonicalizationMethod').getAttribute('Algorithm'),
      'http://www.w3.org/2001/10/xml-exc-c14n#',
    );
    assert.equal(
      one(signedInfo, DS, 'SignatureMethod').getAttribute('Algorithm'),
      'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384',
    );
    const [document, properties] = elements(signedInfo, DS, 'Reference');
    assert.equal(elements(signedInfo, DS, 'Reference').length, 2);
    assert.equal(document!.getAttribute('URI'), documentUri(i.hash, sha384));
    assert.equal(document!.getAttribute('URI'), `ni:///sha-384;${i.hash.toString('base64url')}`);
    assert.equal(document!.hasAttribute('Type'), false);
    assert.equal(
      elements(document!, DS, 'Transform').length,
      0,
      'the document reference has no transforms: its digest is of the bytes',
    );
    assert.equal(
      one(document!, DS, 'DigestMethod').getAttribute('Algorithm'),
      'http://www.w3.org/2001/04/xmldsig-more#sha384',
    );
    assert.equal(one(document!, DS, 'DigestValue').textContent, i.hash.toString('base64'));

    const signedProperties = one(doc, XADES, 'SignedProperties');
    assert.equal(properties!.getAttribute('Type'), 'http://uri.etsi.org/01903#SignedProperties');
    assert.equal(properties!.getAttribute('URI'), `#${signedProperties.getAttribute('Id')}`);
    assert.equal(
      one(properties!, DS, 'Transform').getAttribute('Algorithm'),
      'http://www.w3.org/2001/10/xml-exc-c14n#',
    );
    assert.equal(
      one(doc, XADES, 'QualifyingProperties').getAttribute('Target'),
      `#${one(doc, DS, 'Signature').getAttribute('Id')}`,
    );
  });

  test('SigningTime, SigningCertificateV2 with IssuerSerialV2, DataObjectFormat', async () => {
    const sha256 = hashByName('SHA-256')!;
    const i = await input('P-256', sha256, { signingTime: new Date('2031-05-17T10:20:30.999Z') });
    const doc = parse((await buildXadesBaselineB(i)).signature);
    assert.equal(one(doc, XADES, 'SigningTime').textContent, '2031-05-17T10:20:30Z');

    const cert = one(one(doc, XADES, 'SigningCertificateV2'), XADES, 'Cert');
    assert.equal(one(cert, DS, 'DigestMethod').getAttribute('Algorithm'), 'http://www.w3.org/2001/04/xmlenc#sha256');
    assert.equal(one(cert, DS, 'DigestValue').textContent, digest(sha256, i.signerCertificate.der).toString('base64'));
    // RFC 5035 IssuerSerial: SEQUENCE { GeneralNames { [4] Name }, serialNumber }, compared with OpenSSL's view
    const issuerSerial = asn1js.fromBER(
      new Uint8Array(Buffer.from(one(cert, XADES, 'IssuerSerialV2').textContent!, 'base64')),
    );
    assert.notEqual(issuerSerial.offset, -1);
    const [generalNames, serial] = (issuerSerial.result as asn1js.Sequence).valueBlock.value;
    const directoryName = (generalNames as asn1js.Sequence).valueBlock.value[0]!;
    assert.equal(directoryName.idBlock.tagClass, 3);
    assert.equal(directoryName.idBlock.tagNumber, 4);
    const issuerDer = Buffer.from((directoryName as asn1js.Constructed).valueBlock.value[0]!.valueBeforeDecodeView);
    assert.deepEqual(issuerDer, Buffer.from(i.signerCertificate.certificate.issuer.toSchema().toBER()));
    assert.deepEqual(issuerDer, Buffer.from(ca.issuing.certificate.subject.toSchema().toBER()));
    assert.ok((serial as asn1js.Integer).isEqual(i.signerCertificate.certificate.serialNumber));

    const format = one(doc, XADES, 'DataObjectFormat');
    const documentReference = elements(one(doc, DS, 'SignedInfo'), DS, 'Reference')[0]!;
    assert.equal(format.getAttribute('ObjectReference'), `#${documentReference.getAttribute('Id')}`);
    assert.equal(one(format, XADES, 'MimeType').textContent, 'application/octet-stream');
    assert.equal(elements(doc, XADES, 'UnsignedProperties').length, 0, 'B-B has no unsigned properties');
  });

  test('KeyInfo: one X509Data with the signer certificate, then the issuing CA', async () => {
    const i = await input('P-256', SHA2[0]!);
    const doc = parse((await buildXadesBaselineB(i)).signature);
    const certificates = elements(one(one(doc, DS, 'KeyInfo'), DS, 'X509Data'), DS, 'X509Certificate').map((e) =>
      Buffer.from(e.textContent!, 'base64'),
    );
    assert.deepEqual(certificates, [i.signerCertificate.der, ca.issuing.der]);
  });
});

describe('xmlsec1 rejects what it must', () => {
  let good: Buffer;
  before(async () => {
    good = (await buildXadesBaselineB(await input('P-256', SHA2[0]!))).signature;
    assertVerified(await verify(good));
  });

  test('another document', async () => {
    const other = Buffer.from(DOCUMENT);
    other[0] ^= 1;
    const result = await verify(good, other);
    assert.equal(result.ok, false, result.output);
  });

  test('a changed signature value', async () => {
    const xml = good.toString('utf8');
    const at = xml.indexOf('<ds:SignatureValue>') + '<ds:SignatureValue>'.length + 4;
    const tampered = Buffer.from(xml.slice(0, at) + (xml[at] === 'A' ? 'B' : 'A') + xml.slice(at + 1));
    const result = await verify(tampered);
    assert.equal(result.ok, false, result.output);
  });

  test('a changed signed property (SigningTime)', async () => {
    const tampered = Buffer.from(
      good
        .toString('utf8')
        .replace(/<xades:SigningTime>(\d{4})/, (_m, y: string) => `<xades:SigningTime>${Number(y) - 1}`),
    );
    assert.notDeepEqual(tampered, good);
    const result = await verify(tampered);
    assert.equal(result.ok, false, result.output);
    assert.match(result.output, /SignedInfo References \(ok\/all\): 1\/2/);
  });

  test('a changed document digest in SignedInfo', async () => {
    const xml = good.toString('utf8');
    const digestValue = /<ds:DigestValue>([^<]+)<\/ds:DigestValue>/.exec(xml)![1]!;
    const other = digest(SHA2[0]!, Buffer.from('other')).toString('base64');
    const result = await xmlsecVerify(Buffer.from(xml.replace(digestValue, other)), Buffer.from('other'), {
      trustedPem: rootPem,
    });
    assert.equal(result.ok, false, result.output);
  });

  test('a trust anchor that is not our root', async () => {
    const foreign = join(dir, 'foreign-root.pem');
    const made = await opensslNewKey({
      keyFile: join(dir, 'foreign.key'),
      out: foreign,
      subject: '/CN=foreign root',
      days: 1,
    });
    assert.ok(made.ok, made.output);
    const result = await xmlsecVerify(good, DOCUMENT, { trustedPem: foreign });
    assert.equal(result.ok, false, result.output);
  });
});

describe('what XAdES is not offered with', () => {
  test('SHA-3 hashes: xmlsec1 1.2 and WebCrypto know no SHA-3 URIs', async () => {
    for (const hashAlgorithm of HASH_ALGORITHMS.values()) {
      assert.equal(xadesSupportsHash(hashAlgorithm), !hashAlgorithm.name.startsWith('SHA3'), hashAlgorithm.name);
    }
    await assert.rejects(
      buildXadesBaselineB(await input('P-256', hashByName('SHA3-256')!)),
      /not offered with SHA3-256; offered: SHA-256, SHA-384, SHA-512/,
    );
  });

  test('a hash of the wrong length', async () => {
    await assert.rejects(
      buildXadesBaselineB({ ...(await input('P-256', SHA2[0]!)), hash: Buffer.alloc(20) }),
      /20 bytes, SHA-256 has 32/,
    );
  });
});

describe('RSASSA-PSS signer keys (RFC 6931 sha*-rsa-MGF1)', () => {
  // xmlsec1 1.2 knows neither these SignatureMethod URIs nor id-RSASSA-PSS keys, so OpenSSL checks the PSS
  // signature over SignedInfo as xmldsigjs canonicalises it, the C14N that xmlsec1 accepts for the other keys.
  for (const hashAlgorithm of SHA2) {
    test(`${hashAlgorithm.name}`, async () => {
      const i = await input('RSASSA-PSS-3072', hashAlgorithm);
      const xml = (await buildXadesBaselineB(i)).signature;
      const doc = parse(xml);
      const bits = hashAlgorithm.node.slice(3);
      assert.equal(
        one(doc, DS, 'SignatureMethod').getAttribute('Algorithm'),
        `http://www.w3.org/2007/05/xmldsig-more#sha${bits}-rsa-MGF1`,
      );
      const c14n = new XmlDSig.XmlDsigExcC14NTransform();
      c14n.LoadInnerXml(one(doc, DS, 'SignedInfo'));
      const canonical = c14n.GetOutput(); // once: the transform keeps state between GetOutput calls
      const signedInfoFile = join(dir, `signed-info-${bits}.xml`);
      const signatureFile = join(dir, `signature-${bits}.bin`);
      const publicKeyFile = join(dir, `pss-${bits}.pem`);
      writeFileSync(signedInfoFile, canonical);
      writeFileSync(signatureFile, Buffer.from(one(doc, DS, 'SignatureValue').textContent!, 'base64'));
      writeFileSync(publicKeyFile, createPublicKey(i.privateKey).export({ type: 'spki', format: 'pem' }));
      const verifyPss = () =>
        run('openssl', [
          'dgst',
          `-${hashAlgorithm.node}`,
          '-sigopt',
          'rsa_padding_mode:pss',
          '-sigopt',
          `rsa_pss_saltlen:${hashAlgorithm.length}`,
          '-sigopt',
          `rsa_mgf1_md:${hashAlgorithm.node}`,
          '-verify',
          publicKeyFile,
          '-signature',
          signatureFile,
          signedInfoFile,
        ]);
      const ok = await verifyPss();
      assert.ok(ok.ok, ok.output);
      assert.match(ok.output, /Verified OK/);
      writeFileSync(signedInfoFile, canonical.replace('exc-c14n', 'exc-c14N'));
      const bad = await verifyPss();
      assert.equal(bad.ok, false, bad.output);
      // and node agrees (PKCS#1 v1.5 would not)
      const data = Buffer.from(canonical, 'utf8');
      const value = Buffer.from(one(doc, DS, 'SignatureValue').textContent!, 'base64');
      assert.ok(
        nodeVerify(
          hashAlgorithm.node,
          data,
          {
            key: createPublicKey(i.privateKey),
            padding: constants.RSA_PKCS1_PSS_PADDING,
            saltLength: hashAlgorithm.length,
          },
          value,
        ),
      );
    });
  }
});

// ---------------------------------------------------------------------------------------------------------
// B-T with an OpenSSL TSA

let tsaDir: string;

/** A TimestampProvider that asks `openssl ts -reply`: a TSA we did not write. */
const opensslTsa: TimestampProvider & { calls: number } = {
  chain: [],
  calls: 0,
  async timestamp(messageImprint, hashAlgorithm) {
    this.calls++;
    const query = join(tsaDir, 'q.tsq');
    const token = join(tsaDir, 't.tst');
    await opensslOk([
      'ts',
      '-query',
      '-digest',
      Buffer.from(messageImprint).toString('hex'),
      `-${hashAlgorithm.node}`,
      '-cert',
      '-out',
      query,
    ]);
    await opensslOk([
      'ts',
      '-reply',
      '-config',
      join(tsaDir, 'tsa.cnf'),
      '-queryfile',
      query,
      '-signer',
      join(tsaDir, 'tsa.pem'),
      '-inkey',
      join(tsaDir, 'tsa.key'),
      '-token_out',
      '-out',
      token,
    ]);
    return readFileSync(token);
  },
};

const tsaConfig = (tsaDir: string) => `
[ tsa ]
default_tsa = tsa_config
[ tsa_config ]
serial = ${tsaDir}/serial
crypto_device = builtin
signer_digest = sha256
default_policy = 1.2.3.4.1
other_policies = 1.2.3.4.2
certs = ${tsaDir}/tsa.pem
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = no
tsa_name = no
ess_cert_id_chain = no
ess_cert_id_alg = sha256
[ v3_tsa ]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature
extendedKeyUsage = critical, timeStamping
`;

/** The signature value element, exclusive-canonicalised by hand (no attributes, one namespace): the imprint input. */
function canonicalSignatureValue(xml: Buffer): Buffer {
  const value = /<ds:SignatureValue>([^<]*)<\/ds:SignatureValue>/.exec(xml.toString('utf8'))![1]!;
  return Buffer.from(`<ds:SignatureValue xmlns:ds="${DS}">${value}</ds:SignatureValue>`, 'utf8');
}

describe('buildXadesBaselineT: signature time-stamp over the canonicalised ds:SignatureValue', () => {
  before(async () => {
    tsaDir = join(dir, 'tsa');
    mkdirSync(tsaDir);
    writeFileSync(join(tsaDir, 'tsa.cnf'), tsaConfig(tsaDir));
    writeFileSync(join(tsaDir, 'serial'), '01\n');
    const root = await opensslNewKey({
      keyFile: join(tsaDir, 'root.key'),
      out: join(tsaDir, 'root.pem'),
      subject: '/CN=OpenSSL TSA root',
      days: 1,
    });
    assert.ok(root.ok, root.output);
    const request = await opensslNewKey({
      keyFile: join(tsaDir, 'tsa.key'),
      out: join(tsaDir, 'tsa.csr'),
      subject: '/CN=OpenSSL TSA',
    });
    assert.ok(request.ok, request.output);
    await opensslOk([
      'x509',
      '-req',
      '-in',
      join(tsaDir, 'tsa.csr'),
      '-CA',
      join(tsaDir, 'root.pem'),
      '-CAkey',
      join(tsaDir, 'root.key'),
      '-set_serial',
      '2',
      '-days',
      '1',
      '-extfile',
      join(tsaDir, 'tsa.cnf'),
      '-extensions',
      'v3_tsa',
      '-out',
      join(tsaDir, 'tsa.pem'),
    ]);
  });

  for (const hashAlgorithm of SHA2) {
    test(`${hashAlgorithm.name}: xmlsec1 verifies the signature, openssl ts -verify the time-stamp`, async () => {
      const before = opensslTsa.calls;
      const xml = (
        await buildXadesBaselineT(await input('P-256', hashAlgorithm, { services: { timestamps: opensslTsa } }))
      ).signature;
      assert.equal(opensslTsa.calls, before + 1);
      assertVerified(await verify(xml));

      const doc = parse(xml);
      const unsigned = one(one(doc, XADES, 'UnsignedProperties'), XADES, 'UnsignedSignatureProperties');
      const timeStamp = one(unsigned, XADES, 'SignatureTimeStamp');
      assert.equal(
        one(timeStamp, DS, 'CanonicalizationMethod').getAttribute('Algorithm'),
        'http://www.w3.org/2001/10/xml-exc-c14n#',
      );
      const tokenFile = join(tsaDir, `token-${hashAlgorithm.node}.tst`);
      writeFileSync(tokenFile, Buffer.from(one(timeStamp, XADES, 'EncapsulatedTimeStamp').textContent!, 'base64'));
      const dataFile = join(tsaDir, `signature-value-${hashAlgorithm.node}.xml`);
      writeFileSync(dataFile, canonicalSignatureValue(xml));
      const tsVerify = [
        'ts',
        '-verify',
        '-in',
        tokenFile,
        '-token_in',
        '-CAfile',
        join(tsaDir, 'root.pem'),
        '-untrusted',
        join(tsaDir, 'tsa.pem'),
      ];
      const ok = await run('openssl', [...tsVerify, '-data', dataFile]);
      assert.ok(ok.ok, ok.output);
      assert.match(ok.output, /Verification: OK/);
      const printed = await run('openssl', ['ts', '-reply', '-in', tokenFile, '-token_in', '-text']);
      assert.match(printed.output, new RegExp(`Hash Algorithm: ${hashAlgorithm.node}`));

      writeFileSync(dataFile, canonicalSignatureValue(xml).subarray(1));
      const bad = await run('openssl', [...tsVerify, '-data', dataFile]);
      assert.equal(bad.ok, false, bad.output);
    });
  }

  test('no TimestampProvider configured: a clear error, no signature', async () => {
    await assert.rejects(
      buildXadesBaselineT(await input('P-256', SHA2[0]!)),
      /XAdES-B-T needs a time-stamping authority/,
    );
  });
});
