/**
 * Our trust services over HTTP, driven by OpenSSL as a client would: POST /tsa with `openssl ts -query`
 * requests (every hash algorithm, with and without certReq, bad requests answered as rejections), /ocsp with
 * `openssl ocsp -url` (good, revoked after `qtsp pki revoke`, unknown; SHA-1 and SHA-256 CertIDs; GET; the
 * root's delegated responder for the issuing CA and the TSA), the CRLs with `openssl crl` (the root's from the
 * key ceremony), the AIA targets, a data directory made while the root key was online, and an external TSA
 * (tsa.url) that works, fails or hangs.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, renameSync, rmSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { HASH_ALGORITHMS } from '../../src/crypto/algorithms.ts';
import { assertRootOffline, ceremonyRootKeyFile, legacyRootKeyFile, pkiPaths } from '../../src/ca/material.ts';
import { ConfigError } from '../../src/config/load.ts';
import { pkiInit } from '../../src/ca/init.ts';
import { fromPem } from '../../src/util/base64.ts';
import { httpRequest, type HttpResponse, tlsAgent, type HttpAgent } from '../../src/util/http-client.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { opensslCmsVerify, opensslNewKey, run, scratch } from '../helpers/openssl.ts';
import { startOpensslTsa } from '../helpers/openssl-tsa.ts';
import {
  ATTR,
  cmsParts,
  pkiFiles,
  type PkiFiles,
  sha,
  tamper,
  verifyCrl,
  verifyToken,
} from '../helpers/pki-oracles.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';
import { signaturesOf, signThroughSandbox } from '../helpers/signing.ts';

const DOC = Buffer.from('a document to time-stamp\n');

let env: TestEnvironment;
let agent: HttpAgent;
let work: ReturnType<typeof scratch>;
let files: PkiFiles & { doc: string };
/** signer certificates minted by signDoc: one left alone, one revoked by `qtsp pki revoke` (keyCompromise) */
let good: { file: string; serial: string };
let revoked: { file: string; serial: string };
let revokeRun: { code: number; stdout: string; stderr: string };

before(async () => {
  env = await startEnvironment({ revocation: { crlRefreshSeconds: 1 } });
  // the mutual-TLS port serves the publication paths too, to clients with a certificate (a relying party's)
  agent = tlsAgent({
    ca: readFileSync(env.endpoints.tlsCaFile),
    cert: readFileSync(env.endpoints.rp.certFile),
    key: readFileSync(env.endpoints.rp.keyFile),
  });
  work = scratch();
  files = { ...pkiFiles(env.dataDir, work), doc: work.file('doc.txt', DOC) };
  good = await signerCertificate('good');
  revoked = await signerCertificate('revoked');
  revokeRun = await qtspCli(['pki', 'revoke', revoked.serial, '--reason', 'keyCompromise']);
});
after(async () => {
  agent.destroy();
  await env.close();
  work.remove();
});

function post(path: string, body: Buffer, contentType: string): Promise<HttpResponse> {
  return httpRequest(env.qtsp.url + path, {
    method: 'POST',
    headers: { 'content-type': contentType },
    body,
    agent,
    timeoutMs: 10_000,
  });
}

const qtspCli = (args: string[]) => qtsp([...args, '--data-dir', env.dataDir]);

/** `openssl ts -verify` of a reply against our root: over `subject` (-queryfile Q or -data D), -untrusted U */
const tsVerify = (reply: string, subject: string[], untrusted?: string) =>
  run('openssl', [
    'ts',
    '-verify',
    '-in',
    reply,
    ...subject,
    '-CAfile',
    files.root,
    ...(untrusted ? ['-untrusted', untrusted] : []),
  ]);

/** a signer certificate minted by signDoc (B-B), written as PEM; returns its file and serial (hex) */
async function signerCertificate(name: string): Promise<{ file: string; serial: string }> {
  const [signature] = signaturesOf(await signThroughSandbox(env, [sha('sha256', DOC).toString('base64')]));
  const file = work.file(`${name}.pem`);
  assert.ok((await opensslCmsVerify(signature!, DOC, files.root, file)).ok);
  const serial = /serial=([0-9A-F]+)/.exec(
    (await run('openssl', ['x509', '-in', file, '-noout', '-serial'])).output,
  )![1]!;
  return { file, serial };
}

