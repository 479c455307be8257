/**
 * signDoc end to end over real HTTPS with real mutual TLS: sandbox bank AS + platform + QTSP on loopback.
 * Every signature is checked by `openssl cms -verify -cades`; every failure of spec 5.7 and 5.9 answers 401
 * and signs nothing; every request error of 2.12 answers 400.
 */
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as https from 'node:https';
import { SignJWT } from 'jose';
import { HASH_ALGORITHMS } from '../../src/crypto/algorithms.ts';
import { callSignDoc, type RpEndpoints } from '../../src/rp/flow.ts';
import { x5tS256 } from '../../src/trust/fingerprint.ts';
import { fromPem } from '../../src/util/base64.ts';
import { httpRequest, tlsAgent } from '../../src/util/http-client.ts';
import { startEnvironment, QTSP_ID, SHA256_OID, type TestEnvironment } from '../helpers/environment.ts';
import { opensslCmsVerify, run } from '../helpers/openssl.ts';
import { authorize as authorizeAtBank, labelled, signDocBody } from '../helpers/signing.ts';

let env: TestEnvironment;
const DOCS = [Buffer.from('first document\n'), Buffer.from('second document, with ünïcödé\n')];
const b64 = (alg: string, data: Uint8Array) => createHash(alg).update(data).digest('base64');
const sha256 = (data: Uint8Array) => b64('sha256', data);

before(async () => {
  env = await startEnvironment({ introspection: { timeoutMs: 1500 }, trust: { idpCacheTtlSeconds: 0 } });
});
after(async () => {
  await env.close();
});
afterEach(() => {
  env.sandbox.controls.reset();
});

async function authorize(
  hashes: string[] = DOCS.map(sha256),
  hashAlgorithmOID = SHA256_OID,
  endpoints: RpEndpoints = env.endpoints,
  claims?: Record<string, null | { essential: true }>,
) {
  return authorizeAtBank(endpoints, labelled(hashes), { hashAlgorithmOID, ...(claims ? { claims } : {}) });
}

function body(SAD: string, hashes: string[] = DOCS.map(sha256), extra: Record<string, unknown> = {}) {
  return signDocBody(SAD, hashes, extra);
}

async function post(payload: unknown, endpoints: RpEndpoints = env.endpoints) {
  return callSignDoc(env.qtsp.signDocUrl, endpoints, payload as Record<string, unknown>);
}

async function certificatesIssued(): Promise<number> {
  return (await env.qtsp.deps.metrics.certificates.get()).values[0]?.value ?? 0;
}

/** The request fails with this status and a description containing `text`, and no certificate is minted. */
async function expectRefused(
  payload: unknown,
  status: number,
  text: string | RegExp,
  endpoints?: RpEndpoints,
): Promise<void> {
  const before = await certificatesIssued();
  const res = await post(payload, endpoints);
  const b = res.body as { error?: string; error_description?: string; SignatureObject?: unknown };
  assert.equal(res.status, status, `expected ${status}, got ${res.status}: ${JSON.stringify(b)}`);
  assert.equal(typeof b.error, 'string');
  assert.equal(b.SignatureObject, undefined);
  if (typeof text === 'string')
    assert.ok(b.error_description?.includes(text), `description "${b.error_description}" lacks "${text}"`);
  else assert.match(b.error_description ?? '', text);
  assert.equal(await certificatesIssued(), before, 'a certificate was minted for a refused request');
}

function rpFingerprint(): string {
  return x5tS256(fromPem(readFileSync(env.endpoints.rp.certFile, 'utf8'))[0]!);
}

function sadClaims(extra: Record<string, unknown> = {}): Record<string, unknown> {
  const now = Math.floor(Date.now() / 1000);
  return {
    iss: env.sandbox.issuer,
    iat: now - 5,
    exp: now + 300,
    jti: randomUUID(),
    cnf: { 'x5t#S256': rpFingerprint() },
    ...extra,
  };
}

