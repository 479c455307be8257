/**
 * Rotation of our TLS client certificate toward the banks, with the real sandbox and service: `qtsp pki
 * client-cert --rotate` registers a new certificate in our SP record beside the current one (the platform's
 * update, authenticated with the current certificate) and installs it; the running service switches to it
 * without a restart; `--retire` leaves the new one alone in the record. signDoc works before, during the
 * overlap and after the switch; once the old certificate is retired, the bank's introspection endpoint refuses
 * a client presenting it (401 invalid_client), while it accepted it during the overlap. `--register` (the way
 * back once the certificate has expired) registers a new certificate alone with the registration credential the
 * platform gave our operator, finding the platform through the data directory as `qtsp sign` does; a guessed
 * credential with an attacker's certificate is refused and changes nothing.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync, type KeyObject, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import pino from 'pino';
import { CompactSign } from 'jose';
import { createTlsCertificate } from '../../src/ca/authority.ts';
import { pkiPaths } from '../../src/ca/material.ts';
import { OID } from '../../src/ca/x509.ts';
import { toPem } from '../../src/util/base64.ts';
import { httpRequest, tlsAgent } from '../../src/util/http-client.ts';
import { LOG_OPTIONS } from '../../src/util/logger.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { endEntityCertificate } from '../helpers/certificates.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';
import { signaturesOf, signThroughSandbox } from '../helpers/signing.ts';

const events: string[] = [];
const sink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    for (const line of chunk.toString('utf8').split('\n').filter(Boolean))
      events.push(String((JSON.parse(line) as { event?: unknown }).event ?? ''));
    done();
  },
});

interface ClientPair {
  readonly cert: string;
  readonly key: string;
}

const derOf = (pem: string) => Buffer.from(pem.replace(/-----[^-]+-----/g, '').replace(/\s/g, ''), 'base64');
const x5t = (pem: string) => createHash('sha256').update(derOf(pem)).digest('base64url');

/** A self-signed client certificate (PEM) of a fresh P-256 key, valid now. */
function selfSigned(commonName: string): { cert: string; privateKey: KeyObject } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const der = endEntityCertificate({
    commonName,
    publicKey,
    selfSignKey: privateKey,
    validHours: 24,
    keyUsage: ['digitalSignature'],
    extKeyUsage: [OID.clientAuth],
  });
  return { cert: toPem(der, 'CERTIFICATE'), privateKey };
}

