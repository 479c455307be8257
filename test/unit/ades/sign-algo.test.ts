/**
 * signAlgo / signAlgoParams resolution (spec 2.12; rules in src/ades/offer.ts) for every OID we accept and a
 * selection we do not, and the RSASSA-PSS parameters (src/crypto/signature.ts) and keys (src/pki/keys.ts).
 */
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { constants, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { HASH_ALGORITHMS, SIGNATURE_OIDS, type HashAlgorithm } from '../../../src/crypto/algorithms.ts';
import { chooseSigning, resolveSignAlgo } from '../../../src/ades/offer.ts';
import { DomainError } from '../../../src/domain-error.ts';
import { signingKeyFor, SIGNER_ALGORITHMS, type SignerAlgorithm } from '../../../src/crypto/keys.ts';
import {
  algorithmIdentifier,
  rsaPssParams,
  signatureAlgorithm,
  signWith,
  type SignHash,
} from '../../../src/crypto/signature.ts';

const HASHES = [...HASH_ALGORITHMS.values()];
const EC_PUBLIC_KEY = '1.2.840.10045.2.1';
const RSA_ENCRYPTION = '1.2.840.113549.1.1.1';
const RSASSA_PSS = '1.2.840.113549.1.1.10';
const MGF1 = '1.2.840.113549.1.1.8';
const P256 = '1.2.840.10045.3.1.7';
const P384 = '1.3.132.0.34';
const P521 = '1.3.132.0.35';

const b64 = (block: { toBER(): ArrayBuffer }) => Buffer.from(block.toBER()).toString('base64');
const oidParam = (oid: string) => b64(new asn1js.ObjectIdentifier({ value: oid }));
const NULL_PARAM = b64(new asn1js.Null());
const signHash = (h: HashAlgorithm) => h.node as SignHash;
const other = (h: HashAlgorithm) =>
  HASHES.find((x) => x.length !== h.length || x.node.startsWith('sha3-') !== h.node.startsWith('sha3-'))!;

function refused(fn: () => unknown, text: string | RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof DomainError, `expected a DomainError, got ${String(err)}`);
    assert.equal(err.kind, 'not_offered');
    if (typeof text === 'string') assert.ok(err.message.includes(text), `"${err.message}" lacks "${text}"`);
    else assert.match(err.message, text);
    return true;
  });
}

/** RSASSA-PSS-params built field by field, for the good and the bad cases. */
function pssParams(o: {
  hash?: string;
  hashNull?: boolean;
  mgf?: string;
  mgfHash?: string;
  salt?: number;
  trailer?: number;
}): string {
  const hashId = (oid: string, withNull = false) =>
    new pkijs.AlgorithmIdentifier(
      withNull ? { algorithmId: oid, algorithmParams: new asn1js.Null() } : { algorithmId: oid },
    );
  const fields: asn1js.AsnType[] = [];
  const tagged = (n: number, v: asn1js.AsnType) =>
    new asn1js.Constructed({ idBlock: { tagClass: 3, tagNumber: n }, value: [v] });
  if (o.hash) fields.push(tagged(0, hashId(o.hash, o.hashNull).toSchema()));
  if (o.mgf)
    fields.push(
      tagged(
        1,
        new pkijs.AlgorithmIdentifier({
          algorithmId: o.mgf,
          algorithmParams: hashId(o.mgfHash ?? o.hash!, o.hashNull).toSchema(),
        }).toSchema(),
      ),
    );
  if (o.salt !== undefined) fields.push(tagged(2, new asn1js.Integer({ value: o.salt })));
  if (o.trailer !== undefined) fields.push(tagged(3, new asn1js.Integer({ value: o.trailer })));
  return b64(new asn1js.Sequence({ value: fields }));
}

const goodPss = (h: HashAlgorithm, hashNull = false) => pssParams({ hash: h.oid, hashNull, mgf: MGF1, salt: h.length });

