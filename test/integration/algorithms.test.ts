/**
 * Signature algorithms through the real signDoc flow (spec 2.12 signAlgo/signAlgoParams, 2.7 hashes): sandbox
 * bank AS + QTSP over HTTPS with mutual TLS. CAdES-B-B for every document hash (six) x key (P-256, P-384,
 * RSA-3072 PKCS#1 v1.5, RSA-3072 RSASSA-PSS), each checked by `openssl cms -verify -cades` (which must also
 * refuse it over another document), and the algorithm identifiers and the signer's key read from the CMS.
 * Algorithms we do not offer answer 400 naming what we offer.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { HASH_ALGORITHMS, SIGNATURE_OIDS, type HashAlgorithm } from '../../src/crypto/algorithms.ts';
import type { SoftwareCustody } from '../../src/custody/software/custody.ts';
import { rsaPssParams, type SignHash } from '../../src/crypto/signature.ts';
import { callSignDoc } from '../../src/rp/flow.ts';
import {
  custodySigns,
  startEnvironment,
  SHA256_OID,
  TEST_KEY_CUSTODY,
  type TestEnvironment,
} from '../helpers/environment.ts';
import { untilHolds } from '../helpers/key-pool.ts';
import { opensslCmsVerify } from '../helpers/openssl.ts';
import { signaturesOf, signDocBody, signThroughSandbox } from '../helpers/signing.ts';

const EC_PUBLIC_KEY = '1.2.840.10045.2.1';
const RSA_ENCRYPTION = '1.2.840.113549.1.1.1';
const RSASSA_PSS = '1.2.840.113549.1.1.10';
const CURVES = { 'P-256': '1.2.840.10045.3.1.7', 'P-384': '1.3.132.0.34' } as const;
const DOC = Buffer.from('a document signed with every algorithm we offer\n');
const OTHER_DOC = Buffer.from('another document\n');

type KeyKind = 'P-256' | 'P-384' | 'RSA-3072' | 'RSA-PSS';
const KEYS: readonly KeyKind[] = ['P-256', 'P-384', 'RSA-3072', 'RSA-PSS'];
const HASHES = [...HASH_ALGORITHMS.values()];

const curveParam = (curve: keyof typeof CURVES) =>
  Buffer.from(new asn1js.ObjectIdentifier({ value: CURVES[curve] }).toBER()).toString('base64');
const signHash = (h: HashAlgorithm) => h.node as SignHash;

/**
 * The request parameters for a key kind, using every signAlgo form we accept across the matrix: ecdsa-with-H
 * where the curve rule picks the wanted curve (256-bit hash -> P-256, longer -> P-384), otherwise ecPublicKey
 * with the namedCurve; sha*WithRSAEncryption and rsaEncryption in turn; id-RSASSA-PSS with its parameters.
 */
function signAlgoFor(key: KeyKind, h: HashAlgorithm, i: number): { signAlgo: string; signAlgoParams?: string } {
  switch (key) {
    case 'P-256':
      return h.length === 32
        ? { signAlgo: SIGNATURE_OIDS.ecdsa[signHash(h)] }
        : { signAlgo: EC_PUBLIC_KEY, signAlgoParams: curveParam('P-256') };
    case 'P-384':
      return h.length > 32
        ? { signAlgo: SIGNATURE_OIDS.ecdsa[signHash(h)] }
        : { signAlgo: EC_PUBLIC_KEY, signAlgoParams: curveParam('P-384') };
    case 'RSA-3072':
      return i % 2 === 0 ? { signAlgo: SIGNATURE_OIDS.rsa[signHash(h)] } : { signAlgo: RSA_ENCRYPTION };
    case 'RSA-PSS':
      return { signAlgo: RSASSA_PSS, signAlgoParams: rsaPssParams(signHash(h)).toString('base64') };
  }
}

interface CmsFacts {
  digestAlgorithm: string;
  signatureAlgorithm: string;
  signatureParams: Buffer | undefined;
  spkiAlgorithm: string;
  curve: string | undefined;
  modulusBits: number | undefined;
}

/** What the CMS says about how it was signed (parsed with pkijs, independent of how we built it). */
function cmsFacts(der: Buffer): CmsFacts {
  const signed = new pkijs.SignedData({ schema: pkijs.ContentInfo.fromBER(new Uint8Array(der)).content });
  const si = signed.signerInfos[0]!;
  const cert = signed.certificates![0] as pkijs.Certificate;
  const spki = cert.subjectPublicKeyInfo;
  const params = si.signatureAlgorithm.algorithmParams as asn1js.BaseBlock | undefined;
  let modulusBits: number | undefined;
  if (spki.algorithm.algorithmId === RSA_ENCRYPTION) {
    const rsa = pkijs.RSAPublicKey.fromBER(new Uint8Array(spki.subjectPublicKey.valueBlock.valueHexView));
    modulusBits =
      (rsa.modulus.valueBlock.valueHexView.length - (rsa.modulus.valueBlock.valueHexView[0] === 0 ? 1 : 0)) * 8;
  }
  return {
    digestAlgorithm: si.digestAlgorithm.algorithmId,
    signatureAlgorithm: si.signatureAlgorithm.algorithmId,
    signatureParams: params ? Buffer.from(params.toBER()) : undefined,
    spkiAlgorithm: spki.algorithm.algorithmId,
    curve:
      spki.algorithm.algorithmId === EC_PUBLIC_KEY
        ? (spki.algorithm.algorithmParams as asn1js.ObjectIdentifier).getValue()
        : undefined,
    modulusBits,
  };
}

