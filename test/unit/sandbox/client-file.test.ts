/** The account chooser's redirect URIs of an RP registered from a file or an option (spec 2.1, 2.14). */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ClientFileError, parseClientOption } from '../../../src/sandbox/client-file.ts';

const FP = 'A'.repeat(43);
const entry = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ client_id: 'rp', redirect_uris: ['https://rp.example/cb'], 'x5t#S256': FP, ...extra });

describe('client-file: account_chooser_redirect_uris', () => {
  it('given: kept in order; not given: none', () => {
    const uris = ['https://rp.example/bank-chosen', 'com.example.app:/bank-chosen'];
    assert.deepEqual(
      parseClientOption(entry({ account_chooser_redirect_uris: uris })).accountChooserRedirectUris,
      uris,
    );
    assert.deepEqual(parseClientOption(entry()).accountChooserRedirectUris, []);
  });

  it('the same URI rules as redirect_uris: no fragment, http only on loopback', () => {
    for (const bad of ['https://rp.example/chosen#x', 'http://rp.example/chosen', 'not a uri']) {
      assert.throws(
        () => parseClientOption(entry({ account_chooser_redirect_uris: [bad] })),
        (e: Error) => e instanceof ClientFileError && /account_chooser_redirect_uris\.0/.test(e.message),
        bad,
      );
    }
    const loopback = parseClientOption(entry({ account_chooser_redirect_uris: ['http://127.0.0.1:8000/chosen'] }));
    assert.deepEqual(loopback.accountChooserRedirectUris, ['http://127.0.0.1:8000/chosen']);
  });
});
