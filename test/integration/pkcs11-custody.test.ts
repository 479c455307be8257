/**
 * PKCS#11 key custody against a real token (SoftHSM2 in a temp dir), checked from outside by pkcs11-tool
 * (OpenSC) and node:crypto: long-lived keys as sensitive, never-extractable token objects that cannot be read;
 * signer keys as session objects that are gone after destroy (also after a failed signature); signatures of
 * every scheme and hash verified by OpenSSL through node:crypto; start failures naming the setting (never the
 * PIN); a token that disappears and comes back.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { constants, createECDH, verify, type KeyObject } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HASH_ALGORITHMS } from '../../src/crypto/algorithms.ts';
import { ConfigError } from '../../src/config/load.ts';
import type { SignHash } from '../../src/crypto/signature.ts';
import type { KeyAlgorithm, SignatureScheme } from '../../src/crypto/keys.ts';
import { Pkcs11Custody } from '../../src/custody/pkcs11/custody.ts';
import { LONG_LIVED_LABELS } from '../../src/custody/pkcs11/objects.ts';
import { pkcs11js } from '../../src/custody/pkcs11/token.ts';
import { KeyCustodyUnavailable, LONG_LIVED_KEYS } from '../../src/custody/types.ts';
import { createTestToken, SOFTHSM2_MODULE, type TestToken } from '../helpers/softhsm.ts';

const HASHES = [...HASH_ALGORITHMS.values()].map((h) => h.node as SignHash);
const DATA = Buffer.from('signed attributes, as a CMS would have them');

function verifies(
  publicKey: KeyObject,
  scheme: SignatureScheme,
  hash: SignHash,
  signature: Buffer,
  data = DATA,
): boolean {
  if (scheme === 'ecdsa') return verify(hash, data, { key: publicKey, dsaEncoding: 'der' }, signature);
  if (scheme === 'rsa-pss')
    return verify(
      hash,
      data,
      { key: publicKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST },
      signature,
    );
  return verify(hash, data, { key: publicKey, padding: constants.RSA_PKCS1_PADDING }, signature);
}

/** pkcs11-tool's object list, one entry per object: "Private Key Object; EC ... label: qtsp-tsa ..." */
function objects(listing: string): string[] {
  return listing.split(/\n(?=\S)/).filter((o) => /Object;/.test(o));
}

