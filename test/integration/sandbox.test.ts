/**
 * The sandbox ecosystem over real HTTPS and mutual TLS: the RP flow (service configuration, metadata, PAR,
 * authorization, token), introspection with the QTSP's client certificate, every signing PAR error of spec
 * 7.2, the directories (4.2, 4.6, 2.13) and the misbehaviour switches.
 */
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  jwtVerify,
  type JSONWebKeySet,
  type JWTPayload,
} from 'jose';
import { CONFORMANCE_LEVELS, SIGNATURE_FORMATS } from '../../src/ades/formats.ts';
import { chooseSigning } from '../../src/ades/offer.ts';
import { pkiPaths } from '../../src/ca/material.ts';
import { SHA256 } from '../../src/crypto/algorithms.ts';
import { authorizeSigning, type RpEndpoints } from '../../src/rp/flow.ts';
import {
  ACR_ONLINE_BANKING_SCA,
  DEFAULT_SIGNING_DOCUMENTS,
  DOCUMENTS_CONSENTED_CLAIM,
  type RpRegistration,
  type Sandbox,
} from '../../src/sandbox/index.ts';
import { fromPem, toPem } from '../../src/util/base64.ts';
import { OID } from '../../src/ca/x509.ts';
import { endEntityCertificate } from '../helpers/certificates.ts';
import { httpRequest, jsonBody, type HttpResponse, tlsAgent, type HttpAgent } from '../../src/util/http-client.ts';
import { startTestSandbox, type TestSandbox } from '../helpers/sandbox.ts';

const QTSP_ID = 'sp:sandbox.qtsp.localhost:6f1c4c52-0b0e-4c4e-9d6b-2b9b8f0d7a31';
const SHA256_OID = '2.16.840.1.101.3.4.2.1';
const DOC = Buffer.from('a contract\n');
const sha256 = (data: Uint8Array | string): string => createHash('sha256').update(data).digest('base64');
const DOC_HASH = sha256(DOC);
const DEFAULT_DOC_HASHES = DEFAULT_SIGNING_DOCUMENTS.map((d) => sha256(Buffer.from(d.text, 'utf8')));

let testSandbox: TestSandbox;
let dataDir: string;
let sandbox: Sandbox;
let endpoints: RpEndpoints;
const agents: HttpAgent[] = [];

function agent(files?: { certFile: string; keyFile: string }): HttpAgent {
  const a = tlsAgent({
    ca: readFileSync(sandbox.tlsCaFile),
    ...(files ? { cert: readFileSync(files.certFile), key: readFileSync(files.keyFile) } : {}),
  });
  agents.push(a);
  return a;
}

const rpAgent = (rp: RpRegistration = sandbox.rp) => agent(rp);
const qtspAgent = () => agent({ certFile: pkiPaths(dataDir).clientCert, keyFile: pkiPaths(dataDir).clientKey });
const fingerprint = (certFile: string) =>
  createHash('sha256')
    .update(fromPem(readFileSync(certFile, 'utf8'))[0]!)
    .digest('base64url');

before(async () => {
  testSandbox = await startTestSandbox('qtsp-sandbox-', QTSP_ID);
  ({ dataDir, sandbox } = testSandbox);
  endpoints = {
    serviceConfigurationUrl: sandbox.serviceConfigurationUrl,
    issuer: sandbox.issuer,
    tlsCaFile: sandbox.tlsCaFile,
    rp: sandbox.rp,
  };
});

after(async () => {
  for (const a of agents) a.destroy();
  await testSandbox.close();
});

afterEach(() => {
  sandbox.controls.reset();
});

// ---- small HTTP helpers ----

function json(res: HttpResponse): Record<string, unknown> {
  return (jsonBody(res) ?? {}) as Record<string, unknown>;
}

function assertError(res: HttpResponse, status: number, error: string): void {
  const body = json(res);
  assert.equal(res.status, status, `expected ${status} ${error}, got ${res.status} ${JSON.stringify(body)}`);
  assert.equal(body['error'], error, JSON.stringify(body));
  assert.equal(typeof body['error_description'], 'string');
  assert.doesNotMatch(res.body.toString(), /at .*\.ts:\d+/, 'stack trace in an error');
}

function postForm(
  url: string,
  params: Record<string, string | undefined>,
  a: HttpAgent,
  contentType = 'application/x-www-form-urlencoded',
): Promise<HttpResponse> {
  const form = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) form.append(k, v);
  return httpRequest(url, {
    method: 'POST',
    agent: a,
    timeoutMs: 5000,
    headers: { 'content-type': contentType },
    body: form.toString(),
  });
}

function get(url: string, a: HttpAgent = agent()): Promise<HttpResponse> {
  return httpRequest(url, { agent: a, timeoutMs: 5000 });
}

// ---- PAR, authorization, token by hand ----

const VERIFIER = 'v'.repeat(43);
const CHALLENGE = createHash('sha256').update(VERIFIER).digest('base64url');