describe('qtsp pki init: TSA and OCSP responder certificates', () => {
  it('are created for a data directory made before they existed, profiles as RFC 3161 and RFC 6960 want', async () => {
    const dir = work.file('older-data-dir');
    const p = pkiPaths(dir);
    pkiInit({ dataDir: dir, qtspId: 'sp:test.example:00000000-0000-4000-8000-000000000000' });
    const issuingBefore = readFileSync(p.issuingCert, 'utf8');
    for (const f of [p.tsaCert, p.tsaKey, p.ocspCert, p.ocspKey]) rmSync(f);
    assert.equal(pkiInit({ dataDir: dir, qtspId: 'sp:test.example:00000000-0000-4000-8000-000000000000' }), false);
    assert.ok([p.tsaCert, p.tsaKey, p.ocspCert, p.ocspKey].every((f) => existsSync(f)));
    assert.equal(readFileSync(p.issuingCert, 'utf8'), issuingBefore, 'the CAs stay as they were');
    const tsa = await run('openssl', ['x509', '-in', p.tsaCert, '-noout', '-ext', 'extendedKeyUsage,keyUsage']);
    assert.match(tsa.output, /Extended Key Usage: critical\s+Time Stamping\s*$/m);
    assert.match(tsa.output, /Key Usage: critical\s+Digital Signature/);
    assert.ok((await run('openssl', ['verify', '-CAfile', p.rootCert, '-purpose', 'timestampsign', p.tsaCert])).ok);
    const responder = await run('openssl', ['x509', '-in', p.ocspCert, '-noout', '-text']);
    assert.match(responder.output, /OCSP Signing/);
    assert.match(responder.output, /OCSP No Check/);
    assert.ok(
      (
        await run('openssl', [
          'verify',
          '-CAfile',
          p.rootCert,
          '-untrusted',
          p.issuingCert,
          '-purpose',
          'ocsphelper',
          p.ocspCert,
        ])
      ).ok,
    );
    const rootResponder = await run('openssl', ['x509', '-in', p.rootOcspCert, '-noout', '-text']);
    assert.match(rootResponder.output, /Issuer: .*qtsp Sandbox Root CA/);
    assert.match(rootResponder.output, /OCSP Signing/);
    assert.match(rootResponder.output, /OCSP No Check/);
    assert.ok((await run('openssl', ['verify', '-CAfile', p.rootCert, '-purpose', 'ocsphelper', p.rootOcspCert])).ok);
  });

  it('a data directory whose root key is among the service files is refused at start and migrated by the ceremony', () => {
    const dir = work.file('root-online-data-dir');
    const p = pkiPaths(dir);
    pkiInit({ dataDir: dir, qtspId: 'sp:test.example:00000000-0000-4000-8000-000000000000' });
    assert.ok(!existsSync(legacyRootKeyFile(dir)) && existsSync(ceremonyRootKeyFile(dir)));
    assertRootOffline(dir);
    // as data directories made before the root went offline: the root key in pki/, no root responder, CRL, mail CA
    renameSync(ceremonyRootKeyFile(dir), legacyRootKeyFile(dir));
    for (const f of [p.rootOcspCert, p.rootOcspKey, p.rootCrl, p.mailCaCert, p.mailCaKey]) rmSync(f);
    assert.throws(
      () => assertRootOffline(dir),
      (err: unknown) => err instanceof ConfigError && err.message.includes('qtsp pki ceremony --migrate'),
    );
    const rootBefore = readFileSync(p.rootCert, 'utf8');
    assert.equal(pkiInit({ dataDir: dir, qtspId: 'sp:test.example:00000000-0000-4000-8000-000000000000' }), false);
    assert.ok(!existsSync(legacyRootKeyFile(dir)), 'the root key left the service files');
    assert.ok(existsSync(ceremonyRootKeyFile(dir)), 'the root key is in the ceremony directory');
    assert.equal(readFileSync(p.rootCert, 'utf8'), rootBefore, 'the root stays as it was');
    assertRootOffline(dir);
  });
});

