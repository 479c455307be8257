/**
 * What we offer, by one rule: a format x document hash x signer key combination is offered only where an
 * independent validator in our test suite verifies it. Over the whole matrix (3 formats x 6 hashes x 4 keys):
 *   - chooseSigning admits exactly the combinations of OFFER, and refuses every other (not_offered, a 400) naming
 *     what the format offers;
 *   - every offered combination, signed by our builder, is verified by the format's validator: `openssl cms
 *     -verify -cades` (C), pdfsig with an NSS database trusting only our root (P), xmlsec1 (X);
 *   - every refused combination our builders can produce is one the validator does not verify (pdfsig and
 *     SHA-3, xmlsec1 and RSASSA-PSS): the reason for the line. XAdES with SHA-3 has no builder at all.
 */
import { after, before, describe, test } from 'node:test';
import { SoftwareSigningKey } from '../../../src/crypto/signature.ts';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HASH_ALGORITHMS, digest, type HashAlgorithm } from '../../../src/crypto/algorithms.ts';
import { chooseSigning, isOffered, OFFER } from '../../../src/ades/offer.ts';
import { buildCadesBaselineB } from '../../../src/ades/cades.ts';
import { padesBaselineBCms } from '../../../src/ades/pades.ts';
import { buildXadesBaselineB } from '../../../src/ades/xades.ts';
import { SIGNATURE_FORMATS, type SignatureFormat } from '../../../src/ades/formats.ts';
import type { SignatureInput } from '../../../src/ades/types.ts';
import { rsaPssParams, type SignHash } from '../../../src/crypto/signature.ts';
import { DomainError } from '../../../src/domain-error.ts';
import { loadCaMaterial, pkiPaths, type CaMaterial } from '../../../src/ca/material.ts';
import { pkiInit } from '../../../src/ca/init.ts';
import {
  generateKeyPair,
  signingKeyFor,
  SIGNER_ALGORITHMS,
  type KeyPair,
  type SignerAlgorithm,
} from '../../../src/crypto/keys.ts';
import type { SignerCertificate } from '../../../src/ca/signer-certificate.ts';
import { mintTestSignerCertificate } from '../../helpers/signer.ts';
import { prepareSignature } from '../../../src/rp/pdf.ts';
import { toPem } from '../../../src/util/base64.ts';
import { opensslCmsVerify, run, type ToolResult } from '../../helpers/openssl.ts';
import { nssTrustStore } from '../../helpers/pki-oracles.ts';
import { xmlsecVerify } from '../../helpers/xmlsec.ts';

const SAMPLE = readFileSync(fileURLToPath(new URL('../../../fixtures/documents/sample.pdf', import.meta.url)));
const DOCUMENT = Buffer.from('a document for the whole offer matrix\n');
const HASHES = [...HASH_ALGORITHMS.values()];
const KEYS = Object.keys(SIGNER_ALGORITHMS) as SignerAlgorithm[];
/** the signAlgo that asks for each key with any document hash (spec 2.12; offer.ts header) */
const P384_PARAM = 'BgUrgQQAIg=='; // namedCurve 1.3.132.0.34
const SIGN_ALGO: Readonly<Record<SignerAlgorithm, (h: HashAlgorithm) => [string, string?]>> = {
  'ECDSA-P256': () => ['1.2.840.10045.2.1', 'BggqhkjOPQMBBw=='], // ecPublicKey, namedCurve prime256v1
  'ECDSA-P384': () => ['1.2.840.10045.2.1', P384_PARAM],
  'RSA-3072': () => ['1.2.840.113549.1.1.1'],
  'RSA-PSS-3072': (h) => ['1.2.840.113549.1.1.10', pssParams(h)],
};

let dir: string;
let ca: CaMaterial;
let nssDir: string;
let n = 0;
const signers = new Map<string, { keys: KeyPair; certificate: SignerCertificate }>();

/** RSASSA-PSS-params for the hash, as an RP sends them */
const pssParams = (h: HashAlgorithm) => rsaPssParams(h.node as SignHash).toString('base64');

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'qtsp-offer-'));
  pkiInit({ dataDir: dir, qtspId: 'sp:test.example:00000000-0000-4000-8000-000000000000' });
  ca = loadCaMaterial(dir);
  nssDir = await nssTrustStore(join(dir, 'nss'), pkiPaths(dir).rootCert);
  const rsa = generateKeyPair('RSA-3072'); // one RSA key for both RSA schemes: the certificate names rsaEncryption either way
  for (const algorithm of KEYS) {
    const { key } = SIGNER_ALGORITHMS[algorithm];
    const keys = key === 'RSA-3072' ? rsa : generateKeyPair(key);
    const certificate = await mintTestSignerCertificate(ca.issuing, keys.publicKey, 'offer-matrix');
    signers.set(algorithm, { keys, certificate });
  }
});
after(() => rmSync(dir, { recursive: true, force: true }));

function input(algorithm: SignerAlgorithm, hashAlgorithm: HashAlgorithm, document: Buffer): SignatureInput {
  const { keys, certificate } = signers.get(algorithm)!;
  return {
    hash: digest(hashAlgorithm, document),
    hashAlgorithm,
    signerCertificate: certificate,
    chain: [ca.issuing.der],
    key: new SoftwareSigningKey(signingKeyFor(keys.privateKey, SIGNER_ALGORITHMS[algorithm].scheme)),
    signingTime: new Date(),
    services: {},
  };
}