function expectFacts(facts: CmsFacts, key: KeyKind, h: HashAlgorithm): void {
  assert.equal(facts.digestAlgorithm, h.oid, 'the CMS digest algorithm is the document hash');
  if (key === 'P-256' || key === 'P-384') {
    assert.equal(facts.spkiAlgorithm, EC_PUBLIC_KEY);
    assert.equal(facts.curve, CURVES[key]);
    assert.equal(facts.signatureAlgorithm, SIGNATURE_OIDS.ecdsa[signHash(h)]);
    assert.equal(facts.signatureParams, undefined, 'ecdsa-with-* parameters are absent (RFC 5758 3.2)');
    return;
  }
  assert.equal(
    facts.spkiAlgorithm,
    RSA_ENCRYPTION,
    'the certificate carries an rsaEncryption SPKI for both RSA schemes',
  );
  assert.equal(facts.modulusBits, 3072);
  if (key === 'RSA-3072') {
    assert.equal(facts.signatureAlgorithm, SIGNATURE_OIDS.rsa[signHash(h)]);
    assert.equal(facts.signatureParams?.toString('hex'), '0500', 'sha*WithRSAEncryption carries NULL (RFC 4055 5)');
  } else {
    assert.equal(facts.signatureAlgorithm, RSASSA_PSS);
    assert.deepEqual(facts.signatureParams, rsaPssParams(signHash(h)), 'RSASSA-PSS-params (RFC 4056 2.1)');
  }
}

let env: TestEnvironment;
const digestOf = (h: HashAlgorithm, data: Uint8Array) => createHash(h.node).update(data).digest('base64');

async function signOne(h: HashAlgorithm, extra: Record<string, unknown>, environment: TestEnvironment = env) {
  return signaturesOf(await signRequest(h, extra, environment))[0]!;
}

function signRequest(h: HashAlgorithm, extra: Record<string, unknown>, environment: TestEnvironment = env) {
  return signThroughSandbox(environment, [digestOf(h, DOC)], {
    hashAlgorithmOID: h.oid,
    fields: { conformance_level: 'AdES-B-B', ...extra },
  });
}

async function expectVerified(cms: Buffer): Promise<void> {
  const ok = await opensslCmsVerify(cms, DOC, env.rootCaFile);
  assert.ok(ok.ok, ok.output);
  const other = await opensslCmsVerify(cms, OTHER_DOC, env.rootCaFile);
  assert.equal(other.ok, false, 'openssl accepted the signature over another document');
}

