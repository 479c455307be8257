/**
 * verifyRs256 (node:crypto) against jose's compactVerify as the independent oracle: the same tokens verify,
 * and tampering, wrong keys, weak or non-RSA keys and malformed segments fail in both.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { compactVerify, CompactSign } from 'jose';
import { JwsVerificationFailed, verifyRs256 } from '../../../src/trust/jws.ts';
import { rsaKeyPair } from '../../helpers/keys.ts';

const rsa = rsaKeyPair();
const other = rsaKeyPair();
const payload = { iss: 'https://as.test', aud: 'qtsp', exp: 2_000_000_000, name: 'Jürgen' };

async function sign(claims: unknown, key: KeyObject = rsa.privateKey, alg = 'RS256'): Promise<string> {
  return new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
    .setProtectedHeader({ alg, kid: 'k1' })
    .sign(key);
}

async function joseAccepts(token: string, key: KeyObject): Promise<boolean> {
  return compactVerify(token, key, { algorithms: ['RS256'] }).then(
    () => true,
    () => false,
  );
}

function oursAccepts(token: string, key: KeyObject): boolean {
  try {
    verifyRs256(token, key);
    return true;
  } catch (err) {
    assert.ok(err instanceof JwsVerificationFailed);
    return false;
  }
}

describe('verifyRs256 agrees with jose compactVerify', () => {
  test('a valid token verifies and yields the payload', async () => {
    const token = await sign(payload);
    assert.equal(await joseAccepts(token, rsa.publicKey), true);
    assert.deepEqual(JSON.parse(verifyRs256(token, rsa.publicKey).toString('utf8')), payload);
  });

  test('tampered, mis-keyed and malformed tokens fail in both', async () => {
    const token = await sign(payload);
    const [h, p, s] = token.split('.') as [string, string, string];
    const otherPayload = Buffer.from(JSON.stringify({ ...payload, aud: 'evil' })).toString('base64url');
    const flipped = Buffer.from(s, 'base64url');
    flipped[10]! ^= 1;
    const cases: [string, string, KeyObject][] = [
      ['other key', token, other.publicKey],
      ['payload swapped', `${h}.${otherPayload}.${s}`, rsa.publicKey],
      ['signature bit flipped', `${h}.${p}.${flipped.toString('base64url')}`, rsa.publicKey],
      ['signature truncated', `${h}.${p}.${s.slice(0, -4)}`, rsa.publicKey],
      ['no signature', `${h}.${p}.`, rsa.publicKey],
      ['two segments', `${h}.${p}`, rsa.publicKey],
      ['four segments', `${token}.x`, rsa.publicKey],
      ['signature with a non-base64url character', `${h}.${p}.${s.slice(0, 10)}*${s.slice(11)}`, rsa.publicKey],
      ['header with a non-base64url character', `${h.slice(0, 3)}!${h.slice(4)}.${p}.${s}`, rsa.publicKey],
      ['private key instead of public', token, rsa.privateKey],
    ];
    for (const [what, t, key] of cases) {
      assert.equal(oursAccepts(t, key), false, what);
      assert.equal(await joseAccepts(t, key), false, `jose: ${what}`);
    }
  });

  test('keys RS256 must not use: RSA below 2048 bits, RSA-PSS, EC', async () => {
    const weak = rsaKeyPair(1024);
    const weakToken = await new CompactSign(new TextEncoder().encode('{}'))
      .setProtectedHeader({ alg: 'RS256' })
      .sign(weak.privateKey)
      .catch(() => undefined);
    // jose refuses to sign with a 1024-bit key as well; build the token with node:crypto then
    const { sign: rawSign } = await import('node:crypto');
    const input = `${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from('{}').toString('base64url')}`;
    const token =
      weakToken ?? `${input}.${rawSign('sha256', Buffer.from(input), weak.privateKey).toString('base64url')}`;
    assert.equal(oursAccepts(token, weak.publicKey), false);
    assert.equal(await joseAccepts(token, weak.publicKey), false);
    const pss = generateKeyPairSync('rsa-pss', { modulusLength: 2048 });
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const good = await sign(payload);
    for (const key of [pss.publicKey, ec.publicKey]) {
      assert.equal(oursAccepts(good, key), false);
      assert.equal(await joseAccepts(good, key), false);
    }
  });
});
