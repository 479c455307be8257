/**
 * XAdES (signature_format X) through the real signDoc flow: sandbox bank AS, PAR, authorization, token, then
 * signDoc over mutual TLS with document digests only. Every signature is checked with xmlsec1 against the
 * document it was made for (test/helpers/xmlsec.ts: the detached reference names the document by its digest,
 * --url-map hands xmlsec1 the bytes), trusting only our root CA; the signer certificate chain is checked by
 * xmlsec1 and again by `openssl verify`.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hashByName, type HashAlgorithm } from '../../src/ades/algorithms.ts';
import { authorizeSigning, callSignDoc } from '../../src/rp/flow.ts';
import { pkiPaths } from '../../src/pki/init.ts';
import { toPem } from '../../src/util/base64.ts';
import { startEnvironment, PROFILE, type TestEnvironment } from '../helpers/environment.ts';
import { run } from '../helpers/openssl.ts';
import { externalReferenceUris, xmlsecVerify } from '../helpers/xmlsec.ts';

let env: TestEnvironment;
let dir: string;
const DOCS = [Buffer.from('<invoice>first document</invoice>\n'), Buffer.from('second document, with ünïcödé\r\n\x00\xff', 'latin1')];
const SHA2 = ['SHA-256', 'SHA-384', 'SHA-512'].map((n) => hashByName(n)!);

before(async () => {
  env = await startEnvironment();
  dir = mkdtempSync(join(tmpdir(), 'qtsp-xades-it-'));
});
after(async () => {
  await env.close();
  rmSync(dir, { recursive: true, force: true });
});

const hashOf = (alg: HashAlgorithm, doc: Uint8Array) => createHash(alg.node).update(doc).digest('base64');

async function certificatesIssued(): Promise<number> {
  return (await env.qtsp.deps.metrics.certificates.get()).values[0]?.value ?? 0;
}

/** PAR -> authorize -> token for these documents, then signDoc with signature_format X. */
async function signX(alg: HashAlgorithm, docs: readonly Buffer[], extra: Record<string, unknown> = {}) {
  const hashes = docs.map((d) => hashOf(alg, d));
  const auth = await authorizeSigning(env.endpoints, { documentDigests: hashes.map((hash, i) => ({ hash, label: `document ${i + 1}` })), hashAlgorithmOID: alg.oid });
  return callSignDoc(env.qtsp.signDocUrl, env.endpoints, {
    SAD: auth.accessToken,
    credentialID: 'qes_eidas',
    documentDigests: { hashes, hashAlgorithmOID: alg.oid },
    profile: PROFILE,
    signature_format: 'X',
    ...extra,
  });
}

function signatures(res: { status: number; body: unknown }): Buffer[] {
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return (res.body as { SignatureObject: string[] }).SignatureObject.map((s) => Buffer.from(s, 'base64'));
}

const verify = (xml: Buffer, doc: Buffer) => xmlsecVerify(xml, doc, { trustedPem: env.rootCaFile, untrustedPem: pkiPaths(env.dataDir).issuingCert });

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
        assert.deepEqual(uri, [`ni:///${alg.name.toLowerCase()};${Buffer.from(hashOf(alg, DOCS[i]!), 'base64').toString('base64url')}`]);
        assert.ok(text.includes(`<ds:DigestValue>${hashOf(alg, DOCS[i]!)}</ds:DigestValue>`));
        assertVerified(await verify(xml, DOCS[i]!));
        const swapped = await verify(xml, DOCS[1 - i]!);
        assert.equal(swapped.ok, false, `xmlsec1 accepted a signature over the other document: ${swapped.output}`);
      }
    });
  }

  it('openssl verifies the signer certificate from KeyInfo up to our root', async () => {
    const [xml] = signatures(await signX(SHA2[0]!, [DOCS[0]!]));
    const certificates = [...xml!.toString('utf8').matchAll(/<ds:X509Certificate>([^<]+)<\/ds:X509Certificate>/g)].map((m) => Buffer.from(m[1]!, 'base64'));
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
    const badTime = Buffer.from(text.replace(/<xades:SigningTime>(\d{4})/, (_m, y: string) => `<xades:SigningTime>${Number(y) + 1}`));
    assert.notDeepEqual(badTime, xml);
    const r2 = await verify(badTime, DOCS[1]!);
    assert.equal(r2.ok, false, r2.output);
  });
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
      assert.match(body.error_description ?? '', new RegExp(`signature_format X is offered with SHA-256, SHA-384, SHA-512 document hashes only, not ${name}`));
      assert.equal(await certificatesIssued(), before);
    });
  }
});
