/**
 * Every folder under src/custody/ is a key custody backend and runs the custody contract
 * (test/custody/custody-contract.ts) by being there: a folder without a registration below fails this file,
 * and so does a registration whose folder is gone.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import type { Pkcs11Custody } from '../../src/custody/pkcs11/custody.ts';
import type { KeyCustody } from '../../src/custody/types.ts';
import { registerCustodyContract, type CustodyRegistration } from '../custody/custody-contract.ts';
import { createTestToken, SOFTHSM2_MODULE, type TestToken, visibleObjects } from '../helpers/softhsm.ts';

const CUSTODY_DIR = new URL('../../src/custody/', import.meta.url);

/** key objects in the token besides the long-lived ones, as the custody's own sessions see them */
async function tokenSignerObjects(custody: KeyCustody): Promise<number> {
  const objects = await visibleObjects((custody as Pkcs11Custody).token);
  return objects.filter((o) => !o.token).length;
}

/** a token of its own for the pkcs11 backend, named by the settings `qtsp serve` takes */
function pkcs11Registration(): CustodyRegistration {
  let token: TestToken | undefined;
  return {
    async keys() {
      token = createTestToken('custody-contract');
      return { provider: 'pkcs11', pkcs11Module: SOFTHSM2_MODULE, tokenLabel: token.label, pinFile: token.pinFile };
    },
    signerObjects: tokenSignerObjects,
    cleanUp: () => token?.close(),
  };
}

const REGISTRATIONS: Readonly<Record<string, CustodyRegistration>> = {
  software: { keys: async () => ({ provider: 'software' }) },
  pkcs11: pkcs11Registration(),
  // the sandbox stand-in: a SoftHSM2 token under the data directory, then the pkcs11 backend on it
  softhsm: { keys: async () => ({ provider: 'softhsm' }), signerObjects: tokenSignerObjects },
};

const folders = readdirSync(CUSTODY_DIR, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name)
  .sort();

describe('every folder under src/custody/ has a custody contract registration', () => {
  it('and every registration a folder', () => {
    assert.ok(folders.length > 0, `no folders under ${CUSTODY_DIR.pathname}`);
    const unregistered = folders.filter((name) => !Object.hasOwn(REGISTRATIONS, name));
    assert.deepEqual(unregistered, [], `register these custody folders in ${import.meta.url}`);
    assert.deepEqual(Object.keys(REGISTRATIONS).sort(), folders, 'a registration names a folder that is gone');
  });
});

for (const name of folders) {
  const registration = REGISTRATIONS[name];
  if (registration) registerCustodyContract(name, registration);
}
