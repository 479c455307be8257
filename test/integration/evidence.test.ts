/**
 * Evidence through the whole flow (spec 5.13): a real signDoc over mutual TLS leaves in the
 * store the introspection JWT exactly as the AS sent it and the certificate that OpenSSL finds in the CMS;
 * `qtsp evidence show` prints it with the kept signatures; with the store broken, signDoc answers 503, signs
 * nothing, and readiness reports the store. The export of a period: evidence-export.test.ts.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { httpRequest } from '../../src/util/http-client.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { assertIsIntrospectionResponse, signAndCapture, signerSerialByOpenssl } from '../helpers/evidence.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';

let env: TestEnvironment;
before(async () => {
  env = await startEnvironment({ store: { pingIntervalMs: 1000 } });
});
after(async () => {
  await env.close();
});

async function ready(): Promise<{ status: number; body: { status: string; reasons: string[] } }> {
  const res = await httpRequest(`${env.qtsp.opsUrl}/health/ready`, { timeoutMs: 5000 });
  return { status: res.status, body: JSON.parse(res.body.toString('utf8')) };
}

describe('evidence of a real signing', () => {
  it('the store holds the transaction with the exact introspection JWT and the CMS signer certificate', async () => {
    const signed = await signAndCapture(env);
    assert.equal(signed.status, 200, JSON.stringify(signed.body));
    const [stored, ...more] = await env.qtsp.deps.store.getTransaction(signed.txn);
    assert.ok(stored, 'no transaction stored');
    assert.equal(more.length, 0);
    await assertIsIntrospectionResponse(env, stored.introspectionJwt, signed.introspectionPayload);
    // the AS key came from the signed key archive (the archive is read first), recorded with its commit
    assert.match(stored.keySource ?? '', /^archive [0-9a-f]{40}$/);
    assert.equal(stored.keyCustody, 'software', 'where the signer key lived');
    const p = signed.introspectionPayload;
    assert.deepEqual(
      { iss: stored.iss, sub: stored.sub, clientId: stored.clientId, clientState: stored.clientState },
      { iss: p.iss, sub: p.sub, clientId: p.client_id, clientState: p.client_state },
    );
    assert.deepEqual(stored.hashes, [createHash('sha256').update(signed.document).digest('base64')]);
    assert.equal(stored.hashAlgorithmOid, '2.16.840.1.101.3.4.2.1');
    assert.deepEqual([stored.signatureFormat, stored.conformanceLevel], ['C', 'AdES-B-B']);

    const signature = Buffer.from(signed.body.SignatureObject![0]!, 'base64');
    const serial = await signerSerialByOpenssl(signature, signed.document, env.rootCaFile);
    assert.equal(stored.certificateSerialHex, serial);
    const certificate = await env.qtsp.deps.store.getCertificate(serial);
    assert.ok(certificate);
    assert.equal(certificate.txn, signed.txn);
    assert.deepEqual(certificate.status, { status: 'good' });
    assert.match(certificate.subject, /GN=Erika/);
    assert.equal(certificate.issuerKeyId, env.qtsp.deps.issuingCa.issuer.keyId.toString('hex'));
    assert.deepEqual(await env.qtsp.deps.store.certificateStatus(certificate.issuerKeyId, serial), { status: 'good' });
    // the stored DER is the certificate inside the CMS
    assert.equal(new X509Certificate(certificate.der).serialNumber.toLowerCase(), serial);
    // no access token anywhere in the stored row
    assert.ok(!JSON.stringify(stored).includes('"SAD"'));
  });

  it('readiness is green while the store answers', async () => {
    // a ping slower than its interval counts as a failure: on a busy machine one may, so wait, bounded
    let r = await ready();
    for (let i = 0; i < 150 && r.status !== 200; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      r = await ready();
    }
    assert.equal(r.status, 200, JSON.stringify(r.body));
  });
});

describe('qtsp evidence show', () => {
  it('prints the transaction of a `qtsp sign`, with its certificate and introspection JWT, and no token', async () => {
    const file = join(env.dataDir, 'evidence-doc.txt');
    writeFileSync(file, 'signed for the evidence test\n');
    const signed = await qtsp(['sign', file, '--data-dir', env.dataDir]);
    assert.equal(signed.code, 0, signed.stdout + signed.stderr);
    const txn = /\(txn ([^)]+)\)/.exec(signed.stdout)?.[1];
    assert.ok(txn, signed.stdout);
    const [stored] = await env.qtsp.deps.store.getTransaction(txn);
    assert.ok(stored);

    const shown = await qtsp(['evidence', 'show', txn, '--data-dir', env.dataDir]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, new RegExp(`signing 1 of 1 for txn ${txn}`));
    assert.ok(shown.stdout.includes(stored.introspectionJwt), 'the introspection JWT is printed as stored');
    assert.ok(shown.stdout.includes(stored.certificateSerialHex));
    assert.match(shown.stdout, /1 x SHA-256 \(2\.16\.840\.1\.101\.3\.4\.2\.1\)/);
    assert.match(shown.stdout, /status +good/);
    assert.match(shown.stdout, /-----BEGIN CERTIFICATE-----/);
    assert.doesNotMatch(shown.stdout, /access_token|SAD/);

    // the signature kept for a retry (signing/once.ts) is listed with the signing that made it
    const [document, ...others] = await env.qtsp.deps.store.documentsOf(stored.iss, txn);
    assert.ok(document?.signature, 'a kept signature');
    assert.equal(others.length, 0);
    assert.match(shown.stdout, /kept signatures +1 of 1 documents/);
    assert.ok(shown.stdout.includes(`[0] ${stored.hashes[0]}`), 'the document hash');
    assert.ok(shown.stdout.includes(document.signature), 'the signature object, Base64 as returned');

    const json = await qtsp(['evidence', 'show', txn, '--data-dir', env.dataDir, '--json']);
    assert.equal(json.code, 0, json.stderr);
    const parsed = JSON.parse(json.stdout) as {
      introspectionJwt: string;
      certificate: { serialHex: string };
      signatures: { hash: string; signature: string }[];
    }[];
    assert.equal(parsed[0]!.introspectionJwt, stored.introspectionJwt);
    assert.equal(parsed[0]!.certificate.serialHex, stored.certificateSerialHex);
    assert.deepEqual(
      parsed[0]!.signatures.map((s) => [s.hash, s.signature]),
      [[stored.hashes[0], document.signature]],
    );
  });

  it('says so for an unknown txn, a missing store and a bad invocation', async () => {
    const unknown = await qtsp(['evidence', 'show', 'no-such-txn', '--data-dir', env.dataDir]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no signing recorded for txn no-such-txn/);
    // a txn is the AS's choice: base64url ones may start with '-' and are still a txn, not an option
    const dashed = await qtsp(['evidence', 'show', '-Zq1x', '--data-dir', env.dataDir]);
    assert.equal(dashed.code, 1, dashed.stderr);
    assert.match(dashed.stderr, /no signing recorded for txn -Zq1x/);
    const later = await qtsp(['evidence', 'verify', '--data-dir', env.dataDir, 'no-such-txn']);
    assert.match(later.stderr, /no-such-txn/);
    const nowhere = await qtsp(['evidence', 'show', 'x', '--data-dir', join(env.dataDir, 'nowhere')]);
    assert.equal(nowhere.code, 1);
    assert.match(nowhere.stderr, /no evidence store in/);
    const usage = await qtsp(['evidence', 'show']);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /usage: qtsp evidence show TXN/);
  });
});

describe('with the store broken', () => {
  it('signDoc answers 503 temporarily_unavailable and signs nothing; readiness fails', async () => {
    const signaturesBefore = (await env.qtsp.deps.metrics.signatures.get()).values[0]?.value ?? 0;
    await env.qtsp.deps.store.close(); // the database goes away under a running service
    const signed = await signAndCapture(env);
    assert.equal(signed.status, 503, JSON.stringify(signed.body));
    assert.deepEqual(signed.body, {
      error: 'temporarily_unavailable',
      error_description: 'the evidence store is unavailable; nothing was signed',
    });
    assert.equal(
      (await env.qtsp.deps.metrics.signatures.get()).values[0]?.value ?? 0,
      signaturesBefore,
      'a signature was built',
    );

    // readiness follows the store's ping (every second here); bounded wait, no timing asserted
    let r = await ready();
    for (let i = 0; i < 300 && r.status === 200; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      r = await ready();
    }
    assert.equal(r.status, 503);
    assert.equal(r.body.status, 'not_ready');
    assert.match(r.body.reasons.join(' '), /evidence store \(sqlite\) does not accept a write/);
  });
});
