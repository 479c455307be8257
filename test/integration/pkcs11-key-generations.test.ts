/**
 * Generations of a long-lived key in a real token (SoftHSM2), as an issuing CA rollover uses them, checked from
 * outside with pkcs11-tool: the next key made beside the current one, the current one kept under a tag, the
 * next one made current. A key handed out before the switch goes on signing with the key it certifies, never
 * with its successor (a certificate must never sign with a key it does not certify); a destroyed tagged key is
 * gone from the token and signs no more.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { verify } from 'node:crypto';
import { Pkcs11Custody } from '../../src/custody/pkcs11/custody.ts';
import { LONG_LIVED_KEYS } from '../../src/custody/types.ts';
import { createTestToken, SOFTHSM2_MODULE, type TestToken } from '../helpers/softhsm.ts';

const DATA = Buffer.from('a certificate to be signed');

describe('PKCS#11 key generations (SoftHSM2)', () => {
  let token: TestToken;
  let custody: Pkcs11Custody;
  const privateKey = (label: string) =>
    token
      .listObjects()
      .split(/\n(?=\S)/)
      .find((o) => o.startsWith('Private Key Object') && new RegExp(`label:\\s+${label}\\n`).test(o));

  before(async () => {
    token = createTestToken('generations-test');
    custody = await Pkcs11Custody.open({
      module: SOFTHSM2_MODULE,
      tokenLabel: token.label,
      pinFile: token.pinFile,
      sessions: 2,
      qscd: false,
      rsaPoolSize: 0,
      requireLongLivedKeys: false,
    });
    for (const name of LONG_LIVED_KEYS) await custody.generateLongLivedKey(name, 'P-256');
  });
  after(async () => {
    await custody?.close();
    token?.close();
  });

  it('a key handed out before a rollover signs with its own key after it; the new one is current', async () => {
    const old = custody.longLivedKey('issuing-ca');
    await custody.generateTaggedKey('issuing-ca', 'next', 'P-256');
    await custody.retagKey('issuing-ca', undefined, '0123456789abcdef');
    await custody.retagKey('issuing-ca', 'next', undefined);
    await custody.refreshLongLivedKeys();
    const current = custody.longLivedKey('issuing-ca');
    assert.ok(!current.publicKey.equals(old.publicKey), 'the current key did not change');
    assert.ok(verify('sha256', DATA, { key: old.publicKey, dsaEncoding: 'der' }, await old.sign('sha256', DATA)));
    assert.ok(verify('sha256', DATA, current.publicKey, await current.sign('sha256', DATA)));
    assert.match(privateKey('qtsp-issuing-ca')!, /Access:\s+sensitive, always sensitive, never extractable/);
    assert.ok(privateKey('qtsp-issuing-ca\\.0123456789abcdef'), 'the retired key is not kept under its tag');
    assert.equal(privateKey('qtsp-issuing-ca\\.next'), undefined);
    const tagged = await custody.taggedKey('issuing-ca', '0123456789abcdef');
    assert.ok(tagged.publicKey.equals(old.publicKey));
  });

  it('a destroyed tagged key is gone from the token and signs no more', async () => {
    const old = await custody.taggedKey('issuing-ca', '0123456789abcdef');
    assert.equal(await custody.destroyTaggedKey('issuing-ca', '0123456789abcdef'), true);
    assert.equal(privateKey('qtsp-issuing-ca\\.0123456789abcdef'), undefined, 'pkcs11-tool still lists the key');
    await assert.rejects(old.sign('sha256', DATA));
    assert.equal(await custody.destroyTaggedKey('issuing-ca', '0123456789abcdef'), false);
    assert.ok(privateKey('qtsp-issuing-ca'), 'the current key went too');
  });
});
