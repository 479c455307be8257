/**
 * util/der.ts tlv: the definite-length forms of X.690 8.1.3 at every boundary, against asn1js (a DER writer we
 * did not write), with the content given whole or in parts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as asn1js from 'asn1js';
import { tlv } from '../../../src/util/der.ts';

test('tlv writes the same TLV as asn1js for short and long lengths, content whole or in parts', () => {
  for (const n of [0, 1, 127, 128, 255, 256, 65535, 65536, 16777215, 16777216]) {
    const bytes = Buffer.alloc(n, 7);
    const expected = Buffer.from(new asn1js.OctetString({ valueHex: new Uint8Array(bytes) }).toBER());
    assert.ok(tlv(0x04, bytes).equals(expected), `length ${n}`);
    const half = Math.floor(n / 2);
    assert.ok(
      tlv(0x04, bytes.subarray(0, half), Buffer.alloc(0), bytes.subarray(half)).equals(expected),
      `length ${n} in parts`,
    );
  }
});