describe('POST /tsa (RFC 3161) with openssl ts', () => {
  for (const alg of HASH_ALGORITHMS.values()) {
    it(`grants a token over a ${alg.name} imprint that openssl ts -verify accepts, nonce echoed`, async () => {
      const query = work.file(`q-${alg.node}.tsq`);
      assert.ok(
        (await run('openssl', ['ts', '-query', '-data', files.doc, `-${alg.node}`, '-cert', '-out', query])).ok,
      );
      const res = await post('/tsa', readFileSync(query), 'application/timestamp-query');
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'application/timestamp-reply');
      const reply = work.file(`r-${alg.node}.tsr`, res.body);
      const text = (await run('openssl', ['ts', '-reply', '-in', reply, '-text'])).output;
      assert.match(text, /Status: Granted/);
      assert.match(text, /Policy OID: 1\.3\.6\.1\.4\.1\.32473\.3161\.1/);
      assert.match(text, /Accuracy: 0x01 seconds/);
      assert.match(text, /Nonce: 0x[0-9A-F]+/);
      // -queryfile: same imprint, the request's nonce, certReq honoured
      const ok = await tsVerify(reply, ['-queryfile', query], files.tsa);
      assert.ok(ok.ok, ok.output);
      const data = await tsVerify(reply, ['-data', files.doc]);
      assert.ok(data.ok, data.output);
      const other = await tsVerify(reply, ['-data', work.file('other.txt', 'another document')]);
      assert.equal(other.ok, false, 'openssl accepted a token over other data');
    });
  }

  it('without certReq the token carries no certificate; verification then needs the TSA certificate', async () => {
    const query = work.file('q-nocert.tsq');
    assert.ok((await run('openssl', ['ts', '-query', '-data', files.doc, '-sha256', '-out', query])).ok);
    const reply = work.file(
      'r-nocert.tsr',
      (await post('/tsa', readFileSync(query), 'application/timestamp-query')).body,
    );
    assert.ok((await tsVerify(reply, ['-queryfile', query], files.tsa)).ok);
    assert.equal((await tsVerify(reply, ['-queryfile', query])).ok, false);
  });

  it('a token with a flipped byte is rejected by openssl ts -verify', async () => {
    const query = work.file('q-tamper.tsq');
    assert.ok((await run('openssl', ['ts', '-query', '-data', files.doc, '-sha256', '-cert', '-out', query])).ok);
    const res = await post('/tsa', readFileSync(query), 'application/timestamp-query');
    const reply = work.file('r-tamper.tsr', tamper(res.body, -10));
    assert.equal((await tsVerify(reply, ['-queryfile', query])).ok, false);
  });

  const rejections: [string, () => Promise<HttpResponse>, RegExp][] = [
    ['garbage', () => post('/tsa', Buffer.from('not a TimeStampReq'), 'application/timestamp-query'), /wrong format/],
    ['a wrong Content-Type', () => post('/tsa', Buffer.from('{}'), 'application/json'), /transaction not permitted/],
    [
      'an unaccepted policy',
      async () => post('/tsa', await query(['-tspolicy', '1.2.3.4']), 'application/timestamp-query'),
      /policy is not supported/,
    ],
    [
      'SHA-1',
      async () => post('/tsa', await query(['-sha1']), 'application/timestamp-query'),
      /unrecognized or unsupported algorithm identifier/,
    ],
  ];
  async function query(extra: string[]): Promise<Buffer> {
    const file = work.file('q-reject.tsq');
    assert.ok((await run('openssl', ['ts', '-query', '-data', files.doc, ...extra, '-out', file])).ok);
    return readFileSync(file);
  }
  for (const [what, send, failure] of rejections) {
    it(`rejects ${what} with a TimeStampResp (status rejection), HTTP 400`, async () => {
      const res = await send();
      assert.equal(res.status, 400);
      assert.equal(res.headers['content-type'], 'application/timestamp-reply');
      const text = (await run('openssl', ['ts', '-reply', '-in', work.file('rejected.tsr', res.body), '-text'])).output;
      assert.match(text, /Status: Rejected/);
      assert.match(text, failure);
    });
  }

  it('answers GET with 405 and a rejection', async () => {
    const res = await httpRequest(`${env.qtsp.url}/tsa`, { agent, timeoutMs: 5000 });
    assert.equal(res.status, 405);
    assert.equal(res.headers['allow'], 'POST');
  });
});

