/**
 * custody/pkcs11/token.ts against SoftHSM2: the module is initialised once per process and reads SOFTHSM2_CONF
 * then, so a token of another configuration is refused while one is open (it would be looked for among the
 * first configuration's tokens), and opens once that one is closed.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '../../../../src/config/load.ts';
import { Pkcs11Token } from '../../../../src/custody/pkcs11/token.ts';
import { createTestToken, SOFTHSM2_MODULE, type TestToken } from '../../../helpers/softhsm.ts';

const made: TestToken[] = [];
after(() => {
  for (const t of made.reverse()) t.close();
});

function open(token: TestToken): Pkcs11Token {
  return Pkcs11Token.open({ module: SOFTHSM2_MODULE, tokenLabel: token.label, pin: token.pin, sessions: 1 });
}

test('a token of another SoftHSM2 configuration: refused while one is open, opened once it is closed', () => {
  const first = createTestToken('first-conf');
  made.push(first);
  const a = open(first);
  let closedA = false;
  try {
    const second = createTestToken('second-conf'); // points SOFTHSM2_CONF at its own configuration
    made.push(second);
    assert.throws(
      () => open(second),
      (err: Error) =>
        err instanceof ConfigError &&
        err.message.includes(`in use in this process with SOFTHSM2_CONF=${first.conf}`) &&
        err.message.includes(`a token under SOFTHSM2_CONF=${second.conf}`),
    );
    a.close();
    closedA = true;
    const b = open(second);
    try {
      assert.equal(b.label, 'second-conf');
      assert.ok(b.serial);
    } finally {
      b.close();
    }
  } finally {
    if (!closedA) a.close();
  }
});