function signObject(change: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    type: 'sign',
    locations: [QTSP_ID],
    credentialID: 'qes_eidas',
    documentDigests: [{ hash: DOC_HASH, label: 'contract.pdf' }],
    hashAlgorithmOID: SHA256_OID,
    ...change,
  };
}

function parParams(
  change: Record<string, string | undefined> = {},
  rp: RpRegistration = sandbox.rp,
): Record<string, string | undefined> {
  return {
    response_type: 'code',
    client_id: rp.clientId,
    redirect_uri: rp.redirectUri,
    code_challenge: CHALLENGE,
    code_challenge_method: 'S256',
    state: 'state-1',
    authorization_details: JSON.stringify([signObject()]),
    // headless consent: the redirect at once, as the bank's page is tested in bank-consent.test.ts
    sandbox_consent: 'auto',
    ...change,
  };
}

const details = (...objects: unknown[]) => ({ authorization_details: JSON.stringify(objects) });

function par(params: Record<string, string | undefined>, a: HttpAgent = rpAgent()): Promise<HttpResponse> {
  return postForm(`${sandbox.issuer}/par`, params, a);
}

async function pushed(
  params: Record<string, string | undefined> = parParams(),
  rp: RpRegistration = sandbox.rp,
): Promise<string> {
  const res = await par(params, rpAgent(rp));
  assert.equal(res.status, 201, res.body.toString());
  return json(res)['request_uri'] as string;
}

function authorizeUrl(query: Record<string, string>): string {
  return `${sandbox.issuer}/authorize?${new URLSearchParams(query).toString()}`;
}

async function callback(requestUri: string, rp: RpRegistration = sandbox.rp): Promise<URLSearchParams> {
  const res = await get(authorizeUrl({ client_id: rp.clientId, request_uri: requestUri }));
  assert.equal(res.status, 302, res.body.toString());
  const location = new URL(String(res.headers.location));
  assert.equal(`${location.origin}${location.pathname}`, rp.redirectUri);
  return location.searchParams;
}

async function code(params?: Record<string, string | undefined>, rp: RpRegistration = sandbox.rp): Promise<string> {
  const cb = await callback(await pushed(params ?? parParams({}, rp), rp), rp);
  assert.equal(cb.get('error'), null, cb.get('error_description') ?? '');
  return cb.get('code')!;
}

function token(
  c: string,
  change: Record<string, string | undefined> = {},
  a: HttpAgent = rpAgent(),
  rp: RpRegistration = sandbox.rp,
): Promise<HttpResponse> {
  return postForm(
    `${sandbox.issuer}/token`,
    {
      grant_type: 'authorization_code',
      code: c,
      client_id: rp.clientId,
      redirect_uri: rp.redirectUri,
      code_verifier: VERIFIER,
      ...change,
    },
    a,
  );
}

// ---- introspection ----

function introspect(tokenValue: string, a: HttpAgent = qtspAgent(), clientId = QTSP_ID): Promise<HttpResponse> {
  return postForm(`${sandbox.issuer}/introspect`, { client_id: clientId, token: tokenValue }, a);
}

async function jwks(): Promise<JSONWebKeySet> {
  return json(await get(`${sandbox.issuer}/jwks`)) as unknown as JSONWebKeySet;
}

/** Verifies an introspection response as the QTSP does: RS256 against the AS JWKS, iss, aud. */
async function verifiedIntrospection(res: HttpResponse): Promise<JWTPayload> {
  assert.equal(res.status, 200, res.body.toString());
  assert.match(String(res.headers['content-type']), /^application\/jwt/);
  const jwt = res.body.toString();
  const { payload, protectedHeader } = await jwtVerify(jwt, createLocalJWKSet(await jwks()), { algorithms: ['RS256'] });
  assert.equal(protectedHeader.typ, 'token-introspection+jwt');
  assert.equal(typeof protectedHeader.kid, 'string');
  return payload;
}

async function introspected(tokenValue: string): Promise<JWTPayload> {
  return verifiedIntrospection(await introspect(tokenValue));
}

async function signFlow(claims?: Record<string, null | { essential: true }>, rp: RpRegistration = sandbox.rp) {
  return authorizeSigning(
    { ...endpoints, rp },
    {
      documentDigests: [{ hash: DOC_HASH, label: 'contract.pdf' }],
      hashAlgorithmOID: SHA256_OID,
      ...(claims ? { identityAssuranceClaims: claims } : {}),
    },
  );
}

const claimsOf = (p: JWTPayload) => (p['verified_claims'] as { claims: Record<string, unknown> }).claims;

