/**
 * The relying party's PDF layer on its own (no server): incremental updates after a classic xref table and
 * after a cross-reference stream, the DSS merged without duplicates, errors for what is not a PDF. The CMS is
 * made locally with the PAdES B-B builder and a throw-away CA; pdfsig (trusting only that CA's root) judges.
 */
import { after, before, describe, it } from 'node:test';
import { SoftwareSigningKey } from '../../../src/crypto/signature.ts';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PDFDocument } from 'pdf-lib';
import { digest, SHA256 } from '../../../src/crypto/algorithms.ts';
import { padesBaselineBCms } from '../../../src/ades/pades.ts';
import { loadCaMaterial, pkiPaths, type CaMaterial } from '../../../src/ca/material.ts';
import { pkiInit } from '../../../src/ca/init.ts';
import { generateKeyPair } from '../../../src/crypto/keys.ts';
import { mintSignerCertificate, signerProfile } from '../../../src/ca/signer-certificate.ts';
import { addDss, PdfFormatError, prepareSignature, readDss, readSignatures } from '../../../src/rp/pdf.ts';
import { PdfIncrement } from '../../../src/rp/pdf-increment.ts';
import { run } from '../../helpers/openssl.ts';
import { nssTrustStore } from '../../helpers/pki-oracles.ts';

const SAMPLE = readFileSync(fileURLToPath(new URL('../../../fixtures/documents/sample.pdf', import.meta.url)));
let dir: string;
let ca: CaMaterial;
let n = 0;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'qtsp-pdf-'));
  pkiInit({ dataDir: dir, qtspId: 'sp:sandbox.qtsp.localhost:6f1c4c52-0b0e-4c4e-9d6b-2b9b8f0d7a31' });
  ca = loadCaMaterial(dir);
  await nssTrustStore(join(dir, 'nss'), pkiPaths(dir).rootCert);
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** Signs like the QTSP would, over the hash of the covered bytes. */
async function sign(pdf: Buffer): Promise<{ pdf: Buffer; cms: Buffer }> {
  const prepared = await prepareSignature(pdf, { reason: 'unit test' });
  const keys = generateKeyPair('P-256');
  const signerCertificate = await mintSignerCertificate({
    claims: { given_name: 'Erika', family_name: 'Mustermann' },
    publicKey: keys.publicKey,
    issuingCa: ca.issuing,
    validitySeconds: 600,
    profile: signerProfile({ defaultCountry: 'DE', pdsUrls: {} }),
    keyInQscd: false,
    consent: { issuer: 'https://as.test', txn: 'test-txn' },
  });
  const cms = await padesBaselineBCms({
    hash: digest(SHA256, prepared.covered),
    hashAlgorithm: SHA256,
    signerCertificate,
    chain: [ca.issuing.der],
    key: new SoftwareSigningKey(keys.privateKey),
    signingTime: new Date(),
  });
  return { pdf: await prepared.complete(cms), cms };
}

async function pdfsig(pdf: Buffer): Promise<{ valid: number; total: number; output: string }> {
  const file = join(dir, `${++n}.pdf`);
  writeFileSync(file, pdf);
  const r = await run('pdfsig', ['-nssdir', `sql:${join(dir, 'nss')}`, file]);
  const blocks = r.output.split(/^Signature #\d+:$/m).slice(1);
  return {
    valid: blocks.filter((b) => /Signature is Valid\./.test(b) && /Certificate is Trusted\./.test(b)).length,
    total: blocks.length,
    output: r.output,
  };
}

describe('incremental updates', () => {
  it('after a classic xref table: two signatures and a DSS, all valid, each file a prefix of the next', async () => {
    const first = await sign(SAMPLE);
    assert.ok(first.pdf.subarray(0, SAMPLE.length).equals(SAMPLE));
    const withDss = await addDss(first.pdf, { certificates: [ca.issuing.der], ocsps: [], crls: [] });
    assert.ok(withDss.subarray(0, first.pdf.length).equals(first.pdf));
    const second = await sign(withDss);
    assert.ok(second.pdf.subarray(0, withDss.length).equals(withDss));
    const verdict = await pdfsig(second.pdf);
    assert.equal(verdict.total, 2, verdict.output);
    assert.equal(verdict.valid, 2, verdict.output);
    assert.deepEqual(
      readSignatures(second.pdf).map((s) => s.contents),
      [first.cms, second.cms],
    );
  });

  it('after a cross-reference stream: the increment is a cross-reference stream too, and pdfsig accepts it', async () => {
    const doc = await PDFDocument.create();
    doc.addPage();
    const compressed = Buffer.from(await doc.save()); // pdf-lib's default: object streams + xref stream
    assert.ok(!compressed.includes('\nxref\n'));
    const signed = await sign(compressed);
    const tail = signed.pdf.subarray(compressed.length).toString('latin1');
    assert.match(tail, /\/Type \/XRef/);
    assert.doesNotMatch(tail, /^xref$/m);
    const verdict = await pdfsig(signed.pdf);
    assert.equal(verdict.valid, 1, verdict.output);
    // and pdf-lib reads the result back
    await PDFDocument.load(signed.pdf);
  });

  it('the DSS grows without duplicates', async () => {
    const once = await addDss(SAMPLE, { certificates: [ca.issuing.der], ocsps: [Buffer.from('ocsp-1')], crls: [] });
    const twice = await addDss(once, {
      certificates: [ca.issuing.der, ca.root.der],
      ocsps: [Buffer.from('ocsp-1'), Buffer.from('ocsp-2')],
      crls: [Buffer.from('crl')],
    });
    const dss = await readDss(twice);
    assert.deepEqual(dss.certificates, [ca.issuing.der, ca.root.der]);
    assert.deepEqual(dss.ocsps.map(String), ['ocsp-1', 'ocsp-2']);
    assert.deepEqual(dss.crls.map(String), ['crl']);
  });

  it('refuses what is not a PDF, or a PDF that does not end with %%EOF', async () => {
    await assert.rejects(PdfIncrement.open(Buffer.from('hello')), PdfFormatError);
    await assert.rejects(
      PdfIncrement.open(Buffer.concat([SAMPLE, Buffer.from('\ntrailing garbage\n')])),
      PdfFormatError,
    );
  });
});
