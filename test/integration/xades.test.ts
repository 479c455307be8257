/**
 * XAdES (signature_format X) through the real signDoc flow: sandbox bank AS, PAR, authorization, token, then
 * signDoc over mutual TLS with document digests only. Every signature is checked with xmlsec1 against the
 * document it was made for (test/helpers/xmlsec.ts: the detached reference names the document by its digest,
 * --url-map hands xmlsec1 the bytes), trusting only our root CA; the signer certificate chain is checked by
 * xmlsec1 and again by `openssl verify`. B-T time-stamps (our in-process TSA) are checked with `openssl ts
 * -verify` over the canonicalised ds:SignatureValue; signer keys other than P-256 are asked for with signAlgo.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as asn1js from 'asn1js';
import { hashByName, type HashAlgorithm } from '../../src/crypto/algorithms.ts';
import { rsaPssParams } from '../../src/crypto/signature.ts';
import { pkiPaths } from '../../src/ca/material.ts';
import { toPem } from '../../src/util/base64.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { run } from '../helpers/openssl.ts';
import { externalReferenceUris, xmlsecVerify } from '../helpers/xmlsec.ts';
import { signaturesOf, signThroughSandbox } from '../helpers/signing.ts';

let env: TestEnvironment;
let dir: string;
const DOCS = [
  Buffer.from('<invoice>first document</invoice>\n'),
  Buffer.from('second document, with ünïcödé\r\n\x00\xff', 'latin1'),
];
const SHA2 = ['SHA-256', 'SHA-384', 'SHA-512'].map((n) => hashByName(n)!);

before(async () => {
  env = await startEnvironment();
  dir = mkdtempSync(join(tmpdir(), 'qtsp-xades-it-'));
});
after(async () => {
  await env?.close();
  rmSync(dir, { recursive: true, force: true });
});

const hashOf = (alg: HashAlgorithm, doc: Uint8Array) => createHash(alg.node).update(doc).digest('base64');

async function certificatesIssued(): Promise<number> {
  return (await env.qtsp.deps.metrics.certificates.get()).values[0]?.value ?? 0;
}

/** PAR -> authorize -> token for these documents, then signDoc with signature_format X. */
function signX(alg: HashAlgorithm, docs: readonly Buffer[], extra: Record<string, unknown> = {}) {
  return signThroughSandbox(
    env,
    docs.map((d) => hashOf(alg, d)),
    { hashAlgorithmOID: alg.oid, fields: { signature_format: 'X', ...extra } },
  );
}

const signatures = signaturesOf;

const verify = (xml: Buffer, doc: Buffer) =>
  xmlsecVerify(xml, doc, { trustedPem: env.rootCaFile, untrustedPem: pkiPaths(env.dataDir).issuingCert });

function assertVerified(result: { ok: boolean; output: string }): void {
  assert.ok(result.ok, result.output);
  assert.match(result.output, /^OK$/m);
  assert.match(result.output, /SignedInfo References \(ok\/all\): 2\/2/);
}