describe('the RP flow and introspection (happy path)', () => {
  it('authorizeSigning runs every step; the QTSP introspects a signed, complete answer', async () => {
    const steps: string[] = [];
    const auth = await authorizeSigning(endpoints, {
      documentDigests: [{ hash: DOC_HASH, label: 'contract.pdf' }],
      hashAlgorithmOID: SHA256_OID,
      onStep: (m) => steps.push(m),
    });
    assert.equal(steps.length, 5);
    assert.ok(steps.some((s) => s.startsWith('PAR: request_uri received')));
    assert.ok(!steps.join('\n').includes(auth.accessToken), 'the token was reported as a step');
    assert.deepEqual(auth.qtsp, { qtsp_id: QTSP_ID, signDoc: 'https://127.0.0.1:8440/signDoc' });
    assert.deepEqual(auth.authorizationDetails, [signObject()]);

    // spec 2.10: RS256, kid, iss, cnf of the RP certificate, iat, exp, jti, no personal data
    const header = decodeProtectedHeader(auth.accessToken);
    assert.equal(header.alg, 'RS256');
    assert.ok((await jwks()).keys.some((k) => k.kid === header.kid));
    const at = decodeJwt(auth.accessToken);
    assert.deepEqual(Object.keys(at).sort(), ['cnf', 'exp', 'iat', 'iss', 'jti']);
    assert.equal(at.iss, sandbox.issuer);
    assert.deepEqual(at['cnf'], { 'x5t#S256': fingerprint(sandbox.rp.certFile) });

    const p = await introspected(auth.accessToken);
    assert.equal(p['active'], true);
    assert.equal(p.iss, sandbox.issuer);
    assert.equal(p.aud, QTSP_ID);
    assert.equal(p.exp, at.exp);
    assert.ok(typeof p.iat === 'number' && p.iat <= Math.floor(Date.now() / 1000));
    assert.equal(p.sub, 'user-4711');
    assert.equal(p['client_id'], sandbox.rp.clientId);
    assert.equal(p['client_state'], 'active');
    assert.deepEqual(p['cnf'], at['cnf']);
    assert.equal(p['acr'], ACR_ONLINE_BANKING_SCA);
    assert.equal(typeof p['txn'], 'string');
    assert.notEqual(p['txn'], at.jti);
    assert.deepEqual(p['authorization_details'], [signObject()]);
    assert.deepEqual(p[DOCUMENTS_CONSENTED_CLAIM], {
      policy_uri: 'https://qtsp.sandbox.localhost/policy/v1.0/',
      tos_uri: 'https://qtsp.sandbox.localhost/tos/v1.0/',
    });
    const vc = p['verified_claims'] as { verification: { trust_framework: string; evidence: { type: string }[] } };
    assert.equal(vc.verification.trust_framework, 'de_aml');
    assert.equal(vc.verification.evidence[0]!.type, 'electronic_record');
    assert.deepEqual(claimsOf(p), {
      given_name: 'Erika',
      family_name: 'Mustermann',
      birthdate: '1964-08-12',
      place_of_birth: { locality: 'Berlin', country: 'DE' },
    });
  });

  it('QESID: the requested identity claims appear in the introspection', async () => {
    const auth = await signFlow({ nationalities: null, address: { essential: true } });
    const claims = claimsOf(await introspected(auth.accessToken));
    assert.deepEqual(claims['nationalities'], ['DE']);
    assert.deepEqual(claims['address'], {
      street_address: 'Heidestraße 17',
      locality: 'Köln',
      postal_code: '51147',
      country: 'DE',
    });
    assert.equal(claims['given_name'], 'Erika');
  });

  it('QID: a default document with an empty label and identity_assurance_claims', async () => {
    const c = await code(
      parParams(
        details(
          signObject({
            documentDigests: [
              { hash: DEFAULT_DOC_HASHES[1]!, label: '' },
              { hash: DOC_HASH, label: 'contract.pdf' },
            ],
            identity_assurance_claims: { birthdate: null },
          }),
        ),
      ),
    );
    const res = await token(c);
    assert.equal(res.status, 200, res.body.toString());
    const p = await introspected(json(res)['access_token'] as string);
    assert.equal(claimsOf(p)['birthdate'], '1964-08-12');
  });

  it('a non-essential claim the user lacks is omitted; a missing essential one ends the authorization with an error', async () => {
    const thin = await code(
      parParams({
        login_hint: 'user-0815',
        ...details(signObject({ identity_assurance_claims: { nationalities: null } })),
      }),
    );
    const p = await introspected(json(await token(thin))['access_token'] as string);
    assert.equal(p.sub, 'user-0815');
    assert.deepEqual(Object.keys(claimsOf(p)).sort(), ['birthdate', 'family_name', 'given_name']);

    const cb = await callback(
      await pushed(
        parParams({
          login_hint: 'user-0815',
          ...details(signObject({ identity_assurance_claims: { address: { essential: true } } })),
        }),
      ),
    );
    assert.equal(cb.get('error'), 'unable_to_meet_service_requirements');
    assert.equal(cb.get('iss'), sandbox.issuer);
    assert.equal(cb.get('state'), 'state-1');
    assert.equal(cb.get('code'), null);
  });

  it('nonce instead of PKCE (usePkce false)', async () => {
    const auth = await authorizeSigning(endpoints, {
      documentDigests: [{ hash: DOC_HASH, label: 'x' }],
      hashAlgorithmOID: SHA256_OID,
      usePkce: false,
    });
    assert.equal((await introspected(auth.accessToken))['active'], true);
  });

  it('a demo client is served with client_state demo', async () => {
    const demo = await sandbox.registerClient({ clientId: 'demo-rp', state: 'demo' });
    const auth = await signFlow(undefined, demo);
    assert.equal((await introspected(auth.accessToken))['client_state'], 'demo');
  });
});