describe('PKCS#11 key custody (SoftHSM2)', () => {
  let token: TestToken;
  let custody: Pkcs11Custody;
  const options = () => ({
    module: SOFTHSM2_MODULE,
    tokenLabel: token.label,
    pinFile: token.pinFile,
    sessions: 3,
    qscd: false,
    rsaPoolSize: 1,
    probeIntervalMs: 100,
  });

  before(async () => {
    token = createTestToken('custody-test');
    const init = await Pkcs11Custody.open({ ...options(), requireLongLivedKeys: false, rsaPoolSize: 0 });
    for (const name of LONG_LIVED_KEYS)
      await init.generateLongLivedKey(
        name,
        name === 'tsa' ? 'RSA-3072' : name === 'ocsp-responder' ? 'P-384' : 'P-256',
      );
    await init.close();
  });
  after(async () => {
    await custody?.close();
    token?.close();
  });

  // first, while no custody of this process is logged in (a login holds for the whole application)
  it('fails the start naming the setting: module, token label, PIN file (never the PIN)', async () => {
    const wrongPin = join(token.conf, '..', 'wrong.pin');
    writeFileSync(wrongPin, '000000000\n');
    await assert.rejects(
      Pkcs11Custody.open({ ...options(), pinFile: wrongPin }),
      (err: Error) =>
        err instanceof ConfigError && /keys\.pinFile/.test(err.message) && !err.message.includes('000000000'),
    );
    await assert.rejects(
      Pkcs11Custody.open({ ...options(), pinFile: join(token.conf, '..', 'missing.pin') }),
      (err: Error) => err instanceof ConfigError && /keys\.pinFile/.test(err.message),
    );
    await assert.rejects(
      Pkcs11Custody.open({ ...options(), tokenLabel: 'no-such-token' }),
      (err: Error) => err instanceof ConfigError && /keys\.tokenLabel/.test(err.message),
    );
    await assert.rejects(
      Pkcs11Custody.open({ ...options(), module: '/nonexistent/libpkcs11.so' }),
      (err: Error) => err instanceof ConfigError && /keys\.pkcs11Module/.test(err.message),
    );
    custody = await Pkcs11Custody.open(options());
    const key = await custody.createSignerKey('P-256', 'ecdsa');
    assert.ok(verifies(key.publicKey, 'ecdsa', 'sha256', await key.sign('sha256', DATA)));
    await key.destroy();
  });

  it('signs with the long-lived keys, whose public keys it read from the token', async () => {
    for (const name of LONG_LIVED_KEYS) {
      const key = custody.longLivedKey(name);
      const hash: SignHash = key.algorithm === 'P-384' ? 'sha384' : 'sha256';
      assert.ok(verifies(key.publicKey, key.scheme, hash, await key.sign(hash, DATA)), name);
    }
    assert.deepEqual(custody.location, { kind: 'pkcs11', tokenLabel: token.label, tokenSerial: custody.token.serial });
  });

  it('long-lived keys are sensitive, never extractable token objects whose value cannot be read', async () => {
    const listing = objects(token.listObjects());
    for (const label of Object.values(LONG_LIVED_LABELS)) {
      const privateKey = listing.find((o) => o.startsWith('Private Key Object') && o.includes(`label:      ${label}`));
      assert.ok(privateKey, `${label} listed`);
      assert.match(privateKey, /Access:\s+sensitive, always sensitive, never extractable/);
      assert.match(privateKey, /Usage:\s+sign\s*$/m);
      // pkcs11-tool 0.23 reads no private key (its exit status says nothing): no value may come out of it
      const read = token.readPrivateKey(label);
      assert.equal(read.file, undefined, `pkcs11-tool wrote a value of ${label}: ${read.output}`);
    }
    // the token itself refuses the value (CKR_ATTRIBUTE_SENSITIVE) and any export (CKR_KEY_UNEXTRACTABLE),
    // while it hands out the value of a deliberately extractable control key made the same way
    const p = custody.token.pkcs11;
    await custody.token.withSession(async (session) => {
      for (const label of Object.values(LONG_LIVED_LABELS)) {
        p.C_FindObjectsInit(session, [
          { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
          { type: pkcs11js.CKA_LABEL, value: label },
        ]);
        const [handle] = p.C_FindObjects(session, 1);
        p.C_FindObjectsFinal(session);
        const secret = label === 'qtsp-tsa' ? pkcs11js.CKA_PRIVATE_EXPONENT : pkcs11js.CKA_VALUE;
        assert.throws(
          () => p.C_GetAttributeValue(session, handle!, [{ type: secret }]),
          /CKR_ATTRIBUTE_SENSITIVE/,
          label,
        );
        const wrapping = p.C_GenerateKey(session, { mechanism: pkcs11js.CKM_AES_KEY_GEN }, [
          { type: pkcs11js.CKA_TOKEN, value: false },
          { type: pkcs11js.CKA_VALUE_LEN, value: 32 },
          { type: pkcs11js.CKA_WRAP, value: true },
        ]);
        try {
          assert.throws(
            () =>
              p.C_WrapKey(session, { mechanism: pkcs11js.CKM_AES_KEY_WRAP_PAD }, wrapping, handle!, Buffer.alloc(4096)),
            /CKR_KEY_UNEXTRACTABLE/,
            label,
          );
        } finally {
          p.C_DestroyObject(session, wrapping);
        }
      }
      const control = p.C_GenerateKeyPair(
        session,
        { mechanism: pkcs11js.CKM_EC_KEY_PAIR_GEN },
        [
          { type: pkcs11js.CKA_TOKEN, value: false },
          { type: pkcs11js.CKA_EC_PARAMS, value: Buffer.from('06082a8648ce3d030107', 'hex') },
        ],
        [
          { type: pkcs11js.CKA_TOKEN, value: false },
          { type: pkcs11js.CKA_SENSITIVE, value: false },
          { type: pkcs11js.CKA_EXTRACTABLE, value: true },
          { type: pkcs11js.CKA_SIGN, value: true },
        ],
      );
      try {
        // the scalar comes as an integer without leading zero bytes (31 bytes or fewer now and then); it is
        // the key if it yields the public point the token holds (CKA_EC_POINT: DER OCTET STRING of 04|X|Y)
        const [scalar] = p.C_GetAttributeValue(session, control.privateKey, [{ type: pkcs11js.CKA_VALUE }]);
        const [point] = p.C_GetAttributeValue(session, control.publicKey, [{ type: pkcs11js.CKA_EC_POINT }]);
        assert.ok(scalar!.value.length > 0 && scalar!.value.length <= 32, `scalar of ${scalar!.value.length} bytes`);
        const ecdh = createECDH('prime256v1');
        ecdh.setPrivateKey(Buffer.concat([Buffer.alloc(32 - scalar!.value.length), scalar!.value]));
        assert.deepEqual(ecdh.getPublicKey(), point!.value.subarray(-65));
      } finally {
        p.C_DestroyObject(session, control.privateKey);
        p.C_DestroyObject(session, control.publicKey);
      }
    });
  });

  it('signer keys: every key type, scheme and hash, verified by OpenSSL; no object left behind', async () => {
    const kinds: [KeyAlgorithm, SignatureScheme][] = [
      ['P-256', 'ecdsa'],
      ['P-384', 'ecdsa'],
      ['RSA-3072', 'rsa-pkcs1-v1_5'],
      ['RSA-3072', 'rsa-pss'],
    ];
    for (const [algorithm, scheme] of kinds) {
      const key = await custody.createSignerKey(algorithm, scheme);
      try {
        assert.equal(key.algorithm, algorithm);
        for (const hash of HASHES) {
          if (!custody.supports(scheme, hash)) continue;
          const signature = await key.sign(hash, DATA);
          assert.ok(verifies(key.publicKey, scheme, hash, signature), `${algorithm} ${scheme} ${hash}`);
          assert.ok(!verifies(key.publicKey, scheme, hash, signature, Buffer.from('other data')));
        }
        if (scheme === 'ecdsa') {
          const raw = await key.sign('sha256', DATA, 'ieee-p1363');
          assert.ok(verify('sha256', DATA, { key: key.publicKey, dsaEncoding: 'ieee-p1363' }, raw));
        }
      } finally {
        await key.destroy();
      }
    }
    // SoftHSM 2.6 speaks PKCS#11 2.40: no SHA-3 in CK_RSA_PKCS_PSS_PARAMS, and we say so instead of failing
    assert.equal(custody.supports('rsa-pss', 'sha3-256'), false);
    assert.equal(custody.supports('rsa-pss', 'sha256'), true);
    assert.equal(custody.supports('ecdsa', 'sha3-512'), true);
    await custody.close();
    custody = await Pkcs11Custody.open({ ...options(), rsaPoolSize: 0 });
    const left = objects(token.listObjects());
    assert.equal(left.length, 2 * LONG_LIVED_KEYS.length, left.join('\n'));
    assert.ok(
      left.every((o) => /label:\s+qtsp-(issuing-ca|tsa|ocsp-responder|root-ocsp-responder)\n/.test(`${o}\n`)),
      left.join('\n'),
    );
  });

  it('a destroyed key cannot sign, and destroy after a failed signature leaves nothing', async () => {
    const rsa = await custody.createSignerKey('RSA-3072', 'rsa-pss');
    try {
      await rsa.sign('sha256', DATA);
      await assert.rejects(rsa.sign('sha3-256', DATA), KeyCustodyUnavailable); // the token refuses mid-signing
    } finally {
      await rsa.destroy();
    }
    const key = await custody.createSignerKey('P-256', 'ecdsa');
    await key.destroy();
    await key.destroy(); // idempotent
    await assert.rejects(key.sign('sha256', DATA), TypeError);
    const listing = objects(token.listObjects());
    assert.equal(listing.length, 2 * LONG_LIVED_KEYS.length);
  });

  it('a token that disappears: 503-kind failures and readiness says why; when it is back, signing works again', async () => {
    const tokens = join(token.conf, '..', 'tokens');
    renameSync(tokens, `${tokens}.away`);
    try {
      await assert.rejects(custody.longLivedKey('issuing-ca').sign('sha256', DATA), KeyCustodyUnavailable);
      for (let i = 0; i < 500 && custody.readiness().ready; i++) await new Promise((r) => setTimeout(r, 20));
      assert.match(custody.readiness().reasons.join(), /custody-test.*does not answer/);
      await assert.rejects(custody.createSignerKey('P-256', 'ecdsa'), KeyCustodyUnavailable);
    } finally {
      renameSync(`${tokens}.away`, tokens);
    }
    for (let i = 0; i < 500 && !custody.readiness().ready; i++) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(custody.readiness(), { ready: true, reasons: [] }, 'ready again once the token is back');
    const key = custody.longLivedKey('issuing-ca');
    assert.ok(verifies(key.publicKey, 'ecdsa', 'sha256', await key.sign('sha256', DATA)));
  });
  it('a key a ceremony renewed: the retired one signs until the switch; once destroyed, unavailable until then', async () => {
    const ceremony = await Pkcs11Custody.open({ ...options(), requireLongLivedKeys: false, rsaPoolSize: 0 });
    try {
      const inUse = custody.longLivedKey('ocsp-responder');
      // a renewal at a ceremony (ca/renewal.ts): the fresh key made tagged, then moved to the current place
      const fresh = await ceremony.generateTaggedKey('ocsp-responder', 'renewing', 'P-384');
      await ceremony.retagKey('ocsp-responder', undefined, 'retired');
      await ceremony.retagKey('ocsp-responder', 'renewing', undefined);
      const labels = objects(token.listObjects()).map((o) => /label:\s+(\S+)/.exec(o)?.[1]);
      for (const suffix of ['', '.retired'])
        assert.equal(labels.filter((l) => l === `${LONG_LIVED_LABELS['ocsp-responder']}${suffix}`).length, 2);
      assert.ok(verifies(inUse.publicKey, 'ecdsa', 'sha256', await inUse.sign('sha256', DATA)), 'the retired key');
      assert.equal(await ceremony.destroyTaggedKey('ocsp-responder', 'retired'), true);
      // never the new key under the old certificate: unavailable, naming the replaced key
      await assert.rejects(inUse.sign('sha256', DATA), KeyCustodyUnavailable);
      for (let i = 0; i < 500 && !/new key/.test(custody.readiness().reasons.join()); i++)
        await new Promise((r) => setTimeout(r, 20));
      assert.match(custody.readiness().reasons.join(), /holds a new key qtsp-ocsp-responder, used once the instance/);
      await custody.refreshLongLivedKeys(); // the reload (trust-services.ts)
      assert.ok(custody.longLivedKey('ocsp-responder').publicKey.equals(fresh.publicKey));
      for (let i = 0; i < 500 && !custody.readiness().ready; i++) await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(custody.readiness(), { ready: true, reasons: [] }, 'ready once the new key is installed');
      const key = custody.longLivedKey('ocsp-responder');
      assert.ok(verifies(fresh.publicKey, 'ecdsa', 'sha384', await key.sign('sha384', DATA)), 'the fresh key');
    } finally {
      await ceremony.close();
    }
  });
});
