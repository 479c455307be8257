/**
 * The key custody registry (src/custody/registry.ts): backends found by their folder, an unknown or malformed
 * keys.provider refused naming the setting, the sandbox stand-in (softhsm) refused outside `qtsp dev`, and the
 * check that the long-lived keys are where a backend keeps them.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../../src/config/load.ts';
import {
  custodyNames,
  loadCustodyBackend,
  openKeyCustody,
  requireKeyFiles,
  requireKeysIn,
  type LongLivedMaterial,
} from '../../../src/custody/registry.ts';

const material = (heldBy: string | undefined): LongLivedMaterial => ({
  dir: '/data/pki',
  keyFiles: {
    'issuing-ca': '/data/pki/i.key.pem',
    tsa: '/data/pki/t.key.pem',
    'ocsp-responder': '/data/pki/o.key.pem',
    'root-ocsp-responder': '/data/pki/r.key.pem',
  },
  heldBy,
});

const namesKeysProvider = (err: unknown) => err instanceof ConfigError && /^setting keys\.provider:/.test(err.message);

describe('custody registry', () => {
  test('finds the backends by their folders', async () => {
    const names = custodyNames();
    for (const name of ['pkcs11', 'softhsm', 'software']) assert.ok(names.includes(name), name);
    assert.deepEqual(names, [...names].sort());
    for (const name of custodyNames()) assert.equal(typeof (await loadCustodyBackend(name)).open, 'function', name);
    assert.equal((await loadCustodyBackend('software')).openForInit, undefined, 'software keeps key files');
    assert.equal(typeof (await loadCustodyBackend('pkcs11')).openForInit, 'function', 'pkcs11 keeps its keys');
  });

  test('an unknown or malformed provider is a ConfigError naming keys.provider', async () => {
    await assert.rejects(loadCustodyBackend('cloud-kms'), (err: Error) => namesKeysProvider(err));
    await assert.rejects(loadCustodyBackend('../ca'), (err: Error) => namesKeysProvider(err));
    await assert.rejects(loadCustodyBackend('Software'), (err: Error) => namesKeysProvider(err));
    assert.throws(() => loadConfig({ keys: { provider: '../ca' } }, {}), /keys\.provider/);
  });

  test('softhsm is a sandbox stand-in: it runs as pkcs11 in `qtsp dev`, and `qtsp serve` refuses it', async () => {
    const config = loadConfig({ keys: { provider: 'softhsm' } }, {});
    await assert.rejects(
      openKeyCustody(config, { material: material(undefined) }),
      (err: Error) => namesKeysProvider(err) && /sandbox switch/.test(err.message),
    );
    assert.equal(typeof (await loadCustodyBackend('softhsm')).sandbox, 'function');
  });

  test('the long-lived keys must be where the backend keeps them', () => {
    assert.doesNotThrow(() => requireKeyFiles(material(undefined), 'software'));
    assert.throws(
      () => requireKeyFiles(material('pkcs11'), 'software'),
      (err: Error) => namesKeysProvider(err) && /key custody pkcs11/.test(err.message),
    );
    assert.doesNotThrow(() => requireKeysIn(material('pkcs11'), 'pkcs11'));
    assert.throws(
      () => requireKeysIn(material(undefined), 'pkcs11'),
      (err: Error) => namesKeysProvider(err) && /key files/.test(err.message),
    );
    assert.throws(
      () => requireKeysIn(material('other'), 'pkcs11'),
      (err: Error) => namesKeysProvider(err),
    );
  });
});