describe('signAlgo absent: the configured default', () => {
  for (const def of Object.keys(SIGNER_ALGORITHMS) as SignerAlgorithm[]) {
    test(def, () => {
      for (const h of HASHES) assert.equal(resolveSignAlgo(h, undefined, undefined, def), def);
    });
  }
  test('ECDSA P-256 when nothing is configured', () => {
    assert.equal(resolveSignAlgo(HASHES[0]!), 'ECDSA-P256');
  });
  test('signAlgoParams without signAlgo', () => {
    refused(() => resolveSignAlgo(HASHES[0]!, undefined, NULL_PARAM), 'without signAlgo');
  });
});

describe('ecPublicKey 1.2.840.10045.2.1', () => {
  for (const h of HASHES) {
    test(`with ${h.name} documents`, () => {
      assert.equal(resolveSignAlgo(h, EC_PUBLIC_KEY), 'ECDSA-P256');
      assert.equal(
        resolveSignAlgo(h, EC_PUBLIC_KEY, undefined, 'ECDSA-P384'),
        'ECDSA-P384',
        'the configured default curve',
      );
      assert.equal(
        resolveSignAlgo(h, EC_PUBLIC_KEY, undefined, 'RSA-PSS-3072'),
        'ECDSA-P256',
        'P-256 when the default is RSA',
      );
      assert.equal(resolveSignAlgo(h, EC_PUBLIC_KEY, oidParam(P256), 'ECDSA-P384'), 'ECDSA-P256');
      assert.equal(resolveSignAlgo(h, EC_PUBLIC_KEY, oidParam(P384)), 'ECDSA-P384');
    });
  }
  test('curves and parameters we do not offer', () => {
    const h = HASHES[0]!;
    refused(() => resolveSignAlgo(h, EC_PUBLIC_KEY, oidParam(P521)), `got ${P521}`);
    refused(() => resolveSignAlgo(h, EC_PUBLIC_KEY, NULL_PARAM), 'namedCurve OID');
    refused(
      () => resolveSignAlgo(h, EC_PUBLIC_KEY, b64(new asn1js.Sequence({ value: [new asn1js.Integer({ value: 1 })] }))),
      'namedCurve OID',
    );
  });
});

describe('ecdsa-with-*: the document hash, the curve by hash length', () => {
  for (const h of HASHES) {
    const oid = SIGNATURE_OIDS.ecdsa[signHash(h)];
    const curve = h.length === 32 ? 'ECDSA-P256' : 'ECDSA-P384';
    test(`${oid} with ${h.name} documents -> ${curve}`, () => {
      assert.equal(resolveSignAlgo(h, oid), curve);
      assert.equal(resolveSignAlgo(h, oid, undefined, 'ECDSA-P384'), curve, 'the default does not move it');
      refused(() => resolveSignAlgo(h, oid, NULL_PARAM), 'must be absent');
      const mismatch = other(h);
      refused(() => resolveSignAlgo(mismatch, oid), `but the document hashes are ${mismatch.name}`);
    });
  }
});

describe('RSA PKCS#1 v1.5: rsaEncryption and sha*WithRSAEncryption', () => {
  for (const h of HASHES) {
    const oid = SIGNATURE_OIDS.rsa[signHash(h)];
    test(`${oid} and rsaEncryption with ${h.name} documents`, () => {
      assert.equal(resolveSignAlgo(h, oid), 'RSA-3072');
      assert.equal(resolveSignAlgo(h, oid, NULL_PARAM), 'RSA-3072');
      assert.equal(resolveSignAlgo(h, RSA_ENCRYPTION), 'RSA-3072');
      assert.equal(resolveSignAlgo(h, RSA_ENCRYPTION, NULL_PARAM), 'RSA-3072');
      refused(() => resolveSignAlgo(h, oid, oidParam(P256)), 'must be absent or NULL');
      refused(() => resolveSignAlgo(h, RSA_ENCRYPTION, goodPss(h)), 'must be absent or NULL');
      const mismatch = other(h);
      refused(() => resolveSignAlgo(mismatch, oid), 'the signature hash is always the document hash algorithm');
    });
  }
});