describe('introspection refuses (spec 5.8, 7.5)', () => {
  it('401 without a client certificate, with the RP certificate, with another client_id', async () => {
    const auth = await signFlow();
    assertError(await introspect(auth.accessToken, agent()), 401, 'invalid_client');
    assertError(await introspect(auth.accessToken, rpAgent()), 401, 'invalid_client');
    assertError(await introspect(auth.accessToken, qtspAgent(), sandbox.rp.clientId), 401, 'invalid_client');
  });

  it('an unknown token, a forged one and one of an inactive RP: a signed {active: false} only', async () => {
    assert.deepEqual(await introspected('not-a-token'), { active: false });
    const now = Math.floor(Date.now() / 1000);
    const forged = {
      iss: sandbox.issuer,
      iat: now,
      exp: now + 60,
      jti: 'never-issued',
      cnf: { 'x5t#S256': fingerprint(sandbox.rp.certFile) },
    };
    assert.deepEqual(await introspected(await sandbox.mintAccessToken(forged)), { active: false });
    const auth = await signFlow();
    const real = decodeJwt(auth.accessToken);
    assert.deepEqual(await introspected(await sandbox.mintAccessToken({ ...real }, { key: 'foreign' })), {
      active: false,
    });
    assert.deepEqual(await introspected(await sandbox.mintAccessToken({ ...real, exp: now - 1 })), { active: false });
    const shortLived = await sandbox.registerClient({ clientId: 'soon-inactive-rp', state: 'active' });
    const token2 = (await signFlow(undefined, shortLived)).accessToken;
    await sandbox.registerClient({ clientId: 'soon-inactive-rp', state: 'inactive' });
    assert.deepEqual(await introspected(token2), { active: false });
  });
});

