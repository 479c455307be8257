/**
 * crypto/cms.ts keeps the DER pieces a request's signatures repeat. A kept piece must never leak into a
 * signature it does not belong to: another chain after the same signer certificate, another second of
 * signing time, another digest algorithm. Read back with pkijs, not with our DER reader.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { buildCadesBaselineB } from '../../../src/ades/cades.ts';
import { HASH_ALGORITHMS, SHA256 } from '../../../src/crypto/algorithms.ts';
import { CMS_OID } from '../../../src/crypto/cms.ts';
import { SoftwareSigningKey } from '../../../src/crypto/signature.ts';
import { createRootCa, createSubCa } from '../../../src/ca/authority.ts';
import { generateKeyPair } from '../../../src/crypto/keys.ts';
import { OID } from '../../../src/ca/x509.ts';
import { mintTestSignerCertificate } from '../../helpers/signer.ts';

function read(der: Buffer): pkijs.SignedData {
  const info = new pkijs.ContentInfo({ schema: asn1js.fromBER(new Uint8Array(der)).result });
  return new pkijs.SignedData({ schema: info.content });
}
const certificatesOf = (sd: pkijs.SignedData) =>
  (sd.certificates ?? []).map((c) => Buffer.from((c as pkijs.Certificate).toSchema().toBER()).toString('hex'));
function signingTimeOf(sd: pkijs.SignedData): Date | undefined {
  const attr = sd.signerInfos[0]!.signedAttrs?.attributes.find((a) => a.type === CMS_OID.signingTime);
  return attr ? (attr.values[0] as asn1js.UTCTime).toDate() : undefined;
}

test('kept CMS pieces: each signature carries its own chain, signing time and digest algorithm', async () => {
  const ca1 = createRootCa([{ type: OID.commonName, value: 'kept pieces root' }], 'P-256');
  const ca2 = createSubCa(ca1, [{ type: OID.commonName, value: 'kept pieces issuing CA' }], 'P-256');
  const keys = generateKeyPair('P-256');
  const signer = await mintTestSignerCertificate(ca2, keys.publicKey, randomUUID());
  const key = new SoftwareSigningKey(keys.privateKey);
  const sign = (chain: Buffer[], signingTime: Date, hashAlgorithm = SHA256) =>
    buildCadesBaselineB({
      hash: createHash(hashAlgorithm.node).update('doc').digest(),
      hashAlgorithm,
      signerCertificate: signer,
      chain,
      key,
      signingTime,
    });
  const t0 = new Date('2026-11-25T10:00:00.100Z');
  const t1 = new Date('2026-11-25T10:00:01.000Z');
  const hex = (b: Buffer) => b.toString('hex');

  const a = read(await sign([ca1.der], t0));
  const b = read(await sign([ca2.der], t0)); // same signer certificate, another chain of the same length
  const c = read(await sign([ca1.der, ca2.der], t1)); // a longer chain, the next second
  const d = read(await sign([], new Date('2026-11-25T10:00:00.900Z'), HASH_ALGORITHMS.get('2.16.840.1.101.3.4.2.2')!)); // back to t0's second, SHA-384

  assert.deepEqual(certificatesOf(a), [hex(signer.der), hex(ca1.der)]);
  assert.deepEqual(certificatesOf(b), [hex(signer.der), hex(ca2.der)]);
  assert.deepEqual(certificatesOf(c), [hex(signer.der), hex(ca1.der), hex(ca2.der)]);
  assert.deepEqual(certificatesOf(d), [hex(signer.der)]);
  assert.equal(signingTimeOf(a)?.toISOString(), '2026-11-25T10:00:00.000Z');
  assert.equal(signingTimeOf(c)?.toISOString(), '2026-11-25T10:00:01.000Z');
  assert.equal(signingTimeOf(d)?.toISOString(), '2026-11-25T10:00:00.000Z');
  assert.deepEqual(
    [a, b, c].map((sd) => sd.digestAlgorithms[0]!.algorithmId),
    [SHA256.oid, SHA256.oid, SHA256.oid],
  );
  assert.equal(d.digestAlgorithms[0]!.algorithmId, '2.16.840.1.101.3.4.2.2');
  assert.equal(d.signerInfos[0]!.digestAlgorithm.algorithmId, '2.16.840.1.101.3.4.2.2');
});