describe('RSASSA-PSS 1.2.840.113549.1.1.10 with signAlgoParams', () => {
  for (const h of HASHES) {
    test(`${h.name}: our parameters, and NULL or absent hash parameters`, () => {
      assert.equal(resolveSignAlgo(h, RSASSA_PSS, rsaPssParams(signHash(h)).toString('base64')), 'RSA-PSS-3072');
      assert.equal(resolveSignAlgo(h, RSASSA_PSS, goodPss(h, true)), 'RSA-PSS-3072');
      assert.equal(resolveSignAlgo(h, RSASSA_PSS, goodPss(h, false)), 'RSA-PSS-3072');
      assert.equal(
        resolveSignAlgo(h, RSASSA_PSS, pssParams({ hash: h.oid, mgf: MGF1, salt: h.length, trailer: 1 })),
        'RSA-PSS-3072',
        'trailer 1 written out',
      );
    });
    test(`${h.name}: parameters we do not offer`, () => {
      const o = other(h);
      refused(() => resolveSignAlgo(h, RSASSA_PSS), 'needs signAlgoParams');
      refused(
        () => resolveSignAlgo(h, RSASSA_PSS, pssParams({ hash: o.oid, mgf: MGF1, mgfHash: h.oid, salt: h.length })),
        `hashAlgorithm ${o.oid} is not the document hash`,
      );
      refused(
        () => resolveSignAlgo(h, RSASSA_PSS, pssParams({ hash: h.oid, mgf: MGF1, mgfHash: o.oid, salt: h.length })),
        `maskGenAlgorithm is not MGF1 with ${h.name}`,
      );
      refused(
        () => resolveSignAlgo(h, RSASSA_PSS, pssParams({ hash: h.oid, mgf: '1.2.840.113549.1.1.9', salt: h.length })),
        'maskGenAlgorithm is not MGF1',
      );
      refused(
        () => resolveSignAlgo(h, RSASSA_PSS, pssParams({ hash: h.oid, mgf: MGF1, salt: 20 })),
        `saltLength 20 is not ${h.length}`,
      );
      refused(
        () => resolveSignAlgo(h, RSASSA_PSS, pssParams({ hash: h.oid, mgf: MGF1 })),
        `saltLength 20 is not ${h.length}`,
      );
      refused(
        () => resolveSignAlgo(h, RSASSA_PSS, pssParams({ hash: h.oid, mgf: MGF1, salt: h.length, trailer: 2 })),
        'trailerField 2 is not 1',
      );
      refused(() => resolveSignAlgo(h, RSASSA_PSS, pssParams({})), 'hashAlgorithm 1.3.14.3.2.26'); // all DEFAULTs: SHA-1
    });
  }
  test('malformed signAlgoParams', () => {
    const h = HASHES[0]!;
    const good = Buffer.from(goodPss(h), 'base64');
    refused(
      () => resolveSignAlgo(h, RSASSA_PSS, Buffer.concat([good, Buffer.from([0])]).toString('base64')),
      'one DER-encoded ASN.1 value',
    );
    refused(
      () => resolveSignAlgo(h, RSASSA_PSS, good.subarray(0, good.length - 1).toString('base64')),
      'one DER-encoded ASN.1 value',
    );
    refused(() => resolveSignAlgo(h, RSASSA_PSS, good.toString('base64url')), 'standard Base64');
    refused(() => resolveSignAlgo(h, RSASSA_PSS, ''), 'standard Base64');
    refused(() => resolveSignAlgo(h, RSASSA_PSS, NULL_PARAM), 'is not RSASSA-PSS-params');
    refused(() => resolveSignAlgo(h, RSASSA_PSS, oidParam(P256)), 'is not RSASSA-PSS-params');
  });
});