describe('signDoc signs XAdES-B-B (signature_format X) that xmlsec1 verifies', () => {
  for (const alg of SHA2) {
    it(`${alg.name}: one signature per hash, each over its own document only`, async () => {
      const sigs = signatures(await signX(alg, DOCS));
      assert.equal(sigs.length, 2);
      for (const [i, xml] of sigs.entries()) {
        const text = xml.toString('utf8');
        assert.match(text, /^<\?xml version="1\.0" encoding="UTF-8"\?>\n<ds:Signature /);
        // the detached reference carries the digest we sent, and names the document by it
        const uri = externalReferenceUris(text);
        assert.deepEqual(uri, [
          `ni:///${alg.name.toLowerCase()};${Buffer.from(hashOf(alg, DOCS[i]!), 'base64').toString('base64url')}`,
        ]);
        assert.ok(text.includes(`<ds:DigestValue>${hashOf(alg, DOCS[i]!)}</ds:DigestValue>`));
        assertVerified(await verify(xml, DOCS[i]!));
        const swapped = await verify(xml, DOCS[1 - i]!);
        assert.equal(swapped.ok, false, `xmlsec1 accepted a signature over the other document: ${swapped.output}`);
      }
    });
  }

  it('openssl verifies the signer certificate from KeyInfo up to our root', async () => {
    const [xml] = signatures(await signX(SHA2[0]!, [DOCS[0]!]));
    const certificates = [...xml!.toString('utf8').matchAll(/<ds:X509Certificate>([^<]+)<\/ds:X509Certificate>/g)].map(
      (m) => Buffer.from(m[1]!, 'base64'),
    );
    assert.equal(certificates.length, 2, 'KeyInfo: the signer certificate and the issuing CA');
    const leaf = join(dir, 'leaf.pem');
    const issuing = join(dir, 'issuing.pem');
    writeFileSync(leaf, toPem(certificates[0]!, 'CERTIFICATE'));
    writeFileSync(issuing, toPem(certificates[1]!, 'CERTIFICATE'));
    const ok = await run('openssl', ['verify', '-CAfile', env.rootCaFile, '-untrusted', issuing, leaf]);
    assert.ok(ok.ok, ok.output);
    const text = await run('openssl', ['x509', '-in', leaf, '-noout', '-subject', '-ext', 'keyUsage']);
    assert.match(text.output, /Non Repudiation/);
    const alone = await run('openssl', ['verify', '-CAfile', env.rootCaFile, leaf]);
    assert.equal(alone.ok, false, 'the leaf verified without its issuing CA');
  });

  it('xmlsec1 rejects a tampered signature value and a tampered signed property', async () => {
    const [xml] = signatures(await signX(SHA2[1]!, [DOCS[1]!]));
    assertVerified(await verify(xml!, DOCS[1]!));
    const text = xml!.toString('utf8');
    const at = text.indexOf('<ds:SignatureValue>') + '<ds:SignatureValue>'.length + 10;
    const badValue = Buffer.from(text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1));
    const r1 = await verify(badValue, DOCS[1]!);
    assert.equal(r1.ok, false, r1.output);
    const badTime = Buffer.from(
      text.replace(/<xades:SigningTime>(\d{4})/, (_m, y: string) => `<xades:SigningTime>${Number(y) + 1}`),
    );
    assert.notDeepEqual(badTime, xml);
    const r2 = await verify(badTime, DOCS[1]!);
    assert.equal(r2.ok, false, r2.output);
  });
});

/** ds:SignatureValue exclusive-canonicalised by hand (no attributes, one namespace): the time-stamp imprint input. */
function canonicalSignatureValue(xml: string): Buffer {
  const value = /<ds:SignatureValue>([^<]*)<\/ds:SignatureValue>/.exec(xml)![1]!;
  return Buffer.from(
    `<ds:SignatureValue xmlns:ds="http://www.w3.org/2000/09/xmldsig#">${value}</ds:SignatureValue>`,
    'utf8',
  );
}

describe('signDoc signs XAdES-B-T: xmlsec1 verifies the signature, openssl ts -verify the signature time-stamp', () => {
  for (const alg of SHA2) {
    it(alg.name, async () => {
      const [xml] = signatures(await signX(alg, [DOCS[0]!], { conformance_level: 'AdES-B-T' }));
      assertVerified(await verify(xml!, DOCS[0]!));
      const text = xml!.toString('utf8');
      const stamp = /<xades:SignatureTimeStamp\b[^>]*>([\s\S]*?)<\/xades:SignatureTimeStamp>/.exec(text);
      assert.ok(stamp, 'no xades:SignatureTimeStamp');
      assert.match(
        stamp[1]!,
        /<ds:CanonicalizationMethod Algorithm="http:\/\/www\.w3\.org\/2001\/10\/xml-exc-c14n#"\/>/,
      );
      const token = Buffer.from(/<xades:EncapsulatedTimeStamp>([^<]+)</.exec(stamp[1]!)![1]!, 'base64');
      const tokenFile = join(dir, `token-${alg.node}.tst`);
      const dataFile = join(dir, `signature-value-${alg.node}.xml`);
      writeFileSync(tokenFile, token);
      writeFileSync(dataFile, canonicalSignatureValue(text));
      const tsVerify = ['ts', '-verify', '-in', tokenFile, '-token_in', '-CAfile', env.rootCaFile];
      const ok = await run('openssl', [...tsVerify, '-data', dataFile]);
      assert.ok(ok.ok, ok.output);
      assert.match(ok.output, /Verification: OK/);
      const printed = await run('openssl', ['ts', '-reply', '-in', tokenFile, '-token_in', '-text']);
      assert.match(printed.output, new RegExp(`Hash Algorithm: ${alg.node}`));
      const genTime = Date.parse(/Time stamp: (.+)/.exec(printed.output)![1]!);
      const signingTime = Date.parse(/<xades:SigningTime>([^<]+)</.exec(text)![1]!);
      assert.ok(Math.abs(genTime - signingTime) < 60_000, `genTime ${genTime} far from SigningTime ${signingTime}`);

      writeFileSync(
        dataFile,
        canonicalSignatureValue(
          text.replace(
            /<ds:SignatureValue>./,
            `<ds:SignatureValue>${text.includes('<ds:SignatureValue>A') ? 'B' : 'A'}`,
          ),
        ),
      );
      const bad = await run('openssl', [...tsVerify, '-data', dataFile]);
      assert.equal(bad.ok, false, `openssl accepted the time-stamp over another signature value: ${bad.output}`);
    });
  }
});

