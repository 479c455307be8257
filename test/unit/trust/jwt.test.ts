/**
 * verifyJwt, the one JWT check of the SAD and the introspection response: each failure is reported as the
 * caller's error, in the caller's order, and a good token yields its claims and the resolver's key.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { SignJWT, type JWTPayload } from 'jose';
import {
  rs256Header,
  signedWith,
  verifyJwt,
  type ClaimStep,
  type JwtFailure,
  type JwtRules,
  type SigningKey,
} from '../../../src/trust/jwt.ts';
import { rsaKeyPair } from '../../helpers/keys.ts';

const NOW = 1_700_000_000;
const SKEW = 5;
const as = rsaKeyPair();
const foreign = rsaKeyPair();

interface Keyed extends SigningKey {
  readonly source: string;
}

class Rejected extends Error {
  constructor(readonly failure: JwtFailure) {
    super(failure);
  }
}

const claims = (extra: JWTPayload = {}): JWTPayload => ({
  iss: 'https://as.test',
  iat: NOW - 10,
  exp: NOW + 60,
  ...extra,
});

function sign(
  body: JWTPayload,
  header: Record<string, unknown> = { alg: 'RS256', kid: 'k1' },
  key: KeyObject | Uint8Array = as.privateKey,
): Promise<string> {
  return new SignJWT(body).setProtectedHeader(header as { alg: string }).sign(key);
}

function unsigned(header: Record<string, unknown>, body: JWTPayload): string {
  const part = (x: unknown) => Buffer.from(JSON.stringify(x)).toString('base64url');
  return `${part(header)}.${part(body)}.`;
}

function rules(over: Partial<JwtRules<Keyed>> = {}): JwtRules<Keyed> {
  return {
    afterSignature: ['time'],
    resolveKey: async (kid) => (kid === 'k1' ? { key: as.publicKey, source: 'archive abc' } : undefined),
    skewSeconds: SKEW,
    now: () => NOW * 1000,
    reject: (failure) => new Rejected(failure),
    ...over,
  };
}

async function failure(token: unknown, over: Partial<JwtRules<Keyed>> = {}): Promise<JwtFailure> {
  const err = await verifyJwt(token, rules(over)).then(
    () => assert.fail('the token was accepted'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof Rejected, String(err));
  return err.failure;
}

describe('verifyJwt', () => {
  test('a good token yields its header, claims and the key the resolver vouched for', async () => {
    const out = await verifyJwt(await sign(claims({ sub: 'u' })), rules());
    assert.equal(out.header.kid, 'k1');
    assert.equal(out.claims.sub, 'u');
    assert.equal(out.key.source, 'archive abc');
  });

  test('wrong alg: HS256, ES256, none and PS256 are refused before any key is looked up', async () => {
    const resolveKey = async () => assert.fail('no key lookup for a wrong alg');
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const tokens = [
      await sign(claims(), { alg: 'HS256', kid: 'k1' }, new TextEncoder().encode('s'.repeat(32))),
      await sign(claims(), { alg: 'ES256', kid: 'k1' }, ec.privateKey),
      await sign(claims(), { alg: 'PS256', kid: 'k1' }),
      unsigned({ alg: 'none', kid: 'k1' }, claims()),
      unsigned({ kid: 'k1' }, claims()),
    ];
    for (const token of tokens) assert.equal(await failure(token, { resolveKey }), 'alg');
  });

  test('missing kid, critical header parameters and an undecodable header', async () => {
    assert.equal(await failure(await sign(claims(), { alg: 'RS256' })), 'kid');
    assert.equal(await failure(await sign(claims(), { alg: 'RS256', kid: 7 })), 'kid');
    const crit = unsigned({ alg: 'RS256', kid: 'k1', crit: ['exp'], exp: 1 }, claims());
    assert.equal(await failure(crit), 'crit');
    assert.equal(await failure(`!!.${unsigned({}, claims()).split('.')[1]}.x`), 'header');
  });

  test('unknown kid: the resolver has no such key', async () => {
    assert.equal(await failure(await sign(claims(), { alg: 'RS256', kid: 'k9' })), 'unknown-kid');
  });

  test('bad signature: another key under the known kid, or a tampered payload', async () => {
    assert.equal(await failure(await sign(claims(), { alg: 'RS256', kid: 'k1' }, foreign.privateKey)), 'signature');
    const [h, , s] = (await sign(claims())).split('.');
    const swapped = Buffer.from(JSON.stringify(claims({ sub: 'evil' }))).toString('base64url');
    assert.equal(await failure(`${h}.${swapped}.${s}`), 'signature');
  });

  test('not a compact JWS, or claims that are not a JSON object', async () => {
    assert.equal(await failure('not-a-jwt'), 'not-compact');
    assert.equal(await failure(undefined), 'not-compact');
    assert.equal(await failure(`${await sign(claims())}.x`), 'not-compact');
    const [h, , s] = (await sign(claims())).split('.');
    const array = Buffer.from('[1]').toString('base64url');
    assert.equal(await failure(`${h}.${array}.${s}`, { beforeSignature: ['time'], afterSignature: [] }), 'claims');
  });

  test('expired: exp not after now - skew; exp within the skew still passes', async () => {
    assert.equal(await failure(await sign(claims({ exp: NOW - SKEW }))), 'expired');
    assert.equal(await failure(await sign(claims({ exp: NOW - 3600 }))), 'expired');
    await verifyJwt(await sign(claims({ exp: NOW - SKEW + 1 })), rules());
  });

  test('iat in the future beyond the skew is refused; within the skew it passes', async () => {
    assert.equal(await failure(await sign(claims({ iat: NOW + SKEW + 1 }))), 'iat-in-future');
    await verifyJwt(await sign(claims({ iat: NOW + SKEW })), rules());
  });

  test('exp and iat must be numbers', async () => {
    assert.equal(await failure(await sign(claims({ exp: undefined }))), 'no-exp');
    assert.equal(await failure(await sign(claims({ iat: '1' as unknown as number }))), 'no-iat');
  });

  test("the caller's order: steps before the signature see the claims first (spec 5.7)", async () => {
    const seen: string[] = [];
    const step =
      (name: string): ClaimStep =>
      () =>
        void seen.push(name);
    const before = { beforeSignature: [step('iss'), 'time', step('cnf')] as ClaimStep[], afterSignature: [] };
    // expired and signed by a foreign key: the time check comes first
    const token = await sign(claims({ exp: NOW - 60 }), { alg: 'RS256', kid: 'k1' }, foreign.privateKey);
    assert.equal(await failure(token, before), 'expired');
    assert.deepEqual(seen, ['iss']);
    seen.length = 0;
    const other = await sign(claims(), { alg: 'RS256', kid: 'k1' }, foreign.privateKey);
    assert.equal(await failure(other, before), 'signature');
    assert.deepEqual(seen, ['iss', 'cnf']);
  });

  test('the resolver sees the claims read before the signature, and none when no step reads them', async () => {
    const calls: (string | undefined)[] = [];
    const resolveKey = async (_kid: string, c: JWTPayload | undefined) => {
      calls.push(c?.iss);
      return { key: as.publicKey, source: 'jwks_uri' };
    };
    await verifyJwt(await sign(claims()), rules({ beforeSignature: ['time'], afterSignature: [], resolveKey }));
    await verifyJwt(await sign(claims()), rules({ resolveKey }));
    assert.deepEqual(calls, ['https://as.test', undefined]);
  });

  test('steps after the signature run only on a verified token (spec 5.9)', async () => {
    const afterSignature: ClaimStep[] = [() => assert.fail('a step ran before the signature passed'), 'time'];
    const token = await sign(claims(), { alg: 'RS256', kid: 'k1' }, foreign.privateKey);
    assert.equal(await failure(token, { afterSignature }), 'signature');
  });

  test('rules that check the time claims other than once are a programming error', async () => {
    const token = await sign(claims());
    await assert.rejects(verifyJwt(token, rules({ afterSignature: [] })), /exactly once/);
    await assert.rejects(verifyJwt(token, rules({ beforeSignature: ['time'] })), /exactly once/);
  });

  test('signedWith, the signature step for a key the caller holds (stored evidence): only that key verifies', async () => {
    const token = await sign(claims());
    assert.equal(signedWith(token, as.publicKey), true);
    assert.equal(signedWith(token, foreign.publicKey), false);
    const [h, , s] = token.split('.');
    assert.equal(signedWith(`${h}.${Buffer.from('{"iss":"x"}').toString('base64url')}.${s}`, as.publicKey), false);
    assert.equal(signedWith(`${h}.e30.`, as.publicKey), false);
  });

  test('rs256Header hands the header checks to other users with their own errors', async () => {
    const reject = (failure: JwtFailure) => new Rejected(failure);
    assert.equal(rs256Header(await sign(claims()), reject).kid, 'k1');
    assert.throws(
      () => rs256Header(unsigned({ alg: 'none' }, {}), reject),
      (e: Rejected) => e.failure === 'alg',
    );
  });
});