describe('PAR refuses (spec 2.4, 2.7, 7.2)', () => {
  const docs = (...d: unknown[]) => details(signObject({ documentDigests: d }));
  const cases: [string, () => Record<string, string | undefined>, number, string][] = [
    [
      'missing PKCE and nonce',
      () => parParams({ code_challenge: undefined, code_challenge_method: undefined }),
      400,
      'invalid_request',
    ],
    ['code_challenge_method plain', () => parParams({ code_challenge_method: 'plain' }), 400, 'invalid_request'],
    ['response_type token', () => parParams({ response_type: 'token' }), 400, 'invalid_request'],
    [
      'an unregistered redirect_uri',
      () => parParams({ redirect_uri: 'https://evil.example/callback' }),
      400,
      'invalid_request',
    ],
    [
      'authorization_details that are not JSON',
      () => parParams({ authorization_details: '[{' }),
      400,
      'invalid_request',
    ],
    ['two sign objects', () => parParams(details(signObject(), signObject())), 400, 'invalid_request'],
    [
      'a type the AS does not serve',
      () => parParams(details(signObject(), { type: 'payment_initiation' })),
      400,
      'invalid_authorization_details',
    ],
    [
      'a location that is no QTSP',
      () =>
        parParams(
          details(signObject({ locations: ['sp:sandbox.qtsp.localhost:00000000-0000-4000-8000-000000000000'] })),
        ),
      400,
      'invalid_request',
    ],
    ['two locations', () => parParams(details(signObject({ locations: [QTSP_ID, QTSP_ID] }))), 400, 'invalid_request'],
    [
      'a missing credentialID',
      () => parParams(details(signObject({ credentialID: undefined }))),
      400,
      'invalid_request',
    ],
    [
      'a wrong credentialID',
      () => parParams(details(signObject({ credentialID: 'qes_other' }))),
      400,
      'invalid_authorization_details',
    ],
    ['empty documentDigests', () => parParams(docs()), 400, 'invalid_request'],
    [
      'a hex hash',
      () => parParams(docs({ hash: createHash('sha256').update(DOC).digest('hex'), label: 'x' })),
      400,
      'invalid_authorization_details',
    ],
    [
      'a URL-safe Base64 hash',
      () => parParams(docs({ hash: Buffer.alloc(32, 0xfb).toString('base64url'), label: 'x' })),
      400,
      'invalid_authorization_details',
    ],
    [
      'Base64 of a hex string',
      () =>
        parParams(
          docs({ hash: Buffer.from(createHash('sha256').update(DOC).digest('hex')).toString('base64'), label: 'x' }),
        ),
      400,
      'invalid_authorization_details',
    ],
    [
      'a hash of the wrong length',
      () => parParams(docs({ hash: Buffer.alloc(48, 1).toString('base64'), label: 'x' })),
      400,
      'invalid_authorization_details',
    ],
    [
      'an unknown hash OID',
      () => parParams(details(signObject({ hashAlgorithmOID: '1.3.14.3.2.26' }))),
      400,
      'invalid_authorization_details',
    ],
    ['a missing label', () => parParams(docs({ hash: DOC_HASH })), 400, 'invalid_authorization_details'],
    [
      'the same document twice (signDoc would refuse the second)',
      () => parParams(docs({ hash: DOC_HASH, label: 'Vertrag' }, { hash: DOC_HASH, label: 'Vertrag, again' })),
      400,
      'invalid_authorization_details',
    ],
    [
      'an empty label of a custom document',
      () => parParams(docs({ hash: DOC_HASH, label: '' })),
      400,
      'invalid_authorization_details',
    ],
    [
      'two default documents',
      () =>
        parParams(
          details(
            signObject({
              documentDigests: DEFAULT_DOC_HASHES.map((hash) => ({ hash, label: '' })),
              identity_assurance_claims: { birthdate: null },
            }),
          ),
        ),
      400,
      'invalid_authorization_details',
    ],
    [
      'a default document without identity_assurance_claims',
      () => parParams(docs({ hash: DEFAULT_DOC_HASHES[0]!, label: '' })),
      400,
      'invalid_authorization_details',
    ],
    [
      'a default document with a label',
      () =>
        parParams(
          details(
            signObject({
              documentDigests: [{ hash: DEFAULT_DOC_HASHES[0]!, label: 'Bestätigung' }],
              identity_assurance_claims: {},
            }),
          ),
        ),
      400,
      'invalid_authorization_details',
    ],
    [
      'a claim the QTSP does not support',
      () => parParams(details(signObject({ identity_assurance_claims: { email: null } }))),
      400,
      'unable_to_meet_service_requirements',
    ],
    [
      'identity_assurance_claims that are not a map',
      () => parParams(details(signObject({ identity_assurance_claims: ['address'] }))),
      400,
      'invalid_authorization_details',
    ],
  ];
  for (const [name, make, status, error] of cases) {
    it(name, async () => {
      assertError(await par(make()), status, error);
    });
  }

  it('a wrong content type: 415', async () => {
    const res = await httpRequest(`${sandbox.issuer}/par`, {
      method: 'POST',
      agent: rpAgent(),
      timeoutMs: 5000,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(parParams()),
    });
    assertError(res, 415, 'invalid_request');
  });

  it('client authentication: no certificate, another certificate, unknown client: 401', async () => {
    assertError(await par(parParams(), agent()), 401, 'invalid_client');
    const other = await sandbox.registerClient({ clientId: 'other-rp', state: 'active' });
    assertError(await par(parParams(), rpAgent(other)), 401, 'invalid_client');
    assertError(await par(parParams({ client_id: 'nobody' })), 401, 'invalid_client');
  });

  it('a registered certificate past its notAfter, or before its notBefore: 401, its client served again once current', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const keyFile = join(dataDir, 'dated-rp.key');
    writeFileSync(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const dated = async (validHours: number, hoursAhead = 0) => {
      const der = endEntityCertificate({
        commonName: 'dated-rp',
        publicKey,
        selfSignKey: privateKey,
        validHours,
        keyUsage: ['digitalSignature'],
        extKeyUsage: [OID.clientAuth],
        fromHours: hoursAhead || -1,
      });
      const certFile = join(dataDir, `dated-rp-${validHours}-${hoursAhead}.pem`);
      writeFileSync(certFile, toPem(der, 'CERTIFICATE'));
      return sandbox.registerClient({ clientId: 'dated-rp', state: 'active', certFile, keyFile });
    };
    for (const [validHours, fromHours] of [[-0.5], [48, 24]] as const) {
      const rp = await dated(validHours, fromHours);
      const res = await par(parParams({}, rp), rpAgent(rp));
      assertError(res, 401, 'invalid_client');
      assert.match(String(json(res)['error_description']), /outside its validity period/);
    }
    const current = await dated(1);
    assert.equal((await par(parParams({}, current), rpAgent(current))).status, 201);
  });

  it('an inactive RP, an RP without type sign: access_denied', async () => {
    const inactive = await sandbox.registerClient({ clientId: 'inactive-rp', state: 'inactive' });
    assertError(await par(parParams({}, inactive), rpAgent(inactive)), 400, 'access_denied');
    const ais = await sandbox.registerClient({
      clientId: 'ais-only-rp',
      state: 'active',
      allowedTypes: ['account_information'],
    });
    assertError(await par(parParams({}, ais), rpAgent(ais)), 400, 'access_denied');
  });

  it('spec 7.4: claims outside allowed_claims_qes', async () => {
    const narrow = await sandbox.registerClient({
      clientId: 'narrow-rp',
      state: 'active',
      allowedClaimsQes: ['given_name', 'family_name'],
    });
    const withClaims = (c: Record<string, unknown>) =>
      parParams(details(signObject({ identity_assurance_claims: c })), narrow);
    assertError(await par(withClaims({ address: null }), rpAgent(narrow)), 400, 'unable_to_meet_service_requirements');
    assertError(
      await par(withClaims({ nationalities: { essential: true } }), rpAgent(narrow)),
      400,
      'unable_to_meet_service_requirements',
    );
    assert.equal((await par(withClaims({ given_name: { essential: true } }), rpAgent(narrow))).status, 201);
  });

  it('a parameter sent twice', async () => {
    const body = `${new URLSearchParams(parParams() as Record<string, string>).toString()}&state=again`;
    const res = await httpRequest(`${sandbox.issuer}/par`, {
      method: 'POST',
      agent: rpAgent(),
      timeoutMs: 5000,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body,
    });
    assertError(res, 400, 'invalid_request');
  });

  it('success: 201, request_uri URN, expires_in 60, no-store', async () => {
    const res = await par(parParams());
    assert.equal(res.status, 201);
    assert.match(String(json(res)['request_uri']), /^urn:ietf:params:oauth:request_uri:[A-Za-z0-9_-]{43}$/);
    assert.equal(json(res)['expires_in'], 60);
    assert.equal(res.headers['cache-control'], 'no-cache, no-store');
  });
});

