/**
 * Generations of a long-lived key in a real token (SoftHSM2), as an issuing CA rollover uses them, checked from
 * outside with pkcs11-tool: the next key made beside the current one, the current one kept under a tag, the
 * next one made current. A key handed out before the switch goes on signing with the key it certifies, never
 * with its successor (a certificate must never sign with a key it does not certify); a destroyed tagged key is
 * gone from the token and signs no more. A renewal at a ceremony (ca/renewal.ts) moves keys the same way; one
 * stopped halfway is completed by a rerun: the certificate written beside its file certifies the current key.
 * The ceremony opens the token even when a stopped run left a role without its current key.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { verify, X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { certifyRenewedKey, loadCeremonyRoot, pkiInit } from '../../src/ca/init.ts';
import { custodyMarkerFile, pkiPaths } from '../../src/ca/material.ts';
import { withGenerations } from '../../src/cli/pki-rollover.ts';
import { loadConfig } from '../../src/config/load.ts';
import { pkiUrls } from '../../src/ca/publication.ts';
import { destroyRetiredKeys, renewKeysInCustody, retiredKeys } from '../../src/ca/renewal.ts';
import { fromPem, toPem } from '../../src/util/base64.ts';
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

  it('a renewal stopped halfway in the token is completed by a rerun, the replaced key kept retired', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qtsp-renewal-token-'));
    try {
      const dataDir = join(dir, 'data');
      pkiInit({ dataDir, qtspId: 'sp:sandbox.qtsp.localhost:6f1c4c52-0b0e-4c4e-9d6b-2b9b8f0d7a31' });
      const urls = pkiUrls('http://pki.example');
      const root = loadCeremonyRoot({ dataDir });
      const tsaCert = pkiPaths(dataDir).tsaCert;
      const certified = () => new X509Certificate(fromPem(readFileSync(tsaCert, 'utf8'))[0]!).publicKey;
      // the TSA certificate of the token's key, as a ceremony in the token makes it
      const old = custody.longLivedKey('tsa');
      writeFileSync(tsaCert, toPem(await certifyRenewedKey('tsa', root, old.publicKey, urls), 'CERTIFICATE'));
      // a renewal that stopped after the old key left the current place, before the fresh one took it
      const fresh = await custody.generateTaggedKey('tsa', 'renewing', 'P-256');
      writeFileSync(
        `${tsaCert}.renewing`,
        toPem(await certifyRenewedKey('tsa', root, fresh.publicKey, urls), 'CERTIFICATE'),
      );
      await custody.retagKey('tsa', undefined, 'retired');
      const r = { dataDir, urls, root: () => root, generations: custody };
      assert.deepEqual(await renewKeysInCustody([], r), ['tsa']);
      assert.ok(certified().equals(fresh.publicKey), 'the certificate does not certify the fresh key');
      assert.equal(existsSync(`${tsaCert}.renewing`), false);
      await custody.refreshLongLivedKeys();
      assert.ok(custody.longLivedKey('tsa').publicKey.equals(fresh.publicKey), 'the fresh key is not current');
      assert.equal(privateKey('qtsp-tsa\\.renewing'), undefined);
      // the key the old certificate certifies still signs under it until the ceremony destroys it
      assert.ok(verify('sha256', DATA, { key: old.publicKey, dsaEncoding: 'der' }, await old.sign('sha256', DATA)));
      assert.deepEqual(await retiredKeys(custody), ['tsa']);
      assert.deepEqual(await destroyRetiredKeys(custody), ['tsa']);
      assert.equal(privateKey('qtsp-tsa\\.retired'), undefined, 'pkcs11-tool still lists the retired key');
      // a second rerun finds nothing left to complete
      assert.deepEqual(await renewKeysInCustody([], r), []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a ceremony opens the token when a stopped run left a role without its current key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qtsp-generations-open-'));
    try {
      const dataDir = join(dir, 'data');
      mkdirSync(pkiPaths(dataDir).dir, { recursive: true });
      writeFileSync(custodyMarkerFile(dataDir), `${JSON.stringify({ keys: 'pkcs11' })}\n`);
      const keys = {
        provider: 'pkcs11',
        pkcs11Module: SOFTHSM2_MODULE,
        tokenLabel: token.label,
        pinFile: token.pinFile,
      };
      const config = loadConfig({ dataDir, keys });
      const current = custody.longLivedKey('root-ocsp-responder');
      await custody.retagKey('root-ocsp-responder', undefined, 'retired');
      // the rerun finds the kept key and puts it back (its close logs this process out of the token: last)
      const kept = await withGenerations(config, async (g) => {
        const key = await g!.taggedKey('root-ocsp-responder', 'retired');
        await g!.retagKey('root-ocsp-responder', 'retired', undefined);
        return key.publicKey;
      });
      assert.ok(kept.equals(current.publicKey));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
