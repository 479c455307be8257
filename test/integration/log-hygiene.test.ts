/**
 * What the QTSP logs (docs/security.md "Logs: what is written and what never is"): at the most verbose level,
 * through a signing that succeeds, a replay, a tampered SAD, a SAD for another document and an AS that is down, no line carries the
 * access token, the introspection response, a key, the signer certificate or the user's identity claims; the
 * events an operator needs (who signed what, by transaction) are there.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { callSignDoc } from '../../src/rp/flow.ts';
import { LOG_OPTIONS } from '../../src/util/logger.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { authorize, labelled, signDocBody } from '../helpers/signing.ts';

const lines: string[] = [];
const sink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    done();
  },
});
// the service's own redact list stays in force: the logger differs from production only in level and sink
const logger = pino({ ...LOG_OPTIONS, level: 'trace' }, sink);

let env: TestEnvironment;
before(async () => {
  env = await startEnvironment({}, { logger });
});
after(async () => {
  await env?.close();
});

function digest(): string {
  return createHash('sha256').update(randomUUID()).digest('base64');
}

function sign(sad: string, hash: string) {
  return callSignDoc(env.qtsp.signDocUrl, env.endpoints, signDocBody(sad, [hash]));
}

describe('log hygiene', () => {
  it('no token, introspection response, key, certificate or identity claim in any log line', async () => {
    let payload: Record<string, unknown> | undefined;
    env.sandbox.controls.introspection.mutate = (p) => {
      payload = structuredClone(p);
      return p;
    };
    const hash = digest();
    const auth = await authorize(env.endpoints, labelled([hash]));
    const signed = await sign(auth.accessToken, hash);
    assert.equal(signed.status, 200, JSON.stringify(signed.body));
    assert.equal((await sign(auth.accessToken, hash)).status, 200, 'a retry is answered from what was kept');
    delete env.sandbox.controls.introspection.mutate;
    assert.ok(payload);
    const txn = String(payload['txn']);

    // refusals: a SAD whose signature is broken, a SAD for another document, the AS down
    const [h, p, s] = auth.accessToken.split('.');
    const tampered = `${h}.${p}.${s!.slice(0, -4)}${s!.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    assert.equal((await sign(tampered, hash)).status, 401);
    const notConsented = await sign(auth.accessToken, digest());
    assert.ok([401, 403].includes(notConsented.status), JSON.stringify(notConsented.body));
    const other = await authorize(env.endpoints, labelled([digest()]));
    env.sandbox.controls.introspection.mode = 'http500';
    try {
      assert.ok((await sign(other.accessToken, digest())).status >= 400);
    } finally {
      env.sandbox.controls.introspection.mode = 'normal';
    }

    const [stored] = await env.qtsp.deps.store.getTransaction(txn);
    assert.ok(stored);
    const text = lines.join('\n');
    // the log is not empty: the events an operator needs are there, by transaction
    assert.match(text, new RegExp(`"event":"sign.authorized","txn":"${txn}"`));
    const secrets: [string, string][] = [
      ['the SAD', auth.accessToken],
      ["the SAD's signature", s!],
      ['the other SAD', other.accessToken],
      ['the introspection response', stored.introspectionJwt],
      ["the introspection response's signature", stored.introspectionJwt.split('.')[2]!],
      ['the subject (sub)', String(payload['sub'])],
      ['a signature value', (signed.body as { SignatureObject: string[] }).SignatureObject[0]!.slice(0, 40)],
    ];
    const claims = JSON.stringify(payload['verified_claims'] ?? payload);
    for (const [name, value] of [
      ...claims.matchAll(/"(given_name|family_name|birthdate|place_of_birth|nationalities|street_address)":"([^"]+)"/g),
    ].map((m) => [m[1]!, m[2]!] as const)) {
      secrets.push([`claim ${name}`, value]);
    }
    assert.ok(
      secrets.some(([name]) => name === 'claim family_name'),
      `the sandbox vouched for no names: ${claims}`,
    );
    for (const [name, value] of secrets) {
      assert.ok(value.length >= 4, name);
      assert.ok(!text.includes(value), `${name} appears in the log`);
    }
    assert.doesNotMatch(text, /-----BEGIN|PRIVATE KEY|"(pin|password)":/i);
  });
});