/** Signs with our builder for the format and runs the format's validator; undefined when no builder can. */
async function signAndValidate(
  format: SignatureFormat,
  algorithm: SignerAlgorithm,
  h: HashAlgorithm,
): Promise<ToolResult | undefined> {
  switch (format) {
    case 'C': {
      const cms = await buildCadesBaselineB(input(algorithm, h, DOCUMENT));
      return opensslCmsVerify(cms, DOCUMENT, pkiPaths(dir).rootCert);
    }
    case 'P': {
      const prepared = await prepareSignature(SAMPLE, { reason: 'offer matrix' });
      const cms = await padesBaselineBCms(input(algorithm, h, prepared.covered));
      const file = join(dir, `${++n}.pdf`);
      writeFileSync(file, await prepared.complete(cms));
      const r = await run('pdfsig', ['-nssdir', `sql:${nssDir}`, file]);
      const ok =
        /Signature Validation: Signature is Valid\./.test(r.output) &&
        /Certificate Validation: Certificate is Trusted\./.test(r.output);
      return { ok, output: r.output };
    }
    case 'X': {
      let xml: Buffer;
      try {
        xml = (await buildXadesBaselineB(input(algorithm, h, DOCUMENT))).signature;
      } catch (err) {
        if (err instanceof RangeError) return undefined; // no XML signature method for this hash
        throw err;
      }
      const issuing = join(dir, 'issuing.pem');
      writeFileSync(issuing, toPem(ca.issuing.der, 'CERTIFICATE'));
      return xmlsecVerify(xml, DOCUMENT, { trustedPem: pkiPaths(dir).rootCert, untrustedPem: issuing });
    }
  }
}

describe('the offer rule over format x hash x key', () => {
  test('OFFER names a validator per format; C offers everything, P and X say what their validator lacks', () => {
    for (const format of SIGNATURE_FORMATS) assert.ok(OFFER[format].validator.length > 0);
    assert.equal(OFFER.C.hashes.length * OFFER.C.keys.length, HASHES.length * KEYS.length);
    assert.deepEqual([...OFFER.P.hashes], ['SHA-256', 'SHA-384', 'SHA-512']);
    assert.deepEqual([...OFFER.X.keys], ['ECDSA-P256', 'ECDSA-P384', 'RSA-3072']);
  });

  for (const format of SIGNATURE_FORMATS) {
    for (const h of HASHES) {
      for (const algorithm of KEYS) {
        const offered = isOffered(format, h, algorithm);
        test(`${format} ${h.name} ${algorithm}: ${offered ? 'offered, and the validator verifies it' : 'not offered: 400, and the validator does not verify it'}`, async () => {
          const [signAlgo, signAlgoParams] = SIGN_ALGO[algorithm](h);
          if (offered) {
            const choice = chooseSigning(format, 'AdES-B-B', h, signAlgo, signAlgoParams);
            assert.equal(choice.algorithm, algorithm);
            const verdict = await signAndValidate(format, algorithm, h);
            assert.ok(verdict?.ok, `${OFFER[format].validator}: ${verdict?.output}`);
            return;
          }
          assert.throws(
            () => chooseSigning(format, 'AdES-B-B', h, signAlgo, signAlgoParams),
            (err: unknown) =>
              err instanceof DomainError &&
              err.kind === 'not_offered' &&
              err.message.includes(
                `signature_format ${format} is offered with ${OFFER[format].hashes.join(', ')} document hashes`,
              ) &&
              err.message.includes(OFFER[format].validator),
          );
          const verdict = await signAndValidate(format, algorithm, h);
          assert.ok(
            verdict === undefined || !verdict.ok,
            `${OFFER[format].validator} verifies ${format} ${h.name} ${algorithm}: widen OFFER? ${verdict?.output}`,
          );
        });
      }
    }
  }

  test('without signAlgo: the configured default where the format offers it, else ECDSA P-256', () => {
    const sha256 = HASHES[0]!;
    assert.equal(
      chooseSigning('C', 'AdES-B-B', sha256, undefined, undefined, 'RSA-PSS-3072').algorithm,
      'RSA-PSS-3072',
    );
    assert.equal(
      chooseSigning('P', 'AdES-B-B', sha256, undefined, undefined, 'RSA-PSS-3072').algorithm,
      'RSA-PSS-3072',
    );
    assert.equal(chooseSigning('X', 'AdES-B-B', sha256, undefined, undefined, 'RSA-PSS-3072').algorithm, 'ECDSA-P256');
    assert.equal(chooseSigning('X', 'AdES-B-B', sha256, undefined, undefined, 'ECDSA-P384').algorithm, 'ECDSA-P384');
  });

  test('an unknown signAlgo for X lists only what X offers (no RSASSA-PSS)', () => {
    assert.throws(
      () => chooseSigning('X', 'AdES-B-B', HASHES[0]!, '1.2.840.10040.4.3'),
      (err: unknown) =>
        err instanceof DomainError &&
        err.kind === 'not_offered' &&
        !err.message.includes('RSASSA-PSS') &&
        err.message.includes('PKCS#1 v1.5'),
    );
  });
});
