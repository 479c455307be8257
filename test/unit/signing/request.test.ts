/**
 * Step 1 of signDoc (src/signing/request.ts): an optional member sent as null is read as absent, as the
 * contract says (openapi.yaml, SignDocRequest), because relying-party libraries send null for an option their
 * caller left out; a required member sent as null, or an unknown one, is still refused.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SignDocError } from '../../../src/errors.ts';
import { parseSignDocRequest } from '../../../src/signing/request.ts';

const body = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  SAD: 'a.b.c',
  credentialID: 'qes_eidas',
  documentDigests: { hashes: [Buffer.alloc(32, 7).toString('base64')], hashAlgorithmOID: '2.16.840.1.101.3.4.2.1' },
  profile: 'http://uri.etsi.org/19432/v1.1.1#/creationprofile#',
  signature_format: 'C',
  ...extra,
});

function refusal(input: unknown): string {
  try {
    parseSignDocRequest(input);
  } catch (err) {
    assert.ok(err instanceof SignDocError);
    assert.equal(err.status, 400);
    return err.toBody().error_description;
  }
  assert.fail('the request was accepted');
}

test('conformance_level null is the default level, as if absent', () => {
  assert.equal(parseSignDocRequest(body({ conformance_level: null })).level, 'AdES-B-B');
  assert.equal(parseSignDocRequest(body()).level, 'AdES-B-B');
  assert.equal(parseSignDocRequest(body({ conformance_level: 'AdES-B-LT' })).level, 'AdES-B-LT');
});

test('signAlgo and signAlgoParams null are absent', () => {
  const parsed = parseSignDocRequest(body({ signAlgo: null, signAlgoParams: null }));
  assert.equal('signAlgo' in parsed.body, false);
  assert.equal('signAlgoParams' in parsed.body, false);
  assert.deepEqual(parsed.body, parseSignDocRequest(body()).body);
});

test('a required member sent as null is refused, naming it', () => {
  assert.match(refusal(body({ signature_format: null })), /signature_format/);
  assert.match(refusal(body({ SAD: null })), /SAD/);
});

test('an unknown member is refused even when null', () => {
  assert.match(refusal(body({ foo: null })), /unknown parameter 'foo'/);
});

test('a wrong value of an optional member is still refused', () => {
  assert.match(refusal(body({ conformance_level: 'AdES-B-X' })), /conformance_level/);
  assert.match(refusal(body({ conformance_level: 0 })), /conformance_level/);
});
