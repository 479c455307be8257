/**
 * The one test suite every key custody backend (a folder under src/custody/) must pass. The backend is opened
 * as `qtsp dev` opens it: its sandbox stand-in's settings when it has one, `qtsp pki init` (keyCeremony) for the
 * long-lived keys, then the registry's openKeyCustody. node:crypto is the independent check of every signature.
 * `registerCustodyContract` registers node:test tests for one backend; test/integration/custody-contract.test.ts
 * calls it for every folder.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { constants, verify, type KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { keyCeremony } from '../../src/ca/init.ts';
import { longLivedMaterial } from '../../src/ca/material.ts';
import { loadConfig } from '../../src/config/load.ts';
import type { ConfigInput } from '../../src/config/schema.ts';
import { HASH_ALGORITHMS } from '../../src/crypto/algorithms.ts';
import { SIGNER_ALGORITHMS, type KeyAlgorithm } from '../../src/crypto/keys.ts';
import type { SignatureScheme, SignHash } from '../../src/crypto/signature.ts';
import { custodyNames, openKeyCustody, sandboxKeys } from '../../src/custody/registry.ts';
import { describeLocation, LONG_LIVED_KEYS, type KeyCustody, type SignerKey } from '../../src/custody/types.ts';
import { QTSP_ID } from '../helpers/environment.ts';

export interface CustodyRegistration {
  /** the keys section of the configuration (keys.provider is the folder's name); may prepare what it names */
  keys(): Promise<NonNullable<ConfigInput['keys']>>;
  /**
   * How many key objects the custody holds besides the long-lived ones, where it can show them (a token's
   * session objects); absent for a custody that keeps no store of keys to look into (software).
   */
  signerObjects?(custody: KeyCustody): Promise<number>;
  /** removes what keys() prepared, after the custody is closed */
  cleanUp?(): void;
}

const DATA = Buffer.from('signed attributes, as a CMS would have them');
const HASHES = [...HASH_ALGORITHMS.values()].map((h) => h.node as SignHash);

/** node:crypto's verdict on a signature made by a custody (ECDSA DER-encoded, RSASSA-PSS salt = hash length) */
function verifies(publicKey: KeyObject, scheme: SignatureScheme, hash: SignHash, signature: Buffer, data = DATA) {
  if (scheme === 'ecdsa') return verify(hash, data, { key: publicKey, dsaEncoding: 'der' }, signature);
  const padding =
    scheme === 'rsa-pss'
      ? { padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST }
      : { padding: constants.RSA_PKCS1_PADDING };
  return verify(hash, data, { key: publicKey, ...padding }, signature);
}

/** what the public key of a key of `algorithm` looks like to node:crypto */
function assertPublicKeyOf(key: KeyObject, algorithm: KeyAlgorithm): void {
  if (algorithm === 'RSA-3072') {
    assert.equal(key.asymmetricKeyType, 'rsa');
    assert.equal(key.asymmetricKeyDetails?.modulusLength, 3072);
  } else {
    assert.equal(key.asymmetricKeyType, 'ec');
    assert.equal(key.asymmetricKeyDetails?.namedCurve, algorithm === 'P-256' ? 'prime256v1' : 'secp384r1');
  }
}

export function registerCustodyContract(name: string, registration: CustodyRegistration): void {
  describe(`key custody contract: ${name}`, () => {
    let dataDir: string;
    let custody: KeyCustody;
    const objects = async () => (registration.signerObjects ? registration.signerObjects(custody) : 0);

    before(async () => {
      dataDir = mkdtempSync(join(tmpdir(), `qtsp-custody-${name}-`));
      const input: ConfigInput = {
        dataDir,
        qtspId: QTSP_ID,
        keys: await registration.keys(),
        signer: { rsaPoolSize: 0 },
      };
      let config = loadConfig(input, {});
      assert.equal(config.keys.provider, name, 'the registration configures its own folder');
      const standIn = await sandboxKeys(config);
      if (standIn) config = loadConfig({ ...input, keys: standIn }, {});
      await keyCeremony(config);
      custody = await openKeyCustody(config, { material: longLivedMaterial(dataDir) });
    });
    after(async () => {
      await custody?.close();
      registration.cleanUp?.();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it('is a custody the registry knows, ready, saying where its keys live', () => {
      assert.ok(custodyNames().includes(custody.kind), custody.kind);
      assert.equal(describeLocation(custody.location).split(':')[0], custody.kind);
      assert.deepEqual(custody.readiness(), { ready: true, reasons: [] });
    });

    for (const [signerAlgorithm, { key: algorithm, scheme }] of Object.entries(SIGNER_ALGORITHMS)) {
      it(`${signerAlgorithm}: a fresh signer key signs every hash it supports, node:crypto verifies; destroyed, it is gone`, async () => {
        const before = await objects();
        const key = await custody.createSignerKey(algorithm, scheme);
        assert.equal(key.algorithm, algorithm);
        assert.equal(key.scheme, scheme);
        assertPublicKeyOf(key.publicKey, algorithm);
        const supported = HASHES.filter((hash) => custody.supports(scheme, hash));
        assert.ok(supported.includes('sha256'), 'SHA-256 is signed by every custody');
        for (const hash of supported) {
          const signature = await key.sign(hash, DATA);
          assert.ok(verifies(key.publicKey, scheme, hash, signature), `${hash}: the signature does not verify`);
          assert.equal(verifies(key.publicKey, scheme, hash, signature, Buffer.from('other')), false, hash);
        }
        if (registration.signerObjects) assert.ok((await objects()) > before, 'the key is held where it can be seen');
        await key.destroy();
        await key.destroy(); // idempotent
        await assert.rejects(key.sign('sha256', DATA), 'a destroyed key still signs');
        assert.equal(await objects(), before, 'the destroyed key left objects behind');
      });
    }

    it('two signer keys are never the same key', async () => {
      const keys: SignerKey[] = [];
      try {
        for (let i = 0; i < 2; i++) keys.push(await custody.createSignerKey('P-256', 'ecdsa'));
        const [a, b] = keys.map((k) => k.publicKey.export({ type: 'spki', format: 'der' }).toString('hex'));
        assert.notEqual(a, b);
      } finally {
        for (const k of keys) await k.destroy();
      }
    });

    it("refuses an algorithm it does not offer as the caller's mistake, leaving nothing behind", async () => {
      const before = await objects();
      await assert.rejects(
        custody.createSignerKey('P-521' as KeyAlgorithm, 'ecdsa'),
        (err: Error) => err instanceof TypeError && err.message.includes('P-521'),
      );
      assert.equal(await objects(), before);
      assert.deepEqual(custody.readiness(), { ready: true, reasons: [] }, 'not taken for a custody failure');
      const key = await custody.createSignerKey('P-256', 'ecdsa'); // and it still makes keys
      await key.destroy();
    });

    it('the long-lived keys sign, and their public keys verify', async () => {
      for (const role of LONG_LIVED_KEYS) {
        const key = custody.longLivedKey(role);
        const signature = await key.sign('sha256', DATA);
        assert.ok(verifies(key.publicKey, key.scheme, 'sha256', signature), role);
      }
    });
  });
}