describe('authorization endpoint (spec 4.3, 3)', () => {
  it('rejects a traditional (non-PAR) request with 400 JSON', async () => {
    const res = await get(
      authorizeUrl({
        response_type: 'code',
        client_id: sandbox.rp.clientId,
        redirect_uri: sandbox.rp.redirectUri,
        code_challenge: CHALLENGE,
        code_challenge_method: 'S256',
      }),
    );
    assertError(res, 400, 'invalid_request');
    assertError(await get(authorizeUrl({ client_id: sandbox.rp.clientId })), 400, 'invalid_request');
  });

  it('rejects inline parameters next to request_uri, a used request_uri and one of another client', async () => {
    const uri = await pushed();
    assertError(
      await get(authorizeUrl({ client_id: sandbox.rp.clientId, request_uri: uri, scope: 'openid' })),
      400,
      'invalid_request',
    );
    assertError(await get(authorizeUrl({ client_id: 'demo-rp', request_uri: uri })), 400, 'invalid_request');
    await callback(uri);
    assertError(await get(authorizeUrl({ client_id: sandbox.rp.clientId, request_uri: uri })), 400, 'invalid_request');
  });

  it('sandbox_consent accepts only auto; without it the bank answers its HTML page', async () => {
    assertError(await par(parParams({ sandbox_consent: 'yes' })), 400, 'invalid_request');
    const uri = await pushed(parParams({ sandbox_consent: undefined }));
    const res = await get(authorizeUrl({ client_id: sandbox.rp.clientId, request_uri: uri }));
    assert.equal(res.status, 200, res.body.toString());
    assert.match(String(res.headers['content-type']), /^text\/html/);
    assert.match(String(res.headers['content-security-policy']), /form-action 'self'/);
    assert.match(res.body.toString(), /name="consent_id"/);
    assert.match(res.body.toString(), /contract\.pdf/);
    // the request_uri was used by showing the page (spec 3: single use)
    assertError(await get(authorizeUrl({ client_id: sandbox.rp.clientId, request_uri: uri })), 400, 'invalid_request');
  });

  it('redirects with code and iss, and with state only when one was sent', async () => {
    const cb = await callback(await pushed(parParams({ state: undefined })));
    assert.ok(cb.get('code'));
    assert.equal(cb.get('iss'), sandbox.issuer);
    assert.equal(cb.has('state'), false);
  });
});