function unsignedJwt(header: Record<string, unknown>, payload: Record<string, unknown>): string {
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${enc(header)}.${enc(payload)}.`;
}

describe('signDoc signs', () => {
  it('every hash as CAdES-B-B that openssl accepts, in request order, with the txn in a header', async () => {
    const auth = await authorize();
    const res = await post(body(auth.accessToken));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const sigs = (res.body as { SignatureObject: string[] }).SignatureObject;
    assert.equal(sigs.length, 2);
    for (const [i, sig] of sigs.entries()) {
      const ok = await opensslCmsVerify(Buffer.from(sig, 'base64'), DOCS[i]!, env.rootCaFile);
      assert.ok(ok.ok, ok.output);
      const swapped = await opensslCmsVerify(Buffer.from(sig, 'base64'), DOCS[1 - i]!, env.rootCaFile);
      assert.equal(swapped.ok, false, 'openssl accepted a signature over the other document');
    }
    assert.match(String(res.headers['x-transaction-id']), /.+/);
  });

  it('a subset of the consented hashes', async () => {
    const auth = await authorize();
    const res = await post(body(auth.accessToken, [sha256(DOCS[1]!)]));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const [sig] = (res.body as { SignatureObject: string[] }).SignatureObject;
    assert.ok((await opensslCmsVerify(Buffer.from(sig!, 'base64'), DOCS[1]!, env.rootCaFile)).ok);
  });

  for (const alg of HASH_ALGORITHMS.values()) {
    it(`with ${alg.name} document hashes`, async () => {
      const hash = b64(alg.node, DOCS[0]!);
      const auth = await authorize([hash], alg.oid);
      const res = await post({
        ...body(auth.accessToken, [hash]),
        documentDigests: { hashes: [hash], hashAlgorithmOID: alg.oid },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const [sig] = (res.body as { SignatureObject: string[] }).SignatureObject;
      const ok = await opensslCmsVerify(Buffer.from(sig!, 'base64'), DOCS[0]!, env.rootCaFile);
      assert.ok(ok.ok, ok.output);
    });
  }

  it('for a demo client', async () => {
    const demo = await env.sandbox.registerClient({ clientId: 'demo-rp', state: 'demo' });
    const endpoints = { ...env.endpoints, rp: demo };
    const auth = await authorize(undefined, undefined, endpoints);
    const res = await post(body(auth.accessToken), endpoints);
    assert.equal(res.status, 200, JSON.stringify(res.body));
  });

  it('QESID: the certificate carries the vouched identity (2.16)', async () => {
    const auth = await authorize(undefined, undefined, undefined, {
      nationalities: null,
      address: { essential: true },
    });
    const res = await post(body(auth.accessToken));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const sig = Buffer.from((res.body as { SignatureObject: string[] }).SignatureObject[0]!, 'base64');
    const { mkdtempSync, writeFileSync, readFileSync: read, rmSync } = await import('node:fs');
    const dir = mkdtempSync('/tmp/qtsp-qesid-');
    writeFileSync(`${dir}/s.p7s`, sig);
    const printed = await run('openssl', [
      'pkcs7',
      '-inform',
      'DER',
      '-in',
      `${dir}/s.p7s`,
      '-print_certs',
      '-out',
      `${dir}/certs.pem`,
    ]);
    assert.ok(printed.ok, printed.output);
    const leafPem = read(`${dir}/certs.pem`, 'utf8').match(
      /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/,
    )![0];
    writeFileSync(`${dir}/leaf.pem`, leafPem);
    const text = await run('openssl', [
      'x509',
      '-in',
      `${dir}/leaf.pem`,
      '-noout',
      '-text',
      '-nameopt',
      'oneline,-esc_msb',
    ]);
    assert.ok(text.ok, text.output);
    assert.match(text.output, /GN = Erika/);
    assert.match(text.output, /SN = Mustermann/);
    assert.match(text.output, /street = /);
    assert.match(text.output, /postalCode = /);
    assert.match(text.output, /Non Repudiation/);
    assert.match(text.output, /X509v3 Subject Directory Attributes/);
    // EN 319 412-2 / RFC 5280 profile: countryName, commonName, SKI; software keys: QCP-n, no QcSSCD
    assert.match(text.output, /Subject: C = [A-Z]{2}, .*CN = Erika Mustermann\n/);
    assert.match(text.output, /X509v3 Subject Key Identifier/);
    assert.match(text.output, /Policy: 0\.4\.0\.194112\.1\.0\n/);
    // asn1parse prints the qcStatements value as a hex dump: look for the DER of the statement OIDs
    const qc = await run('openssl', ['asn1parse', '-in', `${dir}/leaf.pem`]);
    assert.match(qc.output, /:qcStatements\n.*\[HEX DUMP\]:[0-9A-F]*0604008E460101/, 'QcCompliance 0.4.0.1862.1.1');
    assert.doesNotMatch(qc.output, /0604008E460104/, 'no QcSSCD 0.4.0.1862.1.4 for a key in process memory');
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('signDoc refuses malformed requests with 400 (spec 2.12)', () => {
  const good = () => body('x.y.z');
  const cases: [string, () => unknown, string][] = [
    ['an unknown parameter', () => ({ ...good(), foo: 1 }), "unknown parameter 'foo'"],
    [
      'an unknown parameter inside documentDigests',
      () => ({ ...good(), documentDigests: { hashes: [sha256(DOCS[0]!)], hashAlgorithmOID: SHA256_OID, extra: 1 } }),
      "unknown parameter 'extra'",
    ],
    ['a missing SAD', () => ({ ...good(), SAD: undefined }), "missing required parameter 'SAD'"],
    ['a missing credentialID', () => ({ ...good(), credentialID: undefined }), "'credentialID'"],
    ['a missing documentDigests', () => ({ ...good(), documentDigests: undefined }), "'documentDigests'"],
    ['a missing profile', () => ({ ...good(), profile: undefined }), "'profile'"],
    ['a missing signature_format', () => ({ ...good(), signature_format: undefined }), "'signature_format'"],
    [
      'a missing hashAlgorithmOID',
      () => ({ ...good(), documentDigests: { hashes: [sha256(DOCS[0]!)] } }),
      "'hashAlgorithmOID'",
    ],
    ['a wrong profile', () => ({ ...good(), profile: 'http://uri.etsi.org/19432/v1.1.1#/other#' }), 'profile'],
    ['a wrong credentialID', () => ({ ...good(), credentialID: 'other' }), 'credentialID'],
    ['signature_format Z', () => ({ ...good(), signature_format: 'Z' }), 'one of C, X, P'],
    ['an unknown conformance_level', () => ({ ...good(), conformance_level: 'AdES-B-Q' }), 'one of AdES-B-B'],
    [
      'an unknown hash algorithm',
      () => ({ ...good(), documentDigests: { hashes: [sha256(DOCS[0]!)], hashAlgorithmOID: '1.3.14.3.2.26' } }),
      'hashAlgorithmOID',
    ],
    [
      'an empty hash list',
      () => ({ ...good(), documentDigests: { hashes: [], hashAlgorithmOID: SHA256_OID } }),
      'hashes',
    ],
    ['a hex hash', () => body('x.y.z', [createHash('sha256').update(DOCS[0]!).digest('hex')]), 'hex'],
    ['a URL-safe Base64 hash', () => body('x.y.z', [Buffer.alloc(32, 0xfb).toString('base64url')]), 'Base64'],
    [
      'Base64 of a hex string',
      () => body('x.y.z', [Buffer.from(createHash('sha256').update(DOCS[0]!).digest('hex')).toString('base64')]),
      'hex string',
    ],
    [
      'a hash of the wrong length',
      () => body('x.y.z', [Buffer.alloc(20, 1).toString('base64')]),
      'decodes to 20 bytes',
    ],
    ['a hash that is not a string', () => body('x.y.z', [42 as unknown as string]), 'hashes'],
    [
      'signAlgo we do not offer (DSA with SHA-256)',
      () => ({ ...good(), signAlgo: '2.16.840.1.101.3.4.3.2' }),
      'signAlgo 2.16.840.1.101.3.4.3.2 is not offered',
    ],
    [
      'XAdES at B-LTA, not built',
      () => ({ ...good(), signature_format: 'X', conformance_level: 'AdES-B-LTA' }),
      'not offered',
    ],
    ['a JSON array body', () => [good()], 'JSON object'],
    [
      'the same hash twice (one consent, one signature per document)',
      () => body('x.y.z', [sha256(DOCS[0]!), sha256(DOCS[1]!), sha256(DOCS[0]!)]),
      'documentDigests.hashes[2] repeats documentDigests.hashes[0]',
    ],
  ];
  for (const [name, make, text] of cases) {
    it(name, async () => {
      await expectRefused(make(), 400, text);
    });
  }

  it('a body that is not JSON, or not declared as JSON', async () => {
    const agent = tlsAgent({
      ca: readFileSync(env.endpoints.tlsCaFile),
      cert: readFileSync(env.endpoints.rp.certFile),
      key: readFileSync(env.endpoints.rp.keyFile),
    });
    const postAs = (contentType: string, body: string) =>
      httpRequest(env.qtsp.signDocUrl, {
        method: 'POST',
        agent,
        timeoutMs: 5000,
        headers: { 'content-type': contentType },
        body,
      });
    try {
      const broken = await postAs('application/json', '{"SAD": ');
      assert.equal(broken.status, 400);
      assert.equal(JSON.parse(broken.body.toString()).error, 'invalid_request');
      const form = await postAs('application/x-www-form-urlencoded', 'SAD=x');
      assert.equal(form.status, 400);
      assert.match(JSON.parse(form.body.toString()).error_description, /Content-Type/);
      const get = await httpRequest(env.qtsp.signDocUrl, { method: 'GET', agent, timeoutMs: 5000 });
      assert.equal(get.status, 405);
    } finally {
      agent.destroy();
    }
  });
});

describe('signDoc reads a body sent with a Content-Length exactly as the same body sent chunked', () => {
  /** POST with a Content-Length, or chunked (no Content-Length: the body ends with its last chunk) */
  function send(
    body: Buffer,
    chunked: boolean,
    contentType = 'application/json',
  ): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
    const agent = new https.Agent({
      ca: readFileSync(env.endpoints.tlsCaFile),
      cert: readFileSync(env.endpoints.rp.certFile),
      key: readFileSync(env.endpoints.rp.keyFile),
    });
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = {
        'content-type': contentType,
        ...(chunked ? {} : { 'content-length': body.length }),
      };
      const req = https.request(env.qtsp.signDocUrl, { method: 'POST', agent, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          agent.destroy();
          resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') });
        });
      });
      req.on('error', reject);
      if (chunked) {
        req.write(body.subarray(0, 1));
        req.end(body.subarray(1));
      } else req.end(body);
    });
  }

  it('same status, content type, cache control and body for good and bad bodies', async () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    const notJson = 'the request body is not valid JSON';
    const noSad = "missing required parameter 'SAD' in the request";
    // the answer to each body as express.json reads it, which src/http/json-body.ts follows
    const bodies: [string, Buffer, string][] = [
      ['not JSON', Buffer.from('{"SAD": '), notJson],
      ['whitespace only', Buffer.from(' \n '), notJson],
      ['a JSON string', Buffer.from('"x"'), notJson],
      ['a JSON number after whitespace', Buffer.from('  42'), notJson],
      ['an array', Buffer.from(JSON.stringify([body('x.y.z')])), 'the request body must be a JSON object'],
      ['an empty object', Buffer.from('{}'), noSad],
      ['a lone BOM', bom, noSad],
      [
        'a BOM and a request with a bad SAD',
        Buffer.concat([bom, Buffer.from(JSON.stringify(body('x.y.z')))]),
        'SAD is not a decodable JWT',
      ],
      [
        'invalid UTF-8 inside a string',
        Buffer.concat([Buffer.from('{"SAD": "'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]),
        "missing required parameter 'credentialID' in the request",
      ],
      [
        'an unknown parameter',
        Buffer.from(JSON.stringify({ ...body('x.y.z'), foo: 1 })),
        "unknown parameter 'foo' in the request",
      ],
    ];
    for (const [what, b, description] of bodies) {
      for (const contentType of ['application/json', 'application/json; charset=utf-8']) {
        const withLength = await send(b, false, contentType);
        const chunked = await send(b, true, contentType);
        assert.equal(withLength.status, chunked.status, what);
        assert.equal(withLength.body, chunked.body, what);
        assert.equal(withLength.headers['content-type'], chunked.headers['content-type'], what);
        assert.equal(withLength.headers['cache-control'], chunked.headers['cache-control'], what);
        assert.ok(withLength.status === 400 || withLength.status === 401, `${what}: ${withLength.status}`);
        assert.equal(withLength.headers['cache-control'], 'no-store', what);
        assert.equal(JSON.parse(withLength.body).error_description, description, what);
      }
    }
  });

  it('a good request signs both ways', async () => {
    for (const chunked of [false, true]) {
      const auth = await authorize([sha256(DOCS[0]!)]);
      const res = await send(Buffer.from(JSON.stringify(body(auth.accessToken, [sha256(DOCS[0]!)]))), chunked);
      assert.equal(res.status, 200, res.body);
      assert.equal(res.headers['cache-control'], 'no-store');
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      assert.match(String(res.headers['x-transaction-id']), /./);
      assert.equal(JSON.parse(res.body).SignatureObject.length, 1);
    }
  });
});

describe('signDoc refuses a SAD that fails a check of spec 5.7 with 401, in the spec order', () => {
  it('garbage instead of a JWT', async () => {
    await expectRefused(body('not-a-jwt'), 401, 'not a signed JWT');
  });
  it('1. iss is not an IDP of the directory', async () => {
    await expectRefused(
      body(await env.sandbox.mintAccessToken(sadClaims({ iss: 'https://unknown-bank.localhost' }))),
      401,
      'not an IDP',
    );
  });
  it('1. iss is an inactive IDP (reported before an expired exp)', async () => {
    env.sandbox.controls.setIdpStatus('inactive');
    await expectRefused(body(await env.sandbox.mintAccessToken(sadClaims({ exp: 1000 }))), 401, 'not an active IDP');
  });
  it('1. iss missing', async () => {
    await expectRefused(body(await env.sandbox.mintAccessToken(sadClaims({ iss: undefined }))), 401, 'no iss');
  });
  it('2. exp in the past (reported before a wrong binding)', async () => {
    const now = Math.floor(Date.now() / 1000);
    await expectRefused(
      body(await env.sandbox.mintAccessToken(sadClaims({ exp: now - 60, cnf: { 'x5t#S256': 'A'.repeat(43) } }))),
      401,
      'expired',
    );
  });
  it('2. iat in the future', async () => {
    await expectRefused(
      body(await env.sandbox.mintAccessToken(sadClaims({ iat: Math.floor(Date.now() / 1000) + 600 }))),
      401,
      'iat is in the future',
    );
  });
  it('2. exp missing', async () => {
    await expectRefused(body(await env.sandbox.mintAccessToken(sadClaims({ exp: undefined }))), 401, 'no numeric exp');
  });
  it('3. bound to another client certificate (reported before a bad signature)', async () => {
    await expectRefused(
      body(await env.sandbox.mintAccessToken(sadClaims({ cnf: { 'x5t#S256': 'A'.repeat(43) } }), { key: 'foreign' })),
      401,
      'bound to another TLS client certificate',
    );
  });
  it('3. a real token presented over another RP certificate', async () => {
    const auth = await authorize();
    const other = await env.sandbox.registerClient({ clientId: 'other-rp', state: 'active' });
    await expectRefused(body(auth.accessToken), 401, 'bound to another TLS client certificate', {
      ...env.endpoints,
      rp: other,
    });
  });
  it('3. no cnf binding', async () => {
    await expectRefused(body(await env.sandbox.mintAccessToken(sadClaims({ cnf: undefined }))), 401, 'no cnf');
  });
  it('4. alg none', async () => {
    await expectRefused(body(unsignedJwt({ alg: 'none', typ: 'JWT' }, sadClaims())), 401, 'must be signed RS256');
  });
  it('4. HS256 with a guessable secret', async () => {
    const token = await new SignJWT(sadClaims())
      .setProtectedHeader({ alg: 'HS256', kid: 'x' })
      .sign(new TextEncoder().encode('secret-secret-secret-secret-32by'));
    await expectRefused(body(token), 401, 'must be signed RS256');
  });
  it('4. ES256 with a key of our own', async () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const token = await new SignJWT(sadClaims()).setProtectedHeader({ alg: 'ES256', kid: 'x' }).sign(privateKey);
    await expectRefused(body(token), 401, 'must be signed RS256');
  });
  it('4. signed by a key the AS does not publish (unknown kid)', async () => {
    await expectRefused(
      body(await env.sandbox.mintAccessToken(sadClaims(), { key: 'foreign', kid: 'not-a-kid-of-the-as' })),
      401,
      'unknown kid',
    );
  });
  it('4. signed by another key under the AS kid', async () => {
    await expectRefused(
      body(await env.sandbox.mintAccessToken(sadClaims(), { key: 'foreign' })),
      401,
      'signature does not verify',
    );
  });
  it('no TLS client certificate at all', async () => {
    const agent = tlsAgent({ ca: readFileSync(env.endpoints.tlsCaFile) });
    try {
      const before = await certificatesIssued();
      const res = await httpRequest(env.qtsp.signDocUrl, {
        method: 'POST',
        agent,
        timeoutMs: 5000,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body((await authorize()).accessToken)),
      });
      assert.equal(res.status, 401);
      assert.match(JSON.parse(res.body.toString()).error_description, /no TLS client certificate/);
      assert.equal(await certificatesIssued(), before);
    } finally {
      agent.destroy();
    }
  });
});

describe('signDoc refuses when introspection or consent fails a check of spec 5.9 with 401', () => {
  const mutations: [string, (p: Record<string, unknown>) => Record<string, unknown>, string][] = [
    ['the AS says the token is not active', () => ({ active: false }), 'not active'],
    ['iss is another issuer', (p) => ({ ...p, iss: 'https://other-bank.localhost' }), 'iss'],
    [
      'aud is another QTSP',
      (p) => ({ ...p, aud: 'sp:sandbox.qtsp.localhost:00000000-0000-4000-8000-000000000000' }),
      'aud',
    ],
    ['exp in the past', (p) => ({ ...p, exp: Math.floor(Date.now() / 1000) - 60 }), 'exp'],
    ['iat in the future', (p) => ({ ...p, iat: Math.floor(Date.now() / 1000) + 600 }), 'iat'],
    [
      'the consent names another QTSP',
      (p) => ({
        ...p,
        authorization_details: signDetail(p, {
          locations: ['sp:sandbox.qtsp.localhost:00000000-0000-4000-8000-000000000000'],
        }),
      }),
      'another QTSP',
    ],
    [
      'two QTSPs in locations',
      (p) => ({ ...p, authorization_details: signDetail(p, { locations: [QTSP_ID, QTSP_ID] }) }),
      'another QTSP',
    ],
    [
      'another credentialID',
      (p) => ({ ...p, authorization_details: signDetail(p, { credentialID: 'other' }) }),
      'credentialID',
    ],
    [
      'another hashAlgorithmOID',
      (p) => ({ ...p, authorization_details: signDetail(p, { hashAlgorithmOID: '2.16.840.1.101.3.4.2.8' }) }),
      'hashAlgorithmOID',
    ],
    ['no sign object', (p) => ({ ...p, authorization_details: [] }), 'type sign'],
    [
      'cnf of another certificate',
      (p) => ({ ...p, cnf: { 'x5t#S256': 'A'.repeat(43) } }),
      'another TLS client certificate',
    ],
    ['an inactive client', (p) => ({ ...p, client_state: 'inactive' }), 'not active (client_state)'],
    ['no txn', (p) => ({ ...p, txn: undefined }), 'no txn'],
  ];
  function signDetail(p: Record<string, unknown>, change: Record<string, unknown>): unknown[] {
    return (p.authorization_details as Record<string, unknown>[]).map((d) =>
      d.type === 'sign' ? { ...d, ...change } : d,
    );
  }
  for (const [name, mutate, text] of mutations) {
    it(name, async () => {
      const auth = await authorize();
      env.sandbox.controls.introspection.mutate = mutate;
      await expectRefused(body(auth.accessToken), 401, text);
    });
  }
  it('the response is signed by a key the AS does not publish', async () => {
    const auth = await authorize();
    env.sandbox.controls.introspection.signingKey = 'foreign';
    await expectRefused(body(auth.accessToken), 401, /introspection response/);
  });
  it('a requested hash is not among the consented ones', async () => {
    const auth = await authorize([sha256(DOCS[0]!)]);
    await expectRefused(
      body(auth.accessToken, [sha256(DOCS[0]!), sha256(DOCS[1]!)]),
      401,
      'hashes[1] is not among the consented',
    );
  });
  it('the request names another hash algorithm than the consent', async () => {
    const hash = sha256(DOCS[0]!);
    const auth = await authorize([hash]);
    await expectRefused(
      {
        ...body(auth.accessToken, [hash]),
        documentDigests: { hashes: [hash], hashAlgorithmOID: '2.16.840.1.101.3.4.2.8' },
      },
      401,
      'hashAlgorithmOID',
    );
  });
  it('a token the AS does not know (forged with its key, never issued)', async () => {
    await expectRefused(body(await env.sandbox.mintAccessToken(sadClaims())), 401, 'not active');
  });
});

describe('signDoc reports AS failures as 502/504', () => {
  it('introspection answers HTTP 500', async () => {
    const auth = await authorize();
    env.sandbox.controls.introspection.mode = 'http500';
    await expectRefused(body(auth.accessToken), 502, 'HTTP 500');
  });
  it('introspection answers garbage', async () => {
    const auth = await authorize();
    env.sandbox.controls.introspection.mode = 'garbage';
    await expectRefused(body(auth.accessToken), 502, /introspection/);
  });
  it('introspection never answers', async () => {
    const auth = await authorize();
    env.sandbox.controls.introspection.mode = 'stall';
    await expectRefused(body(auth.accessToken), 504, 'did not answer within 1500 ms');
  });
});

describe('operations', () => {
  it('health and metrics on the operations listener', async () => {
    const live = await httpRequest(`${env.qtsp.opsUrl}/health/live`, { timeoutMs: 5000 });
    assert.equal(live.status, 200);
    const metrics = await httpRequest(`${env.qtsp.opsUrl}/metrics`, { timeoutMs: 5000 });
    assert.match(metrics.body.toString(), /qtsp_signatures_created_total \d+/);
    assert.match(metrics.body.toString(), /qtsp_signdoc_requests_total\{status="401"\} \d+/);
  });
  it('TLS 1.1 is refused', async () => {
    const agent = tlsAgent({ ca: readFileSync(env.endpoints.tlsCaFile), maxVersion: 'TLSv1.1', minVersion: 'TLSv1' });
    try {
      await assert.rejects(httpRequest(env.qtsp.signDocUrl, { agent, timeoutMs: 5000 }));
    } finally {
      agent.destroy();
    }
  });
});
