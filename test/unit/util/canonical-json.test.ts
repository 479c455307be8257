/**
 * util/canonical-json.ts: RFC 8785 text, strings written exactly as JSON.stringify writes them (RFC 8785
 * 3.2.2.2), whether they take the plain path or the escaped one; members sorted by UTF-16 code units.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalJson } from '../../../src/util/canonical-json.ts';

describe('canonicalJson', () => {
  it('writes every string as JSON.stringify does', () => {
    const strings = [
      '',
      'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln',
      'MIIB+/9=',
      ...Array.from({ length: 0x80 }, (_, c) => `a${String.fromCharCode(c)}b`),
      'ä €', // non-ASCII, written as it is
      '\ud800', // a lone surrogate, escaped
      '\ud83d\ude00', // a pair, written as it is
      '\u2028\u2029',
    ];
    for (const s of strings) assert.equal(canonicalJson(s), JSON.stringify(s), JSON.stringify(s));
    assert.equal(canonicalJson({ k: strings }), `{"k":${JSON.stringify(strings)}}`);
  });

  it('sorts members by UTF-16 code units, skips undefined ones, and nests', () => {
    const value = { b: [1, true, null, { z: 'x', a: [] }], a: 'y', '\u20ac': 1, '\ud83d\ude00': 2, c: undefined };
    assert.equal(
      canonicalJson(value as never),
      '{"a":"y","b":[1,true,null,{"a":[],"z":"x"}],"\u20ac":1,"\ud83d\ude00":2}',
    );
    assert.equal(canonicalJson([]), '[]');
    assert.equal(canonicalJson({}), '{}');
  });

  it('refuses numbers that are not safe integers', () => {
    assert.throws(() => canonicalJson(1.5), /not a safe integer/);
    assert.throws(() => canonicalJson(2 ** 53), /not a safe integer/);
  });
});
