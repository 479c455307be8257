/**
 * CAdES baseline B-B, checked with OpenSSL as the independent oracle over every hash of the registry (spec 2.7)
 * and every signer key type. The oracle command:
 *
 *   openssl cms -verify -cades -binary -inform DER -in sig.p7s -content doc.bin -CAfile root-ca.pem -out /dev/null
 *
 * -cades:  makes OpenSSL check the signing-certificate-v2 attribute against the signer certificate; without
 *          it a wrong ESSCertIDv2 goes unnoticed (tested below).
 * -binary: the detached content is bytes, not MIME text: no CRLF canonicalisation before hashing.
 * No -purpose: OpenSSL's default for CMS signers (smimesign) accepts keyUsage nonRepudiation alone and a
 *          certificate without EKU, which is exactly our signer certificate; -purpose any is not needed.
 * The issuing CA comes from the CMS certificates, only the root is trusted.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { HASH_ALGORITHMS, digest, hashByName, type HashAlgorithm } from '../../../src/crypto/algorithms.ts';
import {
  CMS_OID,
  baselineSignedAttributes,
  encodeSignedData,
  messageDigestAttribute,
  signerInfo,
  signSignerInfo,
  signingCertificateV2Attribute,
  type CmsSignerInput,
} from '../../../src/crypto/cms.ts';
import { buildCadesBaselineB } from '../../../src/ades/cades.ts';
import { SoftwareSigningKey } from '../../../src/crypto/signature.ts';
import { loadCaMaterial, pkiPaths, type CaMaterial } from '../../../src/ca/material.ts';
import { pkiInit } from '../../../src/ca/init.ts';
import { generateKeyPair, KEY_ALGORITHMS, type KeyAlgorithm, type KeyPair } from '../../../src/crypto/keys.ts';
import { mintTestSignerCertificate } from '../../helpers/signer.ts';

const run = promisify(execFile);

/** Written out here rather than taken from the registry, so that a wrong registry entry cannot pass. */
const ECDSA_OIDS: Record<string, string> = {
  sha256: '1.2.840.10045.4.3.2', // RFC 5758
  sha384: '1.2.840.10045.4.3.3',
  sha512: '1.2.840.10045.4.3.4',
  'sha3-256': '2.16.840.1.101.3.4.3.10', // NIST CSOR
  'sha3-384': '2.16.840.1.101.3.4.3.11',
  'sha3-512': '2.16.840.1.101.3.4.3.12',
};
const RSA_OIDS: Record<string, string> = {
  sha256: '1.2.840.113549.1.1.11', // RFC 4055
  sha384: '1.2.840.113549.1.1.12',
  sha512: '1.2.840.113549.1.1.13',
  'sha3-256': '2.16.840.1.101.3.4.3.14', // NIST CSOR
  'sha3-384': '2.16.840.1.101.3.4.3.15',
  'sha3-512': '2.16.840.1.101.3.4.3.16',
};
const SIGNATURE_ALGORITHM_OIDS: Record<KeyAlgorithm, Record<string, string>> = {
  'P-256': ECDSA_OIDS,
  'P-384': ECDSA_OIDS,
  'RSA-3072': RSA_OIDS,
};

let dir: string;
let ca: CaMaterial;
let rootCa: string;
let docFile: string;
const keys = new Map<KeyAlgorithm, KeyPair>();
const DOCUMENT = Buffer.from(
  '%PDF-1.7\nnot really a PDF, but bytes with \r\n and \n line ends and \x00\xff binary\n',
  'latin1',
);
let fileCount = 0;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'qtsp-cades-'));
  pkiInit({ dataDir: dir, qtspId: 'sp:test.example:00000000-0000-4000-8000-000000000000' });
  ca = loadCaMaterial(dir);
  rootCa = pkiPaths(dir).rootCert;
  docFile = join(dir, 'doc.bin');
  writeFileSync(docFile, DOCUMENT);
  // one key pair per type for the whole file: RSA-3072 generation is slow
  for (const algorithm of KEY_ALGORITHMS) keys.set(algorithm, generateKeyPair(algorithm));
});

after(() => rmSync(dir, { recursive: true, force: true }));

async function signerInput(
  keyAlgorithm: KeyAlgorithm,
  hashAlgorithm: HashAlgorithm,
  signingTime?: Date,
): Promise<CmsSignerInput> {
  const keyPair = keys.get(keyAlgorithm)!;
  const signerCertificate = await mintTestSignerCertificate(ca.issuing, keyPair.publicKey, 'test-txn');
  return {
    hash: digest(hashAlgorithm, DOCUMENT),
    hashAlgorithm,
    signerCertificate,
    chain: [ca.issuing.der],
    key: new SoftwareSigningKey(keyPair.privateKey),
    ...(signingTime ? { signingTime } : {}),
  };
}