describe('algorithms we do not offer: refused naming what we offer', () => {
  const notOffered: [string, string][] = [
    ['1.2.840.10040.4.1', 'DSA key'],
    ['2.16.840.1.101.3.4.3.2', 'DSA with SHA-256'],
    ['1.2.840.113549.1.1.5', 'sha1WithRSAEncryption'],
    ['1.2.840.113549.1.1.14', 'sha224WithRSAEncryption'],
    ['1.2.840.10045.4.1', 'ecdsa-with-SHA1'],
    ['1.2.840.10045.4.3.1', 'ecdsa-with-SHA224'],
    ['1.3.101.112', 'Ed25519'],
    ['1.3.101.113', 'Ed448'],
    ['1.2.840.113549.1.1.7', 'RSAES-OAEP'],
  ];
  for (const [oid, name] of notOffered) {
    test(`${name} ${oid}`, () => {
      for (const h of HASHES) {
        const offered = [
          EC_PUBLIC_KEY,
          SIGNATURE_OIDS.ecdsa[signHash(h)],
          RSA_ENCRYPTION,
          SIGNATURE_OIDS.rsa[signHash(h)],
          RSASSA_PSS,
        ];
        assert.throws(
          () => resolveSignAlgo(h, oid),
          (err: DomainError) => {
            assert.equal(err.kind, 'not_offered');
            assert.ok(
              err.message.startsWith(`signAlgo ${oid} is not offered; with ${h.name} document hashes this QTSP offers`),
              err.message,
            );
            for (const o of offered) assert.ok(err.message.includes(o), `${err.message} does not name ${o}`);
            assert.ok(err.message.includes(`salt length ${h.length}`));
            return true;
          },
        );
      }
    });
  }
});

describe('chooseSigning', () => {
  test('maps a signer algorithm to key type and scheme', () => {
    const h = HASHES[0]!;
    assert.deepEqual(chooseSigning('C', 'AdES-B-B', h), {
      format: 'C',
      level: 'AdES-B-B',
      algorithm: 'ECDSA-P256',
      keyAlgorithm: 'P-256',
      scheme: 'ecdsa',
    });
    assert.deepEqual(chooseSigning('C', 'AdES-B-B', h, EC_PUBLIC_KEY, oidParam(P384)).keyAlgorithm, 'P-384');
    assert.deepEqual(chooseSigning('C', 'AdES-B-B', h, RSA_ENCRYPTION), {
      format: 'C',
      level: 'AdES-B-B',
      algorithm: 'RSA-3072',
      keyAlgorithm: 'RSA-3072',
      scheme: 'rsa-pkcs1-v1_5',
    });
    assert.deepEqual(chooseSigning('C', 'AdES-B-B', h, undefined, undefined, 'RSA-PSS-3072'), {
      format: 'C',
      level: 'AdES-B-B',
      algorithm: 'RSA-PSS-3072',
      keyAlgorithm: 'RSA-3072',
      scheme: 'rsa-pss',
    });
  });
});

