/**
 * crypto/keys.ts EC key pairs (ECDH generation, imported: no KeyGenJob left for the garbage collector, see there):
 * the private and public halves belong together, the kept point is the key's own, and the SPKI we write from it
 * is what OpenSSL exports for the key.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, sign, verify } from 'node:crypto';
import { ecPublicPoint, generateKeyPair, keyAlgorithmOf } from '../../../src/crypto/keys.ts';
import { spkiDer } from '../../../src/ca/x509.ts';

for (const algorithm of ['P-256', 'P-384'] as const) {
  test(`${algorithm}: matching halves, the kept point, the SPKI as OpenSSL exports it`, () => {
    for (let i = 0; i < 200; i++) {
      const keys = generateKeyPair(algorithm);
      assert.equal(keyAlgorithmOf(keys.privateKey), algorithm);
      assert.equal(keys.publicKey.type, 'public');
      const data = randomBytes(64);
      assert.ok(verify('sha256', data, keys.publicKey, sign('sha256', data, keys.privateKey)));
      const jwk = keys.publicKey.export({ format: 'jwk' });
      assert.deepEqual(
        ecPublicPoint(keys.publicKey),
        Buffer.concat([Buffer.from([4]), Buffer.from(jwk.x!, 'base64url'), Buffer.from(jwk.y!, 'base64url')]),
      );
      assert.ok(spkiDer(keys.publicKey).equals(keys.publicKey.export({ type: 'spki', format: 'der' })));
      assert.equal(
        keys.privateKey.export({ format: 'jwk' }).d!.length,
        Math.ceil(((algorithm === 'P-256' ? 32 : 48) * 4) / 3),
      );
    }
  });
}