describe('TLS client certificate rotation toward the banks', () => {
  let env: TestEnvironment;
  let old: ClientPair;
  let introspectionEndpoint: string;

  before(async () => {
    env = await startEnvironment(
      { calendar: { reloadCheckSeconds: 1 } },
      { logger: pino({ ...LOG_OPTIONS, level: 'info' }, sink) },
    );
    const p = pkiPaths(env.dataDir);
    old = { cert: readFileSync(p.clientCert, 'utf8'), key: readFileSync(p.clientKey, 'utf8') };
    const metadata = await fetch(`${env.sandbox.issuer}/.well-known/oauth-authorization-server`, {
      // the sandbox's TLS CA is ours to trust here: node's fetch takes no CA, so ask through undici's agent
      dispatcher: tlsAgent({ ca: readFileSync(env.sandbox.tlsCaFile) }),
    } as RequestInit);
    introspectionEndpoint = ((await metadata.json()) as { introspection_endpoint: string }).introspection_endpoint;
  });
  after(async () => {
    await env?.close();
  });

  const signs = async (text: string) => {
    const hash = createHash('sha256').update(text).digest('base64');
    signaturesOf(await signThroughSandbox(env, [hash]));
  };
  /** the bank's introspection endpoint, called as our QTSP with `pair` (spec 5.8) */
  const introspectAs = async (pair: ClientPair) => {
    const agent = tlsAgent({ ca: readFileSync(env.sandbox.tlsCaFile), ...pair, connections: 1 });
    try {
      return await httpRequest(introspectionEndpoint, {
        method: 'POST',
        agent,
        timeoutMs: 10_000,
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/jwt' },
        body: new URLSearchParams({ client_id: env.config.qtspId, token: 'not-a-token' }).toString(),
      });
    } finally {
      await agent.close();
    }
  };
  const registered = async (): Promise<string[]> => {
    const res = await fetch(env.sandbox.spDirectoryUrl, {
      dispatcher: tlsAgent({ ca: readFileSync(env.sandbox.tlsCaFile) }),
    } as RequestInit);
    const records = (await res.json()) as { client_id: string; jwks: { keys: { x5c: string[] }[] } }[];
    const ours = records.find((r) => r.client_id === env.config.qtspId)!;
    return ours.jwks.keys.map((k) => createHash('sha256').update(Buffer.from(k.x5c[0]!, 'base64')).digest('base64url'));
  };
  const clientCert = (...args: string[]) =>
    qtsp(['pki', 'client-cert', ...args, '--data-dir', env.dataDir, '--sp-directory', env.sandbox.spDirectoryUrl]);

  it('before the rotation: signDoc works; the bank accepts the current certificate', async () => {
    await signs('before the rotation');
    assert.equal((await introspectAs(old)).status, 200);
  });

  /** PUT of our record's jwks as `as`: the certificates (PEM) and the proofs given */
  const putKeys = async (as: ClientPair, certs: string[], proofs?: string[]) => {
    const agent = tlsAgent({ ca: readFileSync(env.sandbox.tlsCaFile), ...as, connections: 1 });
    try {
      return await httpRequest(
        new URL(`${encodeURIComponent(env.config.qtspId)}/jwks`, env.sandbox.spDirectoryUrl).toString(),
        {
          method: 'PUT',
          agent,
          timeoutMs: 10_000,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ keys: certs.map((c) => ({ x5c: [derOf(c).toString('base64')] })), proofs }),
        },
      );
    } finally {
      await agent.close();
    }
  };

  it('a certificate new to the record needs a proof of possession of its key; without one nothing changes', async () => {
    const before = await registered();
    const stranger = selfSigned('somebody else');
    const proof = (o: { key?: KeyObject; clientId?: string; iat?: number } = {}) =>
      new CompactSign(
        new TextEncoder().encode(
          JSON.stringify({ client_id: o.clientId ?? env.config.qtspId, iat: o.iat ?? Math.floor(Date.now() / 1000) }),
        ),
      )
        .setProtectedHeader({ alg: 'ES256', typ: 'sp-key-proof+jwt', 'x5t#S256': x5t(stranger.cert) })
        .sign(o.key ?? stranger.privateKey);
    const refusals = [
      undefined,
      [await proof({ key: selfSigned('another key').privateKey })],
      [await proof({ clientId: 'another-client' })],
      [await proof({ iat: Math.floor(Date.now() / 1000) - 3600 })],
    ];
    for (const proofs of refusals) {
      const res = await putKeys(old, [old.cert, stranger.cert], proofs);
      assert.equal(res.status, 400, res.body.toString());
      assert.match(res.body.toString(), /proof of possession/);
      assert.deepEqual(await registered(), before);
    }
    // the same set with a proof made with the certificate's key: accepted; then the record as it was
    assert.equal((await putKeys(old, [old.cert, stranger.cert], [await proof()])).status, 200);
    assert.deepEqual(await registered(), [...before, x5t(stranger.cert)]);
    assert.equal((await putKeys(old, [old.cert])).status, 200);
    assert.deepEqual(await registered(), before);
  });

  it('--rotate: both certificates registered, signDoc works during the overlap, then the service switches', async () => {
    const run = await clientCert('--rotate');
    assert.equal(run.code, 0, run.output);
    const p = pkiPaths(env.dataDir);
    const next: ClientPair = { cert: readFileSync(p.clientCert, 'utf8'), key: readFileSync(p.clientKey, 'utf8') };
    assert.notEqual(x5t(next.cert), x5t(old.cert));
    assert.deepEqual(await registered(), [x5t(old.cert), x5t(next.cert)]);
    const journaled = (await env.qtsp.deps.store.journal.entries(0, Number.MAX_SAFE_INTEGER))
      .map((e) => JSON.parse(e.body.toString('utf8')) as { kind: string; data: Record<string, unknown> })
      .find((b) => b.kind === 'pki.client_certificate_rotated');
    assert.equal(journaled?.data['previousX5tS256'], x5t(old.cert), 'the rotation is journaled');
    assert.equal(journaled?.data['serialHex'], new X509Certificate(next.cert).serialNumber.toLowerCase());
    await signs('during the overlap');
    assert.equal((await introspectAs(old)).status, 200, 'the bank refused the old certificate during the overlap');
    assert.equal((await introspectAs(next)).status, 200, 'the bank refused the new certificate during the overlap');
    const deadline = Date.now() + 60_000;
    while (!events.includes('tls.client_certificate_reloaded')) {
      assert.ok(Date.now() < deadline, 'the service never switched to the new client certificate');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await signs('after the switch');
  });

  it('--retire: the record keeps the new certificate alone; the bank refuses the old one, signDoc works', async () => {
    const run = await clientCert('--retire');
    assert.equal(run.code, 0, run.output);
    const current = readFileSync(pkiPaths(env.dataDir).clientCert, 'utf8');
    assert.deepEqual(await registered(), [x5t(current)]);
    const refused = await introspectAs(old);
    assert.equal(refused.status, 401, refused.body.toString());
    assert.equal((JSON.parse(refused.body.toString()) as { error: string }).error, 'invalid_client');
    await signs('after the old certificate was retired');
  });

  it('the directory refuses an update authenticated with a certificate the record no longer registers', async () => {
    const agent = tlsAgent({ ca: readFileSync(env.sandbox.tlsCaFile), ...old, connections: 1 });
    try {
      const res = await httpRequest(
        new URL(`${encodeURIComponent(env.config.qtspId)}/jwks`, env.sandbox.spDirectoryUrl).toString(),
        {
          method: 'PUT',
          agent,
          timeoutMs: 10_000,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            keys: [
              {
                x5c: [
                  Buffer.from(old.cert.replace(/-----[^-]+-----/g, '').replace(/\s/g, ''), 'base64').toString('base64'),
                ],
              },
            ],
          }),
        },
      );
      assert.equal(res.status, 401, res.body.toString());
    } finally {
      await agent.close();
    }
    assert.deepEqual(await registered(), [x5t(readFileSync(pkiPaths(env.dataDir).clientCert, 'utf8'))]);
  });

  it("the directory refuses an attacker's certificate sent with a guessed registration credential", async () => {
    const attacker = createTlsCertificate(undefined, { commonName: env.config.qtspId, usage: 'client' });
    const agent = tlsAgent({ ca: readFileSync(env.sandbox.tlsCaFile), connections: 1 });
    try {
      const res = await httpRequest(
        new URL(`${encodeURIComponent(env.config.qtspId)}/jwks`, env.sandbox.spDirectoryUrl).toString(),
        {
          method: 'PUT',
          agent,
          timeoutMs: 10_000,
          headers: { 'content-type': 'application/json', authorization: `Bearer ${'A'.repeat(43)}` },
          body: JSON.stringify({ keys: [{ x5c: [attacker.der.toString('base64')] }] }),
        },
      );
      assert.equal(res.status, 401, res.body.toString());
      assert.equal((JSON.parse(res.body.toString()) as { error: string }).error, 'invalid_client');
    } finally {
      await agent.close();
    }
    assert.deepEqual(await registered(), [x5t(readFileSync(pkiPaths(env.dataDir).clientCert, 'utf8'))]);
  });

  it('--register, the platform found through the data directory: the new certificate alone; signDoc works', async () => {
    const p = pkiPaths(env.dataDir);
    const before = { cert: readFileSync(p.clientCert, 'utf8'), key: readFileSync(p.clientKey, 'utf8') };
    const reloads = events.filter((e) => e === 'tls.client_certificate_reloaded').length;
    // no --sp-directory: endpoints.json of the sandbox in the data directory names the platform and credential
    const run = await qtsp(['pki', 'client-cert', '--register', '--data-dir', env.dataDir]);
    assert.equal(run.code, 0, run.output);
    const current = readFileSync(p.clientCert, 'utf8');
    assert.notEqual(x5t(current), x5t(before.cert));
    assert.deepEqual(await registered(), [x5t(current)]);
    const deadline = Date.now() + 60_000;
    while (events.filter((e) => e === 'tls.client_certificate_reloaded').length === reloads) {
      assert.ok(Date.now() < deadline, 'the service never switched to the registered client certificate');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await signs('after the registration');
    assert.equal((await introspectAs(before)).status, 401, 'the bank accepted the certificate replaced');
  });
});