describe('an RSA key pool of 4 and the default configuration', () => {
  before(async () => {
    env = await startEnvironment({ signer: { rsaPoolSize: 4 } });
  });
  after(async () => {
    await env?.close();
  });

  describe('CAdES-B-B over every hash x key, verified by openssl cms -verify -cades', () => {
    // key by key: the EC signatures run while the RSA pool fills
    for (const key of KEYS) {
      for (const [i, h] of HASHES.entries()) {
        const params = signAlgoFor(key, h, i);
        it(`${h.name} with ${key} (signAlgo ${params.signAlgo}${params.signAlgoParams ? ' + signAlgoParams' : ''})`, async () => {
          if (key === 'RSA-PSS' && !custodySigns(env, 'rsa-pss', h.node)) {
            // a PKCS#11 2.40 token (SoftHSM2 2.6) has no SHA-3 in CK_RSA_PKCS_PSS_PARAMS: refused up front, nothing minted
            const res = await signRequest(h, params);
            assert.equal(res.status, 400, JSON.stringify(res.body));
            assert.match(JSON.stringify(res.body), /key custody \(HSM\) cannot sign it/);
            return;
          }
          const cms = await signOne(h, params);
          expectFacts(cmsFacts(cms), key, h);
          await expectVerified(cms);
        });
      }
    }

    it('a warm pool hands RSA keys out without making the request wait', {
      skip: TEST_KEY_CUSTODY !== 'software' && 'the software RSA pool',
    }, async () => {
      const pool = (env.qtsp.deps.keys as SoftwareCustody).signerKeys.rsa;
      await untilHolds(pool, 1);
      const before = pool.stats();
      await expectVerified(await signOne(HASHES[0]!, { signAlgo: RSA_ENCRYPTION }));
      const after = pool.stats();
      assert.equal(after.handedOut, before.handedOut + 1);
      assert.equal(after.waited, before.waited, 'the request waited for a key generation');
    });

    it('without signAlgo: the configured default, ECDSA P-256', async () => {
      const cms = await signOne(HASHES[0]!, {});
      expectFacts(cmsFacts(cms), 'P-256', HASHES[0]!);
      await expectVerified(cms);
    });
  });

  describe('signAlgo we do not offer: 400 naming what we offer, nothing minted', () => {
    const h256 = HASHES.find((h) => h.oid === SHA256_OID)!;
    const body = (extra: Record<string, unknown>) => signDocBody('x.y.z', [digestOf(h256, DOC)], extra);
    const offered = [EC_PUBLIC_KEY, '1.2.840.10045.4.3.2', RSA_ENCRYPTION, '1.2.840.113549.1.1.11', RSASSA_PSS];
    // the first group names every signAlgo we offer; the parameter errors name the parameters we expect
    const cases: [string, Record<string, unknown>, string][] = [
      ['DSA', { signAlgo: '1.2.840.10040.4.1' }, 'signAlgo 1.2.840.10040.4.1 is not offered'],
      ['DSA with SHA-256', { signAlgo: '2.16.840.1.101.3.4.3.2' }, 'is not offered'],
      ['Ed25519', { signAlgo: '1.3.101.112' }, 'is not offered'],
      ['sha1WithRSAEncryption', { signAlgo: '1.2.840.113549.1.1.5' }, 'is not offered'],
      [
        'RSA with SHA-384 for SHA-256 documents',
        { signAlgo: '1.2.840.113549.1.1.12' },
        'hashes with SHA384, but the document hashes are SHA-256',
      ],
      [
        'ECDSA with SHA3-256 for SHA-256 documents',
        { signAlgo: '2.16.840.1.101.3.4.3.10' },
        'but the document hashes are SHA-256',
      ],
      [
        'RSASSA-PSS with SHA-512 parameters for SHA-256 documents',
        { signAlgo: RSASSA_PSS, signAlgoParams: rsaPssParams('sha512').toString('base64') },
        'expected RSASSA-PSS-params with hash SHA-256, MGF1 with SHA-256, salt length 32',
      ],
      ['RSASSA-PSS without parameters', { signAlgo: RSASSA_PSS }, 'needs signAlgoParams'],
      [
        'P-521',
        {
          signAlgo: EC_PUBLIC_KEY,
          signAlgoParams: Buffer.from(new asn1js.ObjectIdentifier({ value: '1.3.132.0.35' }).toBER()).toString(
            'base64',
          ),
        },
        'namedCurve OID',
      ],
    ];
    for (const [name, extra, text] of cases) {
      it(name, async () => {
        const certificatesBefore = (await env.qtsp.deps.metrics.certificates.get()).values[0]?.value ?? 0;
        const res = await callSignDoc(env.qtsp.signDocUrl, env.endpoints, body(extra));
        const b = res.body as { error?: string; error_description?: string };
        assert.equal(res.status, 400, JSON.stringify(b));
        assert.equal(b.error, 'invalid_request');
        assert.ok(b.error_description?.includes(text), `"${b.error_description}" lacks "${text}"`);
        if (/not offered|but the document hashes/.test(text)) {
          for (const oid of offered)
            assert.ok(b.error_description!.includes(oid), `the description does not name ${oid}`);
        }
        assert.equal((await env.qtsp.deps.metrics.certificates.get()).values[0]?.value ?? 0, certificatesBefore);
      });
    }
  });
});

// after the first environment is closed: environments run one at a time
describe('signer.defaultAlgorithm RSA-PSS-3072 with an empty pool (rsaPoolSize 0)', () => {
  let pssEnv: TestEnvironment;
  before(async () => {
    pssEnv = await startEnvironment({ signer: { defaultAlgorithm: 'RSA-PSS-3072', rsaPoolSize: 0 } });
  });
  after(async () => {
    await pssEnv?.close();
  });

  it('signs RSASSA-PSS without signAlgo, generating the key on demand', {
    skip: TEST_KEY_CUSTODY !== 'software' && 'the software RSA pool',
  }, async () => {
    const h = HASHES.find((x) => x.name === 'SHA-384')!;
    const cms = await signOne(h, {}, pssEnv);
    expectFacts(cmsFacts(cms), 'RSA-PSS', h);
    const ok = await opensslCmsVerify(cms, DOC, pssEnv.rootCaFile);
    assert.ok(ok.ok, ok.output);
    const stats = (pssEnv.qtsp.deps.keys as SoftwareCustody).signerKeys.rsa.stats();
    assert.equal(stats.waited, 1);
    assert.equal(stats.ready, 0);
  });
});
