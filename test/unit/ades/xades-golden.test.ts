/**
 * The XAdES writer (src/ades/xades.ts) against golden outputs made by the object-model builder it replaced
 * (xades-golden/README.md): byte for byte for RSA PKCS#1 v1.5 keys, whose signatures are deterministic; for
 * ECDSA and RSASSA-PSS, whose signatures are randomised, the same bytes signed, the same document apart from
 * the SignatureValue, and a signature value that verifies. The certificates carry characters that XML escapes,
 * and non-ASCII ones, in their subjects and issuers.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { constants, createPrivateKey, createPublicKey, verify, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as pkijs from 'pkijs';
import { digest, hashByName, type HashAlgorithm } from '../../../src/crypto/algorithms.ts';
import { SoftwareSigningKey, type SigningKey } from '../../../src/crypto/signature.ts';
import type { SignatureInput } from '../../../src/ades/types.ts';
import { buildXadesBaselineB, buildXadesBaselineT } from '../../../src/ades/xades.ts';

interface GoldenCase {
  readonly key: string;
  readonly hash: string;
  readonly level: 'B' | 'T';
  readonly chain: readonly string[];
  readonly id: string;
  readonly time: string;
  readonly signedInfo: string;
  readonly imprint?: string;
  readonly xml: string;
}

const DS = 'http://www.w3.org/2000/09/xmldsig#';
const folder = new URL('./xades-golden/', import.meta.url);
const file = (name: string) => readFileSync(new URL(name, folder));
const golden = JSON.parse(file('cases.json').toString('utf8')) as {
  document: string;
  token: string;
  cases: GoldenCase[];
};
const token = Buffer.from(golden.token, 'base64');

function certificateDer(name: string): Buffer {
  return Buffer.from(new X509Certificate(file(`${name}.cert.pem`)).raw);
}

/** What the builder gave the key and the time-stamping authority. */
interface Seen {
  signedInfo?: string;
  imprint?: string;
}

/** The case's key, recording the bytes it is asked to sign. */
function recordingKey(privateKey: KeyObject, seen: Seen): SigningKey {
  const key = new SoftwareSigningKey(privateKey);
  return {
    algorithm: key.algorithm,
    scheme: key.scheme,
    sign: (hash, data, encoding) => {
      seen.signedInfo = Buffer.from(data).toString('utf8');
      return key.sign(hash, data, encoding);
    },
  };
}

function inputFor(c: GoldenCase, privateKey: KeyObject, seen: Seen): SignatureInput {
  const hashAlgorithm: HashAlgorithm = hashByName(c.hash)!;
  const signer = certificateDer(c.key);
  const timestamp = async (imprint: Uint8Array) => {
    seen.imprint = Buffer.from(imprint).toString('hex');
    return token;
  };
  return {
    hash: digest(hashAlgorithm, Buffer.from(golden.document, 'utf8')),
    hashAlgorithm,
    signerCertificate: { der: signer, certificate: pkijs.Certificate.fromBER(new Uint8Array(signer)) },
    chain: c.chain.map(certificateDer),
    key: recordingKey(privateKey, seen),
    signingTime: new Date(c.time),
    services: { timestamps: { timestamp, chain: [] } },
  };
}

const signatureValue = (xml: string) => /<ds:SignatureValue>([^<]*)<\/ds:SignatureValue>/.exec(xml)![1]!;

/** The imprint B-T time-stamps: the exclusive-C14N form of ds:SignatureValue, hashed with the case's hash. */
function imprintOf(c: GoldenCase, xml: string): string {
  const canonical = `<ds:SignatureValue xmlns:ds="${DS}">${signatureValue(xml)}</ds:SignatureValue>`;
  return digest(hashByName(c.hash)!, Buffer.from(canonical, 'utf8')).toString('hex');
}

function verifies(c: GoldenCase, privateKey: KeyObject, xml: string): boolean {
  const hash = hashByName(c.hash)!.node;
  const key = createPublicKey(privateKey);
  const value = Buffer.from(signatureValue(xml), 'base64');
  const data = Buffer.from(c.signedInfo, 'utf8');
  if (key.asymmetricKeyType === 'ec') return verify(hash, data, { key, dsaEncoding: 'ieee-p1363' }, value);
  const pss = { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: hashByName(c.hash)!.length };
  return verify(hash, data, key.asymmetricKeyType === 'rsa-pss' ? pss : key, value);
}

describe('XAdES writer: the golden outputs of the object-model builder', () => {
  test('the certificates carry names that XML escapes, and non-ASCII ones', () => {
    for (const key of ['rsa', 'p256', 'p384', 'pss']) {
      const signer = new X509Certificate(file(`${key}.cert.pem`));
      for (const name of [signer.subject, signer.issuer]) {
        for (const character of ['&', '<', '>', '"', "'"]) assert.ok(name.includes(character), name);
        assert.match(name, /[^\x00-\x7f]/);
      }
    }
  });

  for (const c of golden.cases) {
    const name = `${c.key} ${c.hash} B-${c.level}, chain [${c.chain.join(', ')}], ${c.id}, ${c.time}`;
    test(name, async () => {
      const privateKey = createPrivateKey(file(`${c.key}.key.pem`));
      const seen: Seen = {};
      const build = c.level === 'T' ? buildXadesBaselineT : buildXadesBaselineB;
      const xml = (await build(inputFor(c, privateKey, seen), c.id)).signature.toString('utf8');
      assert.equal(seen.signedInfo, c.signedInfo);
      assert.ok(verifies(c, privateKey, xml));
      if (c.key === 'rsa') assert.equal(xml, c.xml);
      else assert.equal(xml.replace(signatureValue(xml), signatureValue(c.xml)), c.xml);
      if (c.level === 'T') {
        assert.equal(seen.imprint, imprintOf(c, xml));
        assert.equal(c.imprint, imprintOf(c, c.xml));
      }
    });
  }
});
