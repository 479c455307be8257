/**
 * The software custody's signer keys (src/custody/software/signer-keys.ts): the pool of RSA keys with real
 * RSA-3072 generation in real worker threads (rsa-threads.ts). Every key is handed out once; the pool refills in
 * the background; an empty pool still serves (generation on demand, off the event loop); close() stops the
 * workers and fails whoever still waits.
 */
import { describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { KeyPoolClosedError, type KeyPool } from '../../../../src/custody/key-pool.ts';
import type { RsaThreads } from '../../../../src/custody/software/rsa-threads.ts';
import { createSignerKeys } from '../../../../src/custody/software/signer-keys.ts';
import type { KeyPair } from '../../../../src/crypto/keys.ts';
import { untilHolds } from '../../../helpers/key-pool.ts';

// Each test closes its pool when it ends (t.after), so that no refill competes with the next test for the CPU.
function pool(t: TestContext, size: number): KeyPool<KeyPair> & { readonly threads: RsaThreads } {
  const keys = createSignerKeys({ rsaPoolSize: size, threads: 1 });
  t.after(() => keys.close());
  return Object.assign(keys.rsa, { threads: keys.threads });
}

const spki = (k: KeyObject) => k.export({ type: 'spki', format: 'der' }).toString('base64');

function assertFreshRsa(keys: KeyPair): void {
  assert.equal(keys.algorithm, 'RSA-3072');
  assert.equal(keys.privateKey.type, 'private');
  assert.equal(keys.privateKey.asymmetricKeyType, 'rsa');
  assert.equal(keys.privateKey.asymmetricKeyDetails?.modulusLength, 3072);
  assert.equal(
    spki(createPublicKey(keys.privateKey)),
    spki(keys.publicKey),
    'the public key belongs to the private key',
  );
  const data = Buffer.from('pool');
  assert.ok(verify('sha256', data, keys.publicKey, sign('sha256', data, keys.privateKey)));
}

describe('the RSA key pool', () => {
  test('fills in the background and hands each key out once', async (t) => {
    const p = pool(t, 2);
    await untilHolds(p);
    assert.equal(p.stats().ready, 2);
    const first = await Promise.all([p.take(), p.take(), p.take()]); // two from the pool, one on demand
    const all = [...first, await p.take()];
    for (const keys of all) assertFreshRsa(keys);
    assert.equal(new Set(all.map((k) => spki(k.publicKey))).size, all.length, 'a key was handed out twice');
    assert.equal(new Set(all.map((k) => k.privateKey)).size, all.length);
    const s = p.stats();
    assert.equal(s.handedOut, 4);
    assert.ok(s.generated >= 4);
    assert.ok(s.waited >= 1, 'the third concurrent take found the pool empty');
  });

  test('a take from a full pool does not wait, and the pool refills', async (t) => {
    const p = pool(t, 2);
    await untilHolds(p);
    const before = p.stats();
    const keys = await p.take();
    assertFreshRsa(keys);
    assert.equal(p.stats().waited, before.waited, 'a warm pool made the request wait');
    assert.equal(p.stats().ready, 1);
    assert.equal(p.stats().generating, 1, 'the refill starts at once');
    await untilHolds(p);
    assert.equal(p.stats().ready, 2);
    assert.equal(p.stats().generated, before.generated + 1);
    assert.equal(p.threads.running, 1);
  });

  test('an empty pool (size 0) generates on demand for each request, concurrently requested keys differ', async (t) => {
    const p = pool(t, 0);
    await untilHolds(p); // nothing to fill
    assert.equal(p.stats().generating, 0, 'size 0 keeps nothing ready');
    const [a, b] = await Promise.all([p.take(), p.take()]);
    assertFreshRsa(a!);
    assertFreshRsa(b!);
    assert.notEqual(spki(a!.publicKey), spki(b!.publicKey));
    assert.deepEqual(p.stats(), { ready: 0, generating: 0, waiting: 0, generated: 2, handedOut: 2, waited: 2 });
  });

  test('close() fails waiting requests, drops unused keys and stops the workers; taken keys stay usable', async (t) => {
    const p = pool(t, 1);
    await untilHolds(p);
    const taken = await p.take(); // the refill is now in progress
    const waiting = Promise.allSettled([p.take(), p.take()]); // both wait: the refill is not done yet
    assert.equal(p.stats().waiting, 2);
    await p.close();
    for (const result of await waiting) {
      assert.equal(result.status, 'rejected');
      assert.ok(result.reason instanceof KeyPoolClosedError);
    }
    await assert.rejects(p.take(), KeyPoolClosedError);
    assert.deepEqual(
      {
        ready: p.stats().ready,
        generating: p.stats().generating,
        waiting: p.stats().waiting,
        threads: p.threads.running,
      },
      { ready: 0, generating: 0, waiting: 0, threads: 0 },
    );
    await p.close(); // idempotent
    assertFreshRsa(taken); // the key outlives the worker thread that generated it
  });

  test('rejects a negative size', () => {
    assert.throws(() => createSignerKeys({ rsaPoolSize: -1 }), RangeError);
  });
});

describe('createSignerKeys', () => {
  test('EC keys inline, RSA keys from the pool', async (t) => {
    const keys = createSignerKeys({ rsaPoolSize: 1, threads: 1 });
    t.after(() => keys.close());
    const p256 = await keys.take('P-256');
    const p384 = await keys.take('P-384');
    assert.equal(p256.privateKey.asymmetricKeyDetails?.namedCurve, 'prime256v1');
    assert.equal(p384.privateKey.asymmetricKeyDetails?.namedCurve, 'secp384r1');
    assert.equal(keys.rsa.stats().handedOut, 0);
    assertFreshRsa(await keys.take('RSA-3072'));
    assert.equal(keys.rsa.stats().handedOut, 1);
    await keys.close();
    await assert.rejects(keys.take('RSA-3072'), KeyPoolClosedError);
  });
});
