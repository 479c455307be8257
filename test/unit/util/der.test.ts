/**
 * util/der.ts tlv: the definite-length forms of X.690 8.1.3 at every boundary, against asn1js (a DER writer we
 * did not write), with the content given whole or in parts; algorithmIdentifier against pkijs, encoded once;
 * GeneralizedTime with milliseconds in DER (X.690 11.7), against asn1js's writer and reader.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { algorithmIdentifier, generalizedTimeMillis, tlv } from '../../../src/util/der.ts';

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

test('algorithmIdentifier writes what pkijs writes, with and without NULL parameters, and encodes each once', () => {
  for (const [oid, nullParams] of [
    ['1.2.840.10045.4.3.2', false],
    ['1.2.840.113549.1.1.11', true],
    ['2.16.840.1.101.3.4.2.1', false],
  ] as const) {
    const expected = new pkijs.AlgorithmIdentifier(
      nullParams ? { algorithmId: oid, algorithmParams: new asn1js.Null() } : { algorithmId: oid },
    );
    const der = algorithmIdentifier(oid, nullParams);
    assert.ok(der.equals(Buffer.from(expected.toSchema().toBER())), oid);
    assert.equal(algorithmIdentifier(oid, nullParams), der, `${oid}: the kept encoding`);
  }
  assert.ok(
    !algorithmIdentifier('1.2.840.113549.1.1.11', false).equals(algorithmIdentifier('1.2.840.113549.1.1.11', true)),
  );
});

test('generalizedTimeMillis: a fraction without trailing zeros, none for a whole second, final Z (X.690 11.7)', () => {
  const cases: [string, string][] = [
    ['2026-11-29T07:25:59.120Z', '20261129072559.12Z'],
    ['2026-11-29T07:25:59.005Z', '20261129072559.005Z'],
    ['2026-11-29T07:25:59.999Z', '20261129072559.999Z'],
    ['2026-11-29T07:25:59.100Z', '20261129072559.1Z'],
    ['2026-11-29T07:25:59.000Z', '20261129072559Z'],
  ];
  for (const [iso, text] of cases) {
    const der = generalizedTimeMillis(new Date(iso));
    assert.equal(der[0], 0x18);
    assert.equal(der.subarray(2).toString('latin1'), text, iso);
    const theirs = new asn1js.GeneralizedTime({ valueDate: new Date(iso) });
    assert.ok(der.equals(Buffer.from(theirs.toBER())), `${iso}: asn1js writes the same DER`);
    const read = asn1js.fromBER(new Uint8Array(der)).result as asn1js.GeneralizedTime;
    assert.equal(read.toDate().toISOString(), iso, `${iso}: asn1js reads it back`);
  }
});