function save(der: Buffer, name = 'sig'): string {
  const file = join(dir, `${name}-${++fileCount}.p7s`);
  writeFileSync(file, der);
  return file;
}

/** Runs the oracle; resolves with whether OpenSSL accepted the signature, and its output. */
async function opensslVerify(
  cmsFile: string,
  contentFile = docFile,
  cades = true,
): Promise<{ ok: boolean; output: string }> {
  const args = [
    'cms',
    '-verify',
    ...(cades ? ['-cades'] : []),
    '-binary',
    '-inform',
    'DER',
    '-in',
    cmsFile,
    '-content',
    contentFile,
    '-CAfile',
    rootCa,
    '-out',
    '/dev/null',
  ];
  try {
    const { stdout, stderr } = await run('openssl', args);
    return { ok: true, output: stdout + stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    assert.equal(typeof e.code, 'number', `openssl did not run: ${String(error)}`);
    return { ok: false, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

function parseSignedData(der: Buffer): pkijs.SignedData {
  const contentInfo = pkijs.ContentInfo.fromBER(new Uint8Array(der));
  assert.equal(contentInfo.contentType, CMS_OID.signedData);
  return new pkijs.SignedData({ schema: contentInfo.content });
}

/** The DER of each signed attribute exactly as it sits in the CMS. */
function signedAttributeEncodings(signerInfo: pkijs.SignerInfo): Buffer[] {
  const set = asn1js.fromBER(signerInfo.signedAttrs!.encodedValue);
  assert.equal(set.offset, signerInfo.signedAttrs!.encodedValue.byteLength);
  return (set.result as asn1js.Set).valueBlock.value.map((a) => Buffer.from(a.valueBeforeDecodeView));
}

function attributeValue(signerInfo: pkijs.SignerInfo, type: string): asn1js.AsnType[] {
  const found = signerInfo.signedAttrs!.attributes.filter((a) => a.type === type);
  assert.equal(found.length, 1, `exactly one ${type}`);
  return found[0]!.values;
}

describe('buildCadesBaselineB: OpenSSL verifies every hash x key combination', () => {
  for (const hashAlgorithm of HASH_ALGORITHMS.values()) {
    for (const keyAlgorithm of KEY_ALGORITHMS) {
      test(`${hashAlgorithm.name} with ${keyAlgorithm}`, async () => {
        const input = await signerInput(keyAlgorithm, hashAlgorithm, new Date());
        const cms = await buildCadesBaselineB(input);
        const result = await opensslVerify(save(cms));
        assert.ok(result.ok, result.output);
        assert.match(result.output, /CAdES Verification successful/);

        const signedData = parseSignedData(cms);
        const signerInfo = signedData.signerInfos[0]!;
        assert.equal(signedData.digestAlgorithms.length, 1);
        assert.equal(signedData.digestAlgorithms[0]!.algorithmId, hashAlgorithm.oid);
        assert.equal(signerInfo.digestAlgorithm.algorithmId, hashAlgorithm.oid);
        assert.equal(
          signerInfo.signatureAlgorithm.algorithmId,
          SIGNATURE_ALGORITHM_OIDS[keyAlgorithm][hashAlgorithm.node],
        );
        // RFC 4055: sha*WithRSAEncryption carries NULL parameters; RFC 5758: ECDSA carries none
        const params = signerInfo.signatureAlgorithm.algorithmParams as asn1js.AsnType | undefined;
        if (keyAlgorithm === 'RSA-3072') assert.ok(params instanceof asn1js.Null);
        else assert.equal(params, undefined);
      });
    }
  }
});

describe('buildCadesBaselineB: structure (EN 319 122-1 B-B)', () => {
  test('detached, version 1, certificates, sid issuerAndSerialNumber', async () => {
    const input = await signerInput('P-256', hashByName('sha-256')!, new Date());
    const signedData = parseSignedData(await buildCadesBaselineB(input));
    assert.equal(signedData.version, 1);
    assert.equal(signedData.encapContentInfo.eContentType, CMS_OID.data);
    assert.equal(signedData.encapContentInfo.eContent, undefined, 'detached: no eContent');
    const certificates = (signedData.certificates ?? []).map((c) =>
      Buffer.from((c as pkijs.Certificate).toSchema().toBER()),
    );
    assert.deepEqual(certificates, [input.signerCertificate.der, ca.issuing.der]);
    const signerInfo = signedData.signerInfos[0]!;
    assert.equal(signedData.signerInfos.length, 1);
    assert.equal(signerInfo.version, 1);
    assert.ok(signerInfo.sid instanceof pkijs.IssuerAndSerialNumber);
    assert.ok(signerInfo.sid.serialNumber.isEqual(input.signerCertificate.certificate.serialNumber));
    assert.equal(signerInfo.unsignedAttrs, undefined);
  });

  test('signed attributes are DER-sorted (X.690 11.6), each exactly once', async () => {
    for (const hashAlgorithm of HASH_ALGORITHMS.values()) {
      const signedData = parseSignedData(
        await buildCadesBaselineB(await signerInput('P-256', hashAlgorithm, new Date())),
      );
      const signerInfo = signedData.signerInfos[0]!;
      const encodings = signedAttributeEncodings(signerInfo);
      const sorted = [...encodings].sort(Buffer.compare);
      assert.deepEqual(encodings, sorted, hashAlgorithm.name);
      const types = signerInfo.signedAttrs!.attributes.map((a) => a.type).sort();
      assert.deepEqual(
        types,
        [CMS_OID.contentType, CMS_OID.messageDigest, CMS_OID.signingTime, CMS_OID.signingCertificateV2].sort(),
      );
    }
  });

  test('content-type, message-digest and signing-time values', async () => {
    const sha384 = hashByName('SHA-384')!;
    const time = new Date('2031-05-17T10:20:30.999Z');
    const input = await signerInput('P-384', sha384, time);
    const signerInfo = parseSignedData(await buildCadesBaselineB(input)).signerInfos[0]!;
    const [contentType] = attributeValue(signerInfo, CMS_OID.contentType);
    assert.equal((contentType as asn1js.ObjectIdentifier).valueBlock.toString(), CMS_OID.data);
    const [messageDigest] = attributeValue(signerInfo, CMS_OID.messageDigest);
    assert.deepEqual(Buffer.from((messageDigest as asn1js.OctetString).valueBlock.valueHexView), input.hash);
    const [signingTime] = attributeValue(signerInfo, CMS_OID.signingTime);
    assert.ok(signingTime instanceof asn1js.UTCTime, 'UTCTime until 2049 (RFC 5652 11.3)');
    // the exact DER: whole seconds, no fraction
    assert.deepEqual(
      Buffer.from(signingTime.valueBeforeDecodeView),
      Buffer.concat([Buffer.from([0x17, 13]), Buffer.from('310517102030Z')]),
    );
  });

  test('signing-certificate-v2: SHA-256 certHash, hashAlgorithm omitted, issuerSerial directoryName + serial', async () => {
    const input = await signerInput('P-256', hashByName('sha3-256')!, new Date());
    const signerInfo = parseSignedData(await buildCadesBaselineB(input)).signerInfos[0]!;
    const [value] = attributeValue(signerInfo, CMS_OID.signingCertificateV2);
    const certs = (value as asn1js.Sequence).valueBlock.value;
    assert.equal(certs.length, 1, 'no policies');
    const essCertIds = (certs[0] as asn1js.Sequence).valueBlock.value;
    assert.equal(essCertIds.length, 1);
    const [certHash, issuerSerial, ...rest] = (essCertIds[0] as asn1js.Sequence).valueBlock.value;
    assert.equal(rest.length, 0);
    assert.ok(
      certHash instanceof asn1js.OctetString,
      'first element is certHash: hashAlgorithm (DEFAULT sha256) omitted',
    );
    assert.deepEqual(
      Buffer.from(certHash.valueBlock.valueHexView),
      createHash('sha256').update(input.signerCertificate.der).digest(),
    );
    const parsed = new pkijs.IssuerSerial({ schema: issuerSerial });
    assert.equal(parsed.issuer.names.length, 1);
    assert.equal(parsed.issuer.names[0]!.type, 4, 'directoryName');
    assert.ok(
      (parsed.issuer.names[0]!.value as pkijs.RelativeDistinguishedNames).isEqual(
        input.signerCertificate.certificate.issuer,
      ),
    );
    assert.ok(parsed.serialNumber.isEqual(input.signerCertificate.certificate.serialNumber));
  });

  test('PAdES variant: no signing-time when none is given, and it still verifies', async () => {
    const cms = await buildCadesBaselineB(await signerInput('P-256', hashByName('sha-512')!));
    const signerInfo = parseSignedData(cms).signerInfos[0]!;
    assert.ok(!signerInfo.signedAttrs!.attributes.some((a) => a.type === CMS_OID.signingTime));
    assert.equal(signerInfo.signedAttrs!.attributes.length, 3);
    const result = await opensslVerify(save(cms));
    assert.ok(result.ok, result.output);
  });

  test('a hash of the wrong length is refused', async () => {
    const input = await signerInput('P-256', hashByName('sha-256')!, new Date());
    await assert.rejects(() => buildCadesBaselineB({ ...input, hashAlgorithm: hashByName('sha-384')! }), RangeError);
  });
});

describe('the oracle rejects what it must', () => {
  test('tampered document', async () => {
    const cms = await buildCadesBaselineB(await signerInput('P-256', hashByName('sha-256')!, new Date()));
    const tampered = Buffer.from(DOCUMENT);
    tampered[10] ^= 0x01;
    const tamperedFile = join(dir, 'tampered-doc.bin');
    writeFileSync(tamperedFile, tampered);
    const file = save(cms);
    assert.ok((await opensslVerify(file)).ok, 'the untampered pair verifies');
    const result = await opensslVerify(file, tamperedFile);
    assert.equal(result.ok, false);
    assert.match(result.output, /digest failure|verification failure/i);
  });

  for (const keyAlgorithm of ['P-256', 'RSA-3072'] as const) {
    test(`tampered signature value (${keyAlgorithm})`, async () => {
      const cms = await buildCadesBaselineB(await signerInput(keyAlgorithm, hashByName('sha-256')!, new Date()));
      const signature = Buffer.from(parseSignedData(cms).signerInfos[0]!.signature.valueBlock.valueHexView);
      const at = cms.indexOf(signature);
      assert.ok(at > 0 && cms.indexOf(signature, at + 1) < 0, 'signature found once');
      const tampered = Buffer.from(cms);
      tampered[at + signature.length - 1] ^= 0x01;
      const result = await opensslVerify(save(tampered));
      assert.equal(result.ok, false);
      assert.match(result.output, /signature failure|verification failure/i);
    });
  }

  test('tampered signed attribute (one message-digest byte flipped)', async () => {
    const input = await signerInput('P-256', hashByName('sha-256')!, new Date());
    const cms = await buildCadesBaselineB(input);
    const at = cms.indexOf(input.hash);
    assert.ok(at > 0);
    const tampered = Buffer.from(cms);
    tampered[at] ^= 0x01;
    const result = await opensslVerify(save(tampered));
    assert.equal(result.ok, false);
  });

  test('-cades catches a correctly signed but wrong signing-certificate-v2', async () => {
    const input = await signerInput('P-256', hashByName('sha-256')!, new Date());
    // the ESSCertIDv2 names the issuing CA instead of the signer: a valid signature over the wrong reference
    const wrongReference = signingCertificateV2Attribute({ der: ca.issuing.der });
    const attributes = baselineSignedAttributes(input).map((a) =>
      a.type === CMS_OID.signingCertificateV2 ? wrongReference : a,
    );
    const signed = await signSignerInfo({ ...input, signedAttributes: attributes });
    const file = save(
      encodeSignedData({
        hashAlgorithm: input.hashAlgorithm,
        signerInfo: signerInfo(signed),
        certificates: [input.signerCertificate.der, ...input.chain],
      }),
    );
    assert.ok((await opensslVerify(file, docFile, false)).ok, 'plain CMS verification does not look at it');
    const result = await opensslVerify(file);
    assert.equal(result.ok, false, 'CAdES verification does');
  });

  test('the building blocks alone give the same verifiable result as buildCadesBaselineB', async () => {
    const input = await signerInput('RSA-3072', hashByName('sha3-384')!, new Date());
    const signed = await signSignerInfo({ ...input, signedAttributes: [...baselineSignedAttributes(input)].reverse() });
    const cms = encodeSignedData({
      hashAlgorithm: input.hashAlgorithm,
      signerInfo: signerInfo(signed),
      certificates: [input.signerCertificate.der, ...input.chain],
    });
    const encodings = signedAttributeEncodings(parseSignedData(cms).signerInfos[0]!);
    assert.deepEqual(encodings, [...encodings].sort(Buffer.compare), 'sorted whatever the input order');
    assert.ok((await opensslVerify(save(cms))).ok);
    // and a wrong message-digest makes OpenSSL fail on the content verification, not on the structure
    const wrong = await signSignerInfo({
      ...input,
      signedAttributes: baselineSignedAttributes(input).map((a) =>
        a.type === CMS_OID.messageDigest
          ? messageDigestAttribute(digest(input.hashAlgorithm, Buffer.from('other')))
          : a,
      ),
    });
    const wrongCms = encodeSignedData({
      hashAlgorithm: input.hashAlgorithm,
      signerInfo: signerInfo(wrong),
      certificates: [input.signerCertificate.der, ...input.chain],
    });
    const result = await opensslVerify(save(wrongCms));
    assert.equal(result.ok, false);
    assert.match(result.output, /content verify error/i);
  });
});
