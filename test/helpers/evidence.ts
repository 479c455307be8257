/**
 * One real signing through the sandbox, with what a test needs to judge the evidence the QTSP kept: the
 * introspection payload as the AS signed it (captured through the sandbox's mutate switch, left unchanged),
 * the signer certificate's serial as OpenSSL reads it from the CMS, and a check that a stored JWT is that
 * very response (its RS256 signature verifies under the AS's published JWKS and its payload is the captured
 * one; RS256 is deterministic, so no other bytes carry both).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { compactVerify, createLocalJWKSet, decodeJwt, type JSONWebKeySet } from 'jose';
import { httpRequest, tlsAgent } from '../../src/util/http-client.ts';
import type { TestEnvironment } from './environment.ts';
import { inScratch, opensslCmsVerify, run } from './openssl.ts';
import { signThroughSandbox } from './signing.ts';

export interface SignedWithEvidence {
  readonly status: number;
  readonly body: { SignatureObject?: string[]; error?: string; error_description?: string };
  readonly txn: string;
  readonly document: Buffer;
  /** the introspection payload exactly as the AS signed it */
  readonly introspectionPayload: Record<string, unknown>;
}

export async function signAndCapture(
  env: TestEnvironment,
  document = Buffer.from(`a document ${Date.now()}\n`),
): Promise<SignedWithEvidence> {
  const hash = createHash('sha256').update(document).digest('base64');
  let captured: Record<string, unknown> | undefined;
  env.sandbox.controls.introspection.mutate = (payload) => {
    captured = structuredClone(payload);
    return payload;
  };
  try {
    const res = await signThroughSandbox(env, [hash]);
    assert.ok(captured, 'the AS answered no introspection');
    return {
      status: res.status,
      body: res.body,
      txn: String(captured.txn),
      document,
      introspectionPayload: captured,
    };
  } finally {
    delete env.sandbox.controls.introspection.mutate;
  }
}

/** the AS's JWKS, fetched over HTTPS like any party would */
async function asJwks(env: TestEnvironment): Promise<JSONWebKeySet> {
  const agent = tlsAgent({ ca: readFileSync(env.sandbox.tlsCaFile) });
  try {
    const res = await httpRequest(`${env.sandbox.issuer}/jwks`, { agent, timeoutMs: 5000 });
    assert.equal(res.status, 200);
    return JSON.parse(res.body.toString('utf8')) as JSONWebKeySet;
  } finally {
    agent.destroy();
  }
}

export async function assertIsIntrospectionResponse(
  env: TestEnvironment,
  jwt: string,
  payload: Record<string, unknown>,
): Promise<void> {
  await compactVerify(jwt, createLocalJWKSet(await asJwks(env)), { algorithms: ['RS256'] });
  assert.deepEqual(decodeJwt(jwt), payload);
}

/** the signer certificate's serial, lowercase hex, as `openssl cms -verify -signer` extracts it */
export function signerSerialByOpenssl(signature: Buffer, document: Buffer, caFile: string): Promise<string> {
  return inScratch(async (s) => {
    const verified = await opensslCmsVerify(signature, document, caFile, s.file('signer.pem'));
    assert.ok(verified.ok, verified.output);
    const serial = await run('openssl', ['x509', '-in', s.file('signer.pem'), '-noout', '-serial']);
    assert.ok(serial.ok, serial.output);
    return serial.output
      .trim()
      .replace(/^serial=/, '')
      .toLowerCase();
  });
}