describe('token endpoint (spec 2.9, 5.4)', () => {
  it('a wrong code_verifier or redirect_uri is invalid_grant and leaves the code usable', async () => {
    const c = await code();
    assertError(await token(c, { code_verifier: 'w'.repeat(43) }), 400, 'invalid_grant');
    assertError(await token(c, { redirect_uri: 'https://rp.sandbox.localhost/elsewhere' }), 400, 'invalid_grant');
    assert.equal((await token(c)).status, 200);
  });

  it('another client certificate for the same client_id is invalid_client; the code survives', async () => {
    const c = await code();
    const other = await sandbox.registerClient({ clientId: 'other-rp', state: 'active' });
    assertError(await token(c, {}, rpAgent(other)), 401, 'invalid_client');
    assertError(await token(c, {}, agent()), 401, 'invalid_client');
    assert.equal((await token(c)).status, 200);
  });

  it('a code of another client, another redirect_uri, a missing verifier, a reused code', async () => {
    const other = await sandbox.registerClient({ clientId: 'other-rp', state: 'active' });
    assertError(await token(await code(), {}, rpAgent(other), other), 400, 'invalid_grant');
    assertError(
      await token(await code(), { redirect_uri: 'https://rp.sandbox.localhost/elsewhere' }),
      400,
      'invalid_grant',
    );
    assertError(await token(await code(), { code_verifier: undefined }), 400, 'invalid_grant');
    assertError(await token(await code(), { grant_type: 'client_credentials' }), 400, 'unsupported_grant_type');
    const c = await code();
    const ok = await token(c);
    assert.equal(ok.status, 200);
    assert.match(String(ok.headers['content-type']), /^application\/json/);
    assert.equal(json(ok)['token_type'], 'bearer');
    assertError(await token(c), 400, 'invalid_grant');
  });

  it('another client learns nothing of a code: a live one of another client reads as an unknown one', async () => {
    const other = await sandbox.registerClient({ clientId: 'other-rp', state: 'active' });
    const live = await token(await code(), {}, rpAgent(other), other);
    const unknown = await token('unknown-code-'.padEnd(43, 'x'), {}, rpAgent(other), other);
    assertError(live, 400, 'invalid_grant');
    assertError(unknown, 400, 'invalid_grant');
    assert.equal(json(live)['error_description'], json(unknown)['error_description']);
  });
});

describe('platform directories (spec 4.2, 4.6, 2.13)', () => {
  it('key archive: a path out of the repository root, or not a path, is refused with a body, never a 500', async () => {
    const root = `${sandbox.platformUrl}/key-archive`;
    const refs = '/info/refs?service=git-upload-pack';
    for (const path of ['/..%2F..%2Fetc', '/%2e%2e%2fkeys', '/x/..%2F..%2F..%2Ftmp', '/%E0%A4%A', '/.%2Fkeys.git']) {
      const res = await get(`${root}${path}${refs}`);
      assert.equal(res.status, 403, path);
      assert.match(res.body.toString(), /read-only over upload-pack/, path);
    }
    for (const path of ['/a%5C..%5Cb', '/nothing-here.git']) {
      const res = await get(`${root}${path}${refs}`);
      assert.ok(res.status >= 400 && res.status < 500, `${path}: ${res.status}`);
    }
    const served = await get(`${sandbox.keyArchiveUrl}${refs}`);
    assert.equal(served.status, 200);
  });

  const idpUrl = (iss: string) => `${sandbox.idpDirectoryUrl}?iss=${encodeURIComponent(iss)}`;
  const configUrl = (iss: string) => `${sandbox.serviceConfigurationUrl}?iss=${encodeURIComponent(iss)}`;

  it('IDP directory: active, inactive, unknown, missing iss', async () => {
    const active = await get(idpUrl(sandbox.issuer));
    assert.equal(active.status, 200);
    assert.equal(json(active)['status'], 'active');
    assert.equal(json(active)['notification_email'], 'notify@bank.sandbox.localhost');
    sandbox.controls.setIdpStatus('inactive');
    assert.equal(json(await get(idpUrl(sandbox.issuer)))['status'], 'inactive');
    assertError(await get(idpUrl('https://unknown-bank.localhost')), 404, 'not_found');
    assertError(await get(`${sandbox.idpDirectoryUrl}?iss=`), 400, 'invalid_request');
    // without iss: the whole list (what the QTSP pulls periodically)
    const list = jsonBody(await get(sandbox.idpDirectoryUrl)) as Record<string, unknown>[];
    assert.deepEqual(
      list.map((r) => [r['iss'], r['status']]),
      [
        [sandbox.issuer, 'inactive'],
        [sandbox.banks[1]!.issuer, 'active'],
      ],
    );
  });

  it('service configuration: 200, 400, 404, 423', async () => {
    const ok = json(await get(configUrl(sandbox.issuer)));
    assert.deepEqual(ok['identity'], { iss: sandbox.issuer });
    const [entry] = ok['remote_signature_creation'] as Record<string, unknown>[];
    assert.equal(entry!['qtsp_id'], QTSP_ID);
    assert.deepEqual(entry!['default_signing_documents'], DEFAULT_SIGNING_DOCUMENTS);
    assertError(await get(configUrl('not a url')), 400, 'invalid_request');
    assertError(await get(sandbox.serviceConfigurationUrl), 400, 'invalid_request');
    assertError(await get(configUrl('https://unknown-bank.localhost')), 404, 'not_found');
    sandbox.controls.setIdpStatus('inactive');
    assertError(await get(configUrl(sandbox.issuer)), 423, 'issuer_inactive');
  });

  it('SP directory: our QTSP record with its client certificate', async () => {
    const [record] = jsonBody(await get(sandbox.spDirectoryUrl)) as Record<string, unknown>[];
    assert.equal(record!['client_id'], QTSP_ID);
    assert.equal(record!['status'], 'active');
    assert.equal(record!['token_endpoint_auth_method'], 'self_signed_tls_client_auth');
    const key = (record!['jwks'] as { keys: { kty: string; x5c: string[] }[] }).keys[0]!;
    assert.equal(key.kty, 'EC');
    assert.equal(key.x5c[0], fromPem(readFileSync(pkiPaths(dataDir).clientCert, 'utf8'))[0]!.toString('base64'));
  });

  it('our QTSP record advertises exactly the levels signDoc accepts for some format', async () => {
    const [record] = jsonBody(await get(sandbox.spDirectoryUrl)) as Record<string, unknown>[];
    const accepts = (format: (typeof SIGNATURE_FORMATS)[number], level: (typeof CONFORMANCE_LEVELS)[number]) => {
      try {
        chooseSigning(format, level, SHA256, undefined, undefined, 'ECDSA-P256');
        return true;
      } catch {
        return false;
      }
    };
    const accepted = CONFORMANCE_LEVELS.filter((level) => SIGNATURE_FORMATS.some((f) => accepts(f, level)));
    assert.ok(accepted.includes('AdES-B-LTA'), 'CAdES is offered at B-LTA');
    assert.deepEqual(record!['conformance_levels_supported'], accepted);
  });

  it('AS metadata and endpoints.json', async () => {
    const md = json(await get(`${sandbox.issuer}/.well-known/oauth-authorization-server`));
    assert.equal(md['issuer'], sandbox.issuer);
    assert.deepEqual(md['authorization_data_types_supported'], ['sign']);
    assert.equal(md['introspection_endpoint'], `${sandbox.issuer}/introspect`);
    const file = JSON.parse(readFileSync(join(dataDir, 'sandbox', 'endpoints.json'), 'utf8'));
    assert.equal(file.issuer, sandbox.issuer);
    assert.equal(file.rp.clientId, sandbox.rp.clientId);
    assert.ok(
      existsSync(file.tlsCaFile) && existsSync(sandbox.qtspServerCertFile) && existsSync(sandbox.qtspServerKeyFile),
    );
  });

  it('refuses TLS below 1.2', async () => {
    const old = tlsAgent({ ca: readFileSync(sandbox.tlsCaFile), maxVersion: 'TLSv1.1', minVersion: 'TLSv1' });
    agents.push(old);
    await assert.rejects(get(`${sandbox.issuer}/jwks`, old));
  });
});