describe('/ocsp (RFC 6960) with openssl ocsp -url', () => {
  /** openssl ocsp about a certificate of our issuing CA: asked at `from` (-url U, or -respin F), verified */
  const ocspFrom = (from: string[], args: string[]) =>
    run('openssl', [
      'ocsp',
      ...from,
      '-CAfile',
      files.root,
      '-verify_other',
      files.issuing,
      '-issuer',
      files.issuing,
      ...args,
    ]);
  const ocsp = (args: string[]) => ocspFrom(['-url', `${env.qtsp.publicationUrl}/ocsp`], args);

  for (const digest of ['-sha1', '-sha256']) {
    it(`good, nonce echoed, signed by the delegated responder (${digest} CertID)`, async () => {
      const res = await ocsp([digest, '-cert', good.file]);
      assert.ok(res.ok, res.output);
      assert.match(res.output, /Response verify OK/);
      assert.ok(res.output.includes(`${good.file}: good`), res.output);
      assert.doesNotMatch(res.output, /nonce/i, 'openssl warns about a missing or wrong nonce');
    });
  }

  it('unknown for a serial our issuing CA never issued', async () => {
    const res = await ocsp(['-serial', '0x0123456789abcdef']);
    assert.match(res.output, /Response verify OK/);
    assert.match(res.output, /0x0123456789abcdef: unknown/i);
  });

  it('revoked, with time and reason, after qtsp pki revoke', async () => {
    assert.equal(revokeRun.code, 0, revokeRun.stderr);
    assert.match(revokeRun.stdout, /revoked certificate/);
    const res = await ocsp(['-sha256', '-cert', revoked.file]);
    assert.match(res.output, /Response verify OK/);
    assert.ok(res.output.includes(`${revoked.file}: revoked`), res.output);
    assert.match(res.output, /Reason: keyCompromise/);
    assert.match(res.output, /Revocation Time: /);
  });

  it('qtsp pki revoke refuses a second revocation, an unknown serial and an unknown reason', async () => {
    const [again, unknown, badReason] = await Promise.all([
      qtspCli(['pki', 'revoke', revoked.serial]),
      qtspCli(['pki', 'revoke', '0123abcd']),
      qtspCli(['pki', 'revoke', revoked.serial, '--reason', 'because']),
    ]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /already revoked/);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no certificate with serial/);
    assert.equal(badReason.code, 2);
    assert.match(badReason.stderr, /--reason must be one of/);
  });

  it('GET with the Base64 request in the path (RFC 6960 A.1), cacheable', async () => {
    const req = work.file('ocsp-get.req');
    assert.ok(
      (await run('openssl', ['ocsp', '-issuer', files.issuing, '-cert', good.file, '-no_nonce', '-reqout', req])).ok,
    );
    const res = await httpRequest(`${env.qtsp.url}/ocsp/${encodeURIComponent(readFileSync(req).toString('base64'))}`, {
      agent,
      timeoutMs: 5000,
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-type'], 'application/ocsp-response');
    assert.match(String(res.headers['cache-control']), /max-age=\d+/);
    const respin = (response: string) => ocspFrom(['-respin', response], ['-cert', good.file, '-no_nonce']);
    const check = await respin(work.file('ocsp-get.der', res.body));
    assert.ok(check.ok && check.output.includes(`${good.file}: good`), check.output);
    // a flipped byte in producedAt: the responder's signature no longer verifies
    const at = res.body.indexOf(Buffer.from([0x18, 0x0f]));
    const broken = await respin(work.file('ocsp-bad.der', tamper(res.body, at + 2 + 13)));
    assert.doesNotMatch(broken.output, /Response verify OK/);
  });

  it('malformedRequest (HTTP 400) for garbage, unauthorized for a CA it does not answer for', async () => {
    const bad = await post('/ocsp', Buffer.from('garbage'), 'application/ocsp-request');
    assert.equal(bad.status, 400);
    const badText = await run('openssl', [
      'ocsp',
      '-respin',
      work.file('malformed.der', bad.body),
      '-resp_text',
      '-noverify',
    ]);
    assert.match(badText.output, /malformedrequest/i);
    // a certificate of a CA that is not ours
    const other = work.file('other-ca.pem');
    const made = await opensslNewKey({
      keyFile: work.file('other-ca.key'),
      out: other,
      subject: '/CN=not our CA',
      days: 1,
    });
    assert.ok(made.ok, made.output);
    const res = await run('openssl', [
      'ocsp',
      '-url',
      `${env.qtsp.publicationUrl}/ocsp`,
      '-issuer',
      other,
      '-cert',
      other,
      '-CAfile',
      files.root,
    ]);
    assert.match(res.output, /unauthorized/i);
  });

  for (const [name, file] of [
    ['the issuing CA', 'issuing'],
    ['the TSA', 'tsa'],
  ] as const) {
    it(`good for ${name}, signed by the root's delegated responder (the root key is offline)`, async () => {
      const res = await run('openssl', [
        'ocsp',
        '-url',
        `${env.qtsp.publicationUrl}/ocsp`,
        '-issuer',
        files.root,
        '-cert',
        files[file],
        '-CAfile',
        files.root,
        '-resp_text',
      ]);
      assert.ok(res.ok && /Response verify OK/.test(res.output), res.output);
      assert.ok(res.output.includes(`${files[file]}: good`), res.output);
      assert.match(res.output, /Root OCSP Responder/);
    });
  }
});

describe('CRLs and CA certificates', () => {
  async function get(path: string): Promise<HttpResponse> {
    return httpRequest(env.qtsp.url + path, { agent, timeoutMs: 5000 });
  }

  it('/crl/root.crl and /crl/issuing.crl verify with openssl crl; the revoked certificate is listed with its reason', async () => {
    const root = await get('/crl/root.crl');
    assert.equal(root.status, 200);
    assert.equal(root.headers['content-type'], 'application/pkix-crl');
    const rootOk = await verifyCrl(root.body, files.root);
    assert.ok(rootOk.ok && /verify OK/.test(rootOk.output), rootOk.output);
    assert.match(rootOk.output, /Issuer: .*Root CA/);
    assert.ok(root.body.equals(readFileSync(pkiPaths(env.dataDir).rootCrl)), "the root CRL is the key ceremony's");
    // revoked by another process: a CRL issued after a refresh (revocation.crlRefreshSeconds: 1) lists it; on a
    // busy machine the refresh may come later, so wait for it (bounded) instead of a fixed pause
    await new Promise((r) => setTimeout(r, 1100));
    let issuing = await get('/crl/issuing.crl');
    let ok = await verifyCrl(issuing.body, files.rootAndIssuing);
    for (let i = 0; i < 60 && !ok.output.includes(`Serial Number: ${revoked.serial}`); i++) {
      await new Promise((r) => setTimeout(r, 250));
      issuing = await get('/crl/issuing.crl');
      ok = await verifyCrl(issuing.body, files.rootAndIssuing);
    }
    assert.ok(ok.ok && /verify OK/.test(ok.output), ok.output);
    assert.ok(ok.output.includes(`Serial Number: ${revoked.serial}`), ok.output);
    assert.ok(!ok.output.includes(`Serial Number: ${good.serial}`), ok.output);
    assert.match(ok.output, /Key Compromise/);
    const thisUpdate = issuing.body.indexOf(Buffer.from([0x17, 0x0d]));
    const broken = await verifyCrl(tamper(issuing.body, thisUpdate + 2 + 11), files.rootAndIssuing);
    assert.ok(!broken.ok || !/verify OK/.test(broken.output), broken.output);
  });

  it('/ca/root.crt and /ca/issuing.crt serve the CA certificates (AIA caIssuers)', async () => {
    for (const [path, file] of [
      ['/ca/root.crt', files.root],
      ['/ca/issuing.crt', files.issuing],
    ] as const) {
      const res = await get(path);
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'application/pkix-cert');
      assert.ok(res.body.equals(fromPem(readFileSync(file, 'utf8'))[0]!));
    }
  });
});

