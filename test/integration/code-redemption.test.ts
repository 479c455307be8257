/**
 * Redeeming an authorization code at the bank's token endpoint, with the QTSP behind it (RFC 6749 sections
 * 4.1.2 and 4.1.3, spec 5.4): another registered RP's attempt leaves the code usable by the RP it was issued
 * to, and a code redeemed twice revokes the access token issued with it, so introspection answers inactive
 * and signDoc refuses it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { decodeJwt } from 'jose';
import { pkiPaths } from '../../src/ca/material.ts';
import { callSignDoc, signDocRequest } from '../../src/rp/flow.ts';
import { FORM_HEADERS, formBody, rpAgent } from '../../src/rp/http.ts';
import { createPkce, randomValue, type Pkce } from '../../src/rp/pkce.ts';
import type { RpRegistration } from '../../src/sandbox/index.ts';
import { httpRequest, jsonBody, type HttpResponse, tlsAgent } from '../../src/util/http-client.ts';
import { startEnvironment, QTSP_ID, SHA256_OID, type TestEnvironment } from '../helpers/environment.ts';
import { opensslCmsVerify } from '../helpers/openssl.ts';

const DOC = Buffer.from('a contract whose code two relying parties hold\n');
const HASH = createHash('sha256').update(DOC).digest('base64');

let env: TestEnvironment;
/** RP A, the default RP of the sandbox: the code is issued to it */
let rpA: RpRegistration;
/** RP B, registered at the platform with its own client certificate */
let rpB: RpRegistration;

before(async () => {
  env = await startEnvironment();
  rpA = env.sandbox.rp;
  rpB = await env.sandbox.registerClient({ clientId: 'rp-b', state: 'active' });
});
after(async () => {
  await env?.close();
});

/** A form post over mutual TLS with the RP's (or the QTSP's) client certificate. */
async function postForm(
  url: string,
  tls: { certFile: string; keyFile: string },
  params: Record<string, string | undefined>,
): Promise<HttpResponse> {
  const agent = rpAgent({ tlsCaFile: env.sandbox.tlsCaFile, rp: tls });
  try {
    return await httpRequest(url, {
      method: 'POST',
      agent,
      timeoutMs: 10_000,
      headers: FORM_HEADERS,
      body: formBody(params),
    });
  } finally {
    agent.destroy();
  }
}

/** PAR (headless consent) and the authorization redirect for RP A: a code not yet redeemed, and its verifier. */
async function codeForA(): Promise<{ code: string; pkce: Pkce }> {
  const pkce = createPkce();
  const par = await postForm(`${env.sandbox.issuer}/par`, rpA, {
    response_type: 'code',
    client_id: rpA.clientId,
    redirect_uri: rpA.redirectUri,
    code_challenge: pkce.challenge,
    code_challenge_method: 'S256',
    state: randomValue(),
    authorization_details: JSON.stringify([
      {
        type: 'sign',
        locations: [QTSP_ID],
        credentialID: 'qes_eidas',
        documentDigests: [{ hash: HASH, label: 'contract' }],
        hashAlgorithmOID: SHA256_OID,
      },
    ]),
    sandbox_consent: 'auto',
  });
  assert.equal(par.status, 201, par.body.toString());
  const requestUri = (jsonBody(par) as { request_uri: string }).request_uri;
  const query = new URLSearchParams({ client_id: rpA.clientId, request_uri: requestUri });
  const agent = tlsAgent({ ca: readFileSync(env.sandbox.tlsCaFile) });
  try {
    const res = await httpRequest(`${env.sandbox.issuer}/authorize?${query}`, { agent, timeoutMs: 10_000 });
    assert.equal(res.status, 302, res.body.toString());
    const code = new URL(String(res.headers.location)).searchParams.get('code');
    assert.ok(code, String(res.headers.location));
    return { code, pkce };
  } finally {
    agent.destroy();
  }
}

/** POST /token as `rp` presents it: its certificate, its client_id; redirect_uri and verifier as given. */
function redeem(rp: RpRegistration, code: string, redirectUri: string, verifier?: string): Promise<HttpResponse> {
  return postForm(`${env.sandbox.issuer}/token`, rp, {
    grant_type: 'authorization_code',
    code,
    client_id: rp.clientId,
    redirect_uri: redirectUri,
    code_verifier: verifier,
  });
}

function assertInvalidGrant(res: HttpResponse, description: RegExp): void {
  const body = jsonBody(res) as { error?: string; error_description?: string };
  assert.equal(res.status, 400, res.body.toString());
  assert.equal(body.error, 'invalid_grant');
  assert.match(body.error_description ?? '', description);
}

function accessToken(res: HttpResponse): string {
  assert.equal(res.status, 200, res.body.toString());
  return (jsonBody(res) as { access_token: string }).access_token;
}

/** Introspection as the QTSP calls it, with its client certificate; the answer's payload. */
async function introspect(token: string): Promise<Record<string, unknown>> {
  const qtspTls = { certFile: pkiPaths(env.dataDir).clientCert, keyFile: pkiPaths(env.dataDir).clientKey };
  const res = await postForm(`${env.sandbox.issuer}/introspect`, qtspTls, { client_id: QTSP_ID, token });
  assert.equal(res.status, 200, res.body.toString());
  // the answer's signature is checked in sandbox.test.ts and by the QTSP at signDoc below
  return decodeJwt(res.body.toString());
}

/** signDoc as RP A, whose certificate the access token is bound to. */
function signDoc(token: string) {
  return callSignDoc(
    env.qtsp.signDocUrl,
    env.endpoints,
    signDocRequest(
      { accessToken: token },
      { hashes: [HASH], hashAlgorithmOID: SHA256_OID, format: 'C', level: 'AdES-B-B' },
    ),
  );
}

describe('the token endpoint redeems a code for the RP it was issued to only', () => {
  it("another RP's attempts with its own certificate are invalid_grant; the code stays usable by its RP", async () => {
    const { code, pkce } = await codeForA();
    // RP B knows the code only, then everything RP A would send but its key
    assertInvalidGrant(await redeem(rpB, code, rpB.redirectUri), /not issued to this client/);
    assertInvalidGrant(await redeem(rpB, code, rpA.redirectUri, pkce.verifier), /not issued to this client/);
    const token = accessToken(await redeem(rpA, code, rpA.redirectUri, pkce.verifier));
    const signed = await signDoc(token);
    assert.equal(signed.status, 200, JSON.stringify(signed.body));
    const signature = Buffer.from((signed.body as { SignatureObject: string[] }).SignatureObject[0]!, 'base64');
    const verified = await opensslCmsVerify(signature, DOC, env.rootCaFile);
    assert.ok(verified.ok, verified.output);
  });

  it('a code redeemed twice revokes its access token: introspection inactive, signDoc 401', async () => {
    const { code, pkce } = await codeForA();
    const token = accessToken(await redeem(rpA, code, rpA.redirectUri, pkce.verifier));
    assert.equal((await introspect(token))['active'], true);
    // another RP presenting the used code cannot revoke RP A's token: it was never issued to that RP
    assertInvalidGrant(await redeem(rpB, code, rpA.redirectUri, pkce.verifier), /not issued to this client/);
    assert.equal((await introspect(token))['active'], true);
    assertInvalidGrant(await redeem(rpA, code, rpA.redirectUri, pkce.verifier), /already used/);
    assert.deepEqual(await introspect(token), { active: false });
    const refused = await signDoc(token);
    assert.equal(refused.status, 401, JSON.stringify(refused.body));
    assert.equal(typeof (refused.body as { error?: unknown }).error, 'string');
  });
});