describe('misbehaviour switches', () => {
  it('introspection: http500, garbage, unsigned, foreign key, mutate', async () => {
    const { accessToken } = await signFlow();
    sandbox.controls.introspection.mode = 'http500';
    assertError(await introspect(accessToken), 500, 'server_error');
    sandbox.controls.introspection.mode = 'garbage';
    const garbage = await introspect(accessToken);
    assert.equal(garbage.status, 200);
    assert.throws(() => decodeJwt(garbage.body.toString()));
    sandbox.controls.introspection.mode = 'unsigned';
    const unsigned = (await introspect(accessToken)).body.toString();
    assert.equal(decodeProtectedHeader(unsigned).alg, 'none');
    assert.equal(decodeJwt(unsigned)['active'], true);
    sandbox.controls.introspection.mode = 'normal';
    sandbox.controls.introspection.signingKey = 'foreign';
    await assert.rejects(verifiedIntrospection(await introspect(accessToken)), /signature/);
    sandbox.controls.introspection.signingKey = 'as';
    sandbox.controls.introspection.mutate = (p) => ({ ...p, aud: 'someone-else' });
    assert.equal((await introspected(accessToken)).aud, 'someone-else');
  });

  it('introspection stall never answers', async () => {
    const { accessToken } = await signFlow();
    sandbox.controls.introspection.mode = 'stall';
    await assert.rejects(
      httpRequest(`${sandbox.issuer}/introspect`, {
        method: 'POST',
        agent: qtspAgent(),
        timeoutMs: 300,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ client_id: QTSP_ID, token: accessToken }).toString(),
      }),
      /within 300 ms/,
    );
  });

  it('key rotation keeps the old key published unless told; JWKS http500', async () => {
    const before = (await jwks()).keys.map((k) => k.kid);
    const kid = await sandbox.controls.rotateAsKey();
    const after = (await jwks()).keys.map((k) => k.kid);
    assert.deepEqual(after, [...before, kid]);
    const { accessToken } = await signFlow();
    assert.equal(decodeProtectedHeader(accessToken).kid, kid);
    assert.equal((await introspected(accessToken))['active'], true);
    const only = await sandbox.controls.rotateAsKey({ keepOld: false });
    assert.deepEqual(
      (await jwks()).keys.map((k) => k.kid),
      [only],
    );
    assert.deepEqual(await introspected(accessToken), { active: false }, 'a token of an unpublished key is not active');
    sandbox.controls.jwks.mode = 'http500';
    assert.equal((await get(`${sandbox.issuer}/jwks`)).status, 500);
  });
});
