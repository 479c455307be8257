/**
 * One limit for the documents of one signing, on the real sandbox bank and QTSP: the QTSP's record states it
 * where an RP reads the QTSP's capabilities (service configuration, spec 2.2; SP directory, 2.13), openapi.yaml
 * states the same, and at the limit PAR and signDoc both accept, one above it both refuse, so no consent is
 * given that signDoc would not honour.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { authorizeSigning, callSignDoc, RpFlowError } from '../../src/rp/flow.ts';
import { MAX_DOCUMENTS_PER_SIGNING } from '../../src/signing/limits.ts';
import { httpRequest, jsonBody, tlsAgent } from '../../src/util/http-client.ts';
import { PROFILE, SHA256_OID, startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { opensslCmsVerify } from '../helpers/openssl.ts';

let env: TestEnvironment;

before(async () => {
  env = await startEnvironment();
});
after(async () => {
  await env.close();
});

const documents = (n: number) => Array.from({ length: n }, (_, i) => Buffer.from(`document ${i + 1} of ${n}\n`));
const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('base64');

function authorize(hashes: readonly string[]) {
  return authorizeSigning(env.endpoints, {
    documentDigests: hashes.map((hash, i) => ({ hash, label: `document ${i + 1}.pdf` })),
    hashAlgorithmOID: SHA256_OID,
  });
}

function signDoc(SAD: string, hashes: readonly string[]) {
  return callSignDoc(env.qtsp.signDocUrl, env.endpoints, {
    SAD,
    credentialID: 'qes_eidas',
    documentDigests: { hashes, hashAlgorithmOID: SHA256_OID },
    profile: PROFILE,
    signature_format: 'C',
  });
}

async function certificatesIssued(): Promise<number> {
  return (await env.qtsp.deps.metrics.certificates.get()).values[0]?.value ?? 0;
}

async function getJson(url: string): Promise<unknown> {
  const agent = tlsAgent({ ca: readFileSync(env.sandbox.tlsCaFile) });
  try {
    const res = await httpRequest(url, { agent, timeoutMs: 10_000 });
    assert.equal(res.status, 200, res.body.toString());
    return jsonBody(res);
  } finally {
    agent.destroy();
  }
}

describe('documents per signing', () => {
  it('the QTSP states its limit where an RP and a bank read its capabilities, as openapi.yaml does', async () => {
    const config = (await getJson(
      `${env.sandbox.serviceConfigurationUrl}?iss=${encodeURIComponent(env.sandbox.issuer)}`,
    )) as { remote_signature_creation: Record<string, unknown>[] };
    assert.equal(config.remote_signature_creation[0]!['max_documents_per_signing'], MAX_DOCUMENTS_PER_SIGNING);
    const [record] = (await getJson(env.sandbox.spDirectoryUrl)) as Record<string, unknown>[];
    assert.equal(record!['max_documents_per_signing'], MAX_DOCUMENTS_PER_SIGNING);
    const openapi = parseYaml(readFileSync(new URL('../../openapi.yaml', import.meta.url), 'utf8'));
    const hashes = openapi.components.schemas.SignDocRequest.properties.documentDigests.properties.hashes;
    assert.equal(hashes.maxItems, MAX_DOCUMENTS_PER_SIGNING);
  });

  it('at the limit: PAR accepts, signDoc signs every document', async () => {
    const docs = documents(MAX_DOCUMENTS_PER_SIGNING);
    const hashes = docs.map(sha256);
    const auth = await authorize(hashes);
    const res = await signDoc(auth.accessToken, hashes);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const sigs = (res.body as { SignatureObject: string[] }).SignatureObject;
    assert.equal(sigs.length, MAX_DOCUMENTS_PER_SIGNING);
    for (const i of [0, MAX_DOCUMENTS_PER_SIGNING - 1]) {
      const ok = await opensslCmsVerify(Buffer.from(sigs[i]!, 'base64'), docs[i]!, env.rootCaFile);
      assert.ok(ok.ok, ok.output);
    }
  });

  it('one above the limit: PAR answers invalid_authorization_details naming the limit', async () => {
    const hashes = documents(MAX_DOCUMENTS_PER_SIGNING + 1).map(sha256);
    const err = await authorize(hashes).then(
      () => assert.fail('PAR accepted more documents than signDoc signs'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof RpFlowError, String(err));
    assert.equal(err.step, 'PAR');
    assert.equal(err.status, 400);
    assert.equal(err.error, 'invalid_authorization_details');
    assert.match(err.errorDescription ?? '', new RegExp(`at most ${MAX_DOCUMENTS_PER_SIGNING}\\b`));
  });

  it('one above the limit: signDoc answers 400 naming the limit, and signs nothing', async () => {
    const hashes = documents(MAX_DOCUMENTS_PER_SIGNING + 1).map(sha256);
    const auth = await authorize(hashes.slice(0, MAX_DOCUMENTS_PER_SIGNING));
    const minted = await certificatesIssued();
    const res = await signDoc(auth.accessToken, hashes);
    const body = res.body as { error?: string; error_description?: string; SignatureObject?: unknown };
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.equal(body.error, 'invalid_request');
    assert.equal(body.SignatureObject, undefined);
    assert.match(body.error_description ?? '', new RegExp(`at most ${MAX_DOCUMENTS_PER_SIGNING} documents`));
    assert.equal(await certificatesIssued(), minted, 'a certificate was minted for a refused request');
  });
});