describe('RSASSA-PSS parameters and keys (keys.ts)', () => {
  let rsa: { privateKey: KeyObject; publicKey: KeyObject };
  before(() => {
    rsa = generateKeyPairSync('rsa', { modulusLength: 3072 });
  });

  for (const h of HASHES) {
    test(`rsaPssParams(${h.node}): hash, MGF1 with the hash, salt = hash length, trailer omitted`, () => {
      const der = rsaPssParams(signHash(h));
      const params = new pkijs.RSASSAPSSParams({ schema: asn1js.fromBER(der).result });
      assert.equal(params.hashAlgorithm.algorithmId, h.oid);
      // RFC 4055 2.1: SHA-2 identifiers with NULL inside PSS params (as OpenSSL writes them); SHA-3 absent
      assert.equal(params.hashAlgorithm.algorithmParams instanceof asn1js.Null, !h.node.startsWith('sha3-'));
      assert.equal(params.maskGenAlgorithm.algorithmId, MGF1);
      assert.equal(
        new pkijs.AlgorithmIdentifier({ schema: params.maskGenAlgorithm.algorithmParams }).algorithmId,
        h.oid,
      );
      assert.equal(params.saltLength, h.length);
      assert.equal(params.trailerField, 1);
      assert.equal(
        (asn1js.fromBER(der).result as asn1js.Sequence).valueBlock.value.length,
        3,
        'the DEFAULT trailer field is not encoded',
      );
    });

    test(`an rsa-pss key signs ${h.name} RSASSA-PSS as its AlgorithmIdentifier says`, () => {
      const pss = signingKeyFor(rsa.privateKey, 'rsa-pss');
      assert.equal(pss.asymmetricKeyType, 'rsa-pss');
      const alg = signatureAlgorithm(pss, signHash(h));
      assert.equal(alg.oid, RSASSA_PSS);
      assert.deepEqual(alg.params, rsaPssParams(signHash(h)));
      const ai = algorithmIdentifier(alg);
      assert.equal(
        Buffer.from(ai.toSchema().toBER()).toString('hex'),
        Buffer.from(
          new asn1js.Sequence({
            value: [new asn1js.ObjectIdentifier({ value: RSASSA_PSS }), asn1js.fromBER(alg.params!).result],
          }).toBER(),
        ).toString('hex'),
      );
      const data = Buffer.from(`data for ${h.name}`);
      const sig = signWith(pss, signHash(h), data);
      const pub = { key: rsa.publicKey, padding: constants.RSA_PKCS1_PSS_PADDING };
      assert.ok(verify(h.node, data, { ...pub, saltLength: h.length }, sig), 'salt length = hash length');
      assert.equal(verify(h.node, data, { ...pub, saltLength: h.length + 1 }, sig), false);
      assert.equal(verify(h.node, data, { key: rsa.publicKey, padding: constants.RSA_PKCS1_PADDING }, sig), false);
    });
  }

  test("the PSS key is the same key; its public half keeps the certificate's rsaEncryption SPKI", () => {
    const pss = signingKeyFor(rsa.privateKey, 'rsa-pss');
    const bits = (k: KeyObject) => {
      const spki = pkijs.PublicKeyInfo.fromBER(k.export({ type: 'spki', format: 'der' }));
      return {
        alg: spki.algorithm.algorithmId,
        key: Buffer.from(spki.subjectPublicKey.valueBlock.valueHexView).toString('hex'),
      };
    };
    assert.equal(bits(createPublicKey(pss)).key, bits(rsa.publicKey).key);
    assert.equal(bits(createPublicKey(pss)).alg, RSASSA_PSS);
    assert.equal(bits(rsa.publicKey).alg, RSA_ENCRYPTION);
    assert.equal(rsa.publicKey.asymmetricKeyType, 'rsa');
  });

  test('an rsa-pss key refuses PKCS#1 v1.5, and keys refuse the wrong scheme', () => {
    const pss = signingKeyFor(rsa.privateKey, 'rsa-pss');
    assert.throws(
      () => sign('sha256', Buffer.from('x'), { key: pss, padding: constants.RSA_PKCS1_PADDING }),
      /padding/,
    );
    assert.equal(signingKeyFor(rsa.privateKey, 'rsa-pkcs1-v1_5'), rsa.privateKey);
    assert.equal(signingKeyFor(pss, 'rsa-pss'), pss);
    assert.throws(() => signingKeyFor(rsa.privateKey, 'ecdsa'), /cannot sign with ecdsa/);
    assert.throws(() => signingKeyFor(pss, 'rsa-pkcs1-v1_5'), /cannot sign with rsa-pkcs1-v1_5/);
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    assert.throws(() => signingKeyFor(ec, 'rsa-pss'), /cannot sign with rsa-pss/);
  });
});