describe('signDoc signs XAdES with the signer key the request names (signAlgo)', () => {
  const curveParam = (oid: string) =>
    Buffer.from(new asn1js.ObjectIdentifier({ value: oid }).toBER()).toString('base64');
  const cases: [string, HashAlgorithm, Record<string, string>, string][] = [
    [
      'ECDSA P-384 (ecPublicKey, namedCurve secp384r1)',
      SHA2[0]!,
      { signAlgo: '1.2.840.10045.2.1', signAlgoParams: curveParam('1.3.132.0.34') },
      'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256',
    ],
    [
      'ECDSA P-384 (ecdsa-with-SHA512)',
      SHA2[2]!,
      { signAlgo: '1.2.840.10045.4.3.4' },
      'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha512',
    ],
    [
      'RSA-3072 PKCS#1 v1.5 (rsaEncryption)',
      SHA2[1]!,
      { signAlgo: '1.2.840.113549.1.1.1' },
      'http://www.w3.org/2001/04/xmldsig-more#rsa-sha384',
    ],
  ];
  for (const [name, alg, signAlgo, method] of cases) {
    it(`${name} with ${alg.name}: xmlsec1 verifies`, async () => {
      const [xml] = signatures(await signX(alg, [DOCS[1]!], signAlgo));
      assert.ok(xml!.toString('utf8').includes(`<ds:SignatureMethod Algorithm="${method}"/>`));
      assertVerified(await verify(xml!, DOCS[1]!));
      const other = await verify(xml!, DOCS[0]!);
      assert.equal(other.ok, false, other.output);
    });
  }
});

describe('signDoc refuses XAdES it does not offer with 400 and mints nothing', () => {
  for (const name of ['SHA3-256', 'SHA3-512']) {
    it(`${name} document hashes`, async () => {
      const alg = hashByName(name)!;
      const before = await certificatesIssued();
      const res = await signX(alg, [DOCS[0]!]);
      const body = res.body as { error?: string; error_description?: string };
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(body.error, 'invalid_request');
      assert.match(
        body.error_description ?? '',
        new RegExp(
          `signature_format X is offered with SHA-256, SHA-384, SHA-512 document hashes .*xmlsec1.*, not with ${name} document hashes`,
        ),
      );
      assert.equal(await certificatesIssued(), before);
    });
  }

  // the one rule of offer.ts: xmlsec1 1.2 cannot verify the RFC 6931 RSASSA-PSS URIs, so X is not offered with them
  it('RSA-3072 RSASSA-PSS signer keys (id-RSASSA-PSS with its parameters)', async () => {
    const before = await certificatesIssued();
    const res = await signX(SHA2[2]!, [DOCS[0]!], {
      signAlgo: '1.2.840.113549.1.1.10',
      signAlgoParams: rsaPssParams('sha512').toString('base64'),
    });
    const body = res.body as { error?: string; error_description?: string };
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.match(
      body.error_description ?? '',
      /signature_format X is offered with .* signer keys \(what xmlsec1 .*\), not with RSA-3072 RSASSA-PSS signer keys/,
    );
    assert.equal(await certificatesIssued(), before);
  });
});