describe('an external TSA (tsa.url)', () => {
  type Mode = 'forward' | 'error' | 'hang' | 'reset' | 'garbage';
  let mode: Mode = 'forward';
  let calls = 0;
  let proxy: http.Server;
  let env2: TestEnvironment;

  before(async () => {
    // stands in for another TSA: forwards to the first environment's /tsa, or misbehaves
    proxy = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        calls++;
        if (mode === 'error') return void res.writeHead(500).end();
        if (mode === 'hang') return;
        if (mode === 'reset') return void req.socket.destroy();
        if (mode === 'garbage')
          return void res.writeHead(200, { 'content-type': 'application/timestamp-reply' }).end('garbage');
        post('/tsa', Buffer.concat(chunks), String(req.headers['content-type'])).then((r) =>
          res.writeHead(r.status, { 'content-type': String(r.headers['content-type']) }).end(r.body),
        );
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const { port } = proxy.address() as AddressInfo;
    env2 = await startEnvironment({ tsa: { url: `http://127.0.0.1:${port}/tsa`, timeoutMs: 400, retries: 1 } });
  });
  after(async () => {
    await env2?.close();
    proxy.closeAllConnections();
    await new Promise((resolve) => proxy.close(resolve));
  });

  const signB_T = () =>
    signThroughSandbox(env2, [sha('sha256', DOC).toString('base64')], { fields: { conformance_level: 'AdES-B-T' } });

  it('B-T with the external TSA: the token verifies against that TSA root', async () => {
    mode = 'forward';
    const res = await signB_T();
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const signature = Buffer.from((res.body['SignatureObject'] as string[])[0]!, 'base64');
    assert.ok((await opensslCmsVerify(signature, DOC, pkiPaths(env2.dataDir).rootCert)).ok);
    const parts = await cmsParts(signature);
    const token = parts.unsigned.find((a) => a.name === ATTR.signatureTimeStamp)!.values[0]!;
    const ok = await verifyToken(token, { data: parts.signatureValue }, files.root);
    assert.ok(ok.ok, ok.output);
  });

  it("another operator's TSA (openssl ts -reply), its chain in tsa.chainFile: B-T verifies, B-LT is 502", async () => {
    const other = await startOpensslTsa(work.file('other-tsa'));
    const env3 = await startEnvironment({ tsa: { url: other.url, chainFile: other.chainFile } });
    try {
      const sign = (level: string) =>
        signThroughSandbox(env3, [sha('sha256', DOC).toString('base64')], { fields: { conformance_level: level } });
      const bT = await sign('AdES-B-T');
      assert.equal(bT.status, 200, JSON.stringify(bT.body));
      const signature = Buffer.from((bT.body['SignatureObject'] as string[])[0]!, 'base64');
      const parts = await cmsParts(signature);
      const token = parts.unsigned.find((a) => a.name === ATTR.signatureTimeStamp)!.values[0]!;
      const verified = await verifyToken(token, { data: parts.signatureValue }, other.rootFile);
      assert.ok(verified.ok, verified.output);
      // our responders answer for none of its certificates (conformance.md): refused, never a 500
      const bLT = await sign('AdES-B-LT');
      assert.equal(bLT.status, 502, JSON.stringify(bLT.body));
      assert.equal(bLT.body['error'], 'bad_gateway');
      assert.equal(bLT.body['SignatureObject'], undefined);
    } finally {
      await env3.close();
      await other.close();
    }
  });

  it('a tsa.chainFile that lacks an issuer, holds no certificate or is missing: refused at start', async () => {
    const other = await startOpensslTsa(work.file('other-tsa-2'));
    await other.close();
    const cases: [string, RegExp][] = [
      // its TSA certificate without its root
      [
        `${work.file('other-tsa-2')}/tsa.pem`,
        /lacks the issuer of certificate 1 \(O=Other Operator, CN=Other Operator TSA Root\)/,
      ],
      [work.file('no-certificate.pem', 'not PEM\n'), /holds no PEM certificate/],
      [work.file('not-x509.pem', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n'), /not X\.509/],
      [`${work.dir}/missing.pem`, /does not exist/],
    ];
    for (const [chainFile, why] of cases) {
      await assert.rejects(
        startEnvironment({ tsa: { url: other.url, chainFile } }),
        (err: Error) =>
          err instanceof ConfigError && /^setting tsa\.chainFile: /.test(err.message) && why.test(err.message),
      );
    }
  });

  const failures: [Mode, number, string][] = [
    ['error', 502, 'bad_gateway'],
    ['reset', 502, 'bad_gateway'],
    ['garbage', 502, 'bad_gateway'],
    ['hang', 504, 'gateway_timeout'],
  ];
  for (const [failure, status, code] of failures) {
    it(`a TSA that ${failure === 'hang' ? 'does not answer' : `answers with ${failure}`}: signDoc answers ${status} ${code}`, async () => {
      mode = failure;
      calls = 0;
      const res = await signB_T();
      assert.equal(res.status, status, JSON.stringify(res.body));
      assert.equal(res.body['error'], code);
      assert.match(String(res.body['error_description']), /time-stamping authority/);
      assert.equal(res.body['SignatureObject'], undefined);
      if (failure !== 'garbage') assert.equal(calls, 2, 'one call and one retry');
    });
  }
});
