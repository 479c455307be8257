/**
 * The RP's checks of the authorization response (spec 5.11, 7.3) and the signDoc request it builds (2.12),
 * on their own: no server.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkCallback, RpFlowError, SIGN_DOC_PROFILE, signDocRequest } from '../../../src/rp/flow.ts';

const expected = { state: 'state-1', issuer: 'https://bank.example' };
const params = (p: Record<string, string>) => new URLSearchParams(p);

function flowError(fn: () => unknown): RpFlowError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof RpFlowError, String(err));
    return err;
  }
  assert.fail('no error raised');
}

describe('checkCallback', () => {
  it('answers the code when state and iss are the ones expected', () => {
    assert.equal(checkCallback(params({ code: 'c', state: 'state-1', iss: 'https://bank.example' }), expected), 'c');
  });

  it('refuses another state, also on an error redirect', () => {
    const err = flowError(() =>
      checkCallback(params({ error: 'access_denied', state: 'other', iss: expected.issuer }), expected),
    );
    assert.match(err.message, /state differs/);
    assert.equal(err.error, undefined);
  });

  it('refuses another or a missing iss (mix-up protection)', () => {
    for (const iss of [{ iss: 'https://evil.example' }, {}] as Record<string, string>[]) {
      const err = flowError(() => checkCallback(params({ code: 'c', state: 'state-1', ...iss }), expected));
      assert.match(err.message, /mix-up/);
    }
  });

  it('raises an error redirect with its error code and description', () => {
    const err = flowError(() =>
      checkCallback(
        params({ error: 'account_selection_requested', error_description: 'another bank', ...expectedParams() }),
        expected,
      ),
    );
    assert.equal(err.error, 'account_selection_requested');
    assert.equal(err.errorDescription, 'another bank');
  });

  it('refuses a redirect without code or error', () => {
    assert.match(flowError(() => checkCallback(params(expectedParams()), expected)).message, /no code/);
  });
});

function expectedParams(): Record<string, string> {
  return { state: expected.state, iss: expected.issuer };
}

describe('signDocRequest', () => {
  it('carries the SAD, the hashes, the format and level, and signAlgo only when given', () => {
    const body = signDocRequest(
      { accessToken: 'jwt' },
      { hashes: ['aGFzaA=='], hashAlgorithmOID: '2.16.840.1.101.3.4.2.1', format: 'C', level: 'AdES-B-T' },
    );
    assert.deepEqual(body, {
      SAD: 'jwt',
      credentialID: 'qes_eidas',
      documentDigests: { hashes: ['aGFzaA=='], hashAlgorithmOID: '2.16.840.1.101.3.4.2.1' },
      profile: SIGN_DOC_PROFILE,
      signature_format: 'C',
      conformance_level: 'AdES-B-T',
    });
  });
});
