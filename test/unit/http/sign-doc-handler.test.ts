/**
 * The signDoc answer's JSON written by hand (sign-doc-handler.ts signDocAnswerJson) must be the very text
 * JSON.stringify makes of the answer object, and Base64Text must never carry a character that JSON would have to
 * escape.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { signDocAnswerJson } from '../../../src/http/sign-doc-handler.ts';
import { base64JsonArray, base64Text, checkedBase64Text, type Base64Text } from '../../../src/util/base64.ts';

const texts = (...sizes: number[]): Base64Text[] => sizes.map((n) => base64Text(randomBytes(n)));
/** the answer object of signDoc as JSON.stringify writes it */
const reference = (r: { SignatureObject: Base64Text[]; revocationInfo?: { ocsp: Base64Text[]; crl: Base64Text[] } }) =>
  JSON.stringify({
    SignatureObject: r.SignatureObject,
    ...(r.revocationInfo ? { revocationInfo: r.revocationInfo } : {}),
  });

test('signDoc answer: the same text as JSON.stringify, with and without revocationInfo', () => {
  const cases = [
    { SignatureObject: texts(1500) },
    { SignatureObject: texts(2000, 2001, 2002, 0, 1) }, // every padding length, and an empty signature
    { SignatureObject: texts(1800), revocationInfo: { ocsp: texts(900), crl: texts(400, 500) } },
    { SignatureObject: texts(1800, 1900), revocationInfo: { ocsp: [], crl: texts(10) } },
    { SignatureObject: [] },
  ];
  for (const c of cases) assert.equal(signDocAnswerJson(c), reference(c));
  assert.equal(base64JsonArray([]), JSON.stringify([]));
});

test('Base64Text: text read back is checked; anything JSON would escape is refused', () => {
  const fine = base64Text(randomBytes(100));
  assert.equal(checkedBase64Text(fine), fine);
  for (const bad of ['ab"cd', 'ab\\cd', 'ab\ncd', 'abc\u2028', 'ab cd', 'abc-_']) {
    assert.throws(() => checkedBase64Text(bad), /not Base64 text/, JSON.stringify(bad));
  }
});
