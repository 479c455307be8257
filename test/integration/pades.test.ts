/**
 * PAdES end to end (spec 2.12; EN 319 142-1): the relying party prepares the PDF, sends only
 * the hash of the /ByteRange through the real flow (PAR, authorization, token, signDoc over mutual TLS),
 * embeds the CMS, adds the DSS (B-LT) and a document time-stamp from our TSA (B-LTA). Every result is checked
 * with tools we did not write, each of them also shown to reject a tampered input:
 *   pdfsig (poppler, NSS)  every signature in the PDF, trusting only our root (a fresh NSS database)
 *   openssl cms -cades     the embedded CMS against the bytes the /ByteRange covers (the hash-only path)
 *   openssl ts -verify     the signature-time-stamp (over the signature value) and the document time-stamp
 *   openssl ocsp           every OCSP response in the DSS and in revocationInfo, for the certificate it covers
 *                          (the issuing CA's and the TSA's from the root's delegated responder)
 * Sizes (CMS and PDF per level) are printed as test diagnostics.
 */
import { after, before, describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as pkijs from 'pkijs';
import { hashByName, SHA256 } from '../../src/crypto/algorithms.ts';
import { signPdfs, type PadesLevel, type PadesResult } from '../../src/rp/pades.ts';
import {
  cmsCertificates,
  readDss,
  readSignatures,
  SIGNATURE_CONTENTS_BYTES,
  type PdfSignature,
  type ValidationMaterial,
} from '../../src/rp/pdf.ts';
import { toPem } from '../../src/util/base64.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { opensslCmsVerify, run, tsVerifyArgs } from '../helpers/openssl.ts';
import { assertIssuedAfter, nssTrustStore, tokenGenTime } from '../helpers/pki-oracles.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';

const SAMPLE = readFileSync(fileURLToPath(new URL('../../fixtures/documents/sample.pdf', import.meta.url)));
const SHA384 = hashByName('sha-384')!;
const SHA384_WITH_RSA = '1.2.840.113549.1.1.12'; // RFC 4055
const LEVELS: readonly PadesLevel[] = ['AdES-B-B', 'AdES-B-T', 'AdES-B-LT', 'AdES-B-LTA'];
const OID = {
  signingTime: '1.2.840.113549.1.9.5',
  signingCertificateV2: '1.2.840.113549.1.9.16.2.47',
  signatureTimeStamp: '1.2.840.113549.1.9.16.2.14',
};

let env: TestEnvironment;
let work: string;
let nssDir: string;
let counter = 0;

/*
 * pdfsig checks revocation online at the OCSP URL in the certificates' AIA, through NSS, whose HTTP client
 * speaks plain HTTP only: the certificates point at the QTSP's plain-HTTP publication server
 * (server.publicationPort), which is what makes pdfsig report "Certificate is Trusted".
 */
before(async () => {
  env = await startEnvironment();
  assert.match(env.qtsp.publicationUrl, /^http:\/\//);
  work = mkdtempSync(join(tmpdir(), 'qtsp-pades-'));
  // an NSS database that trusts our root and nothing else (pdfsig's trust store)
  nssDir = await nssTrustStore(join(work, 'nss'), env.rootCaFile);
});
after(async () => {
  await env.close();
  rmSync(work, { recursive: true, force: true });
});

function file(name: string, data: Uint8Array): string {
  const path = join(work, `${++counter}-${name}`);
  writeFileSync(path, data);
  return path;
}

async function sign(level: PadesLevel, pdfs: Buffer[] = [SAMPLE]): Promise<PadesResult> {
  return signPdfs(env.endpoints, {
    pdfs,
    labels: pdfs.map((_, i) => `sample ${i + 1}.pdf`),
    level,
    hashAlgorithm: SHA256,
  });
}

// ---------------------------------------------------------------------------------------------------------
// oracles

interface PdfsigSignature {
  readonly type: string;
  readonly valid: boolean;
  readonly trusted: boolean;
  readonly text: string;
}

/** pdfsig's verdict per signature, revocation checked online (see startHttpFront). */
async function pdfsig(pdf: Uint8Array): Promise<{ ok: boolean; output: string; signatures: PdfsigSignature[] }> {
  const r = await run('pdfsig', ['-nssdir', `sql:${nssDir}`, file('check.pdf', pdf)]);
  const signatures = r.output
    .split(/^Signature #\d+:$/m)
    .slice(1)
    .map((text) => ({
      type: /Signature Type: (.*)/.exec(text)?.[1]?.trim() ?? '',
      valid: /Signature Validation: Signature is Valid\./.test(text),
      trusted: /Certificate Validation: Certificate is Trusted\./.test(text),
      text,
    }));
  return { ok: r.ok, output: r.output, signatures };
}

async function opensslCms(sig: PdfSignature): Promise<{ ok: boolean; output: string }> {
  return opensslCmsVerify(sig.contents, sig.covered, env.rootCaFile);
}

/** openssl ts -verify of a token over `data`; the TSA chain comes from the token itself. */
async function opensslTs(token: Uint8Array, data: Uint8Array): Promise<{ ok: boolean; output: string }> {
  const chain = file(
    'tsa-chain.pem',
    Buffer.from(
      cmsCertificates(token)
        .map((c) => toPem(c, 'CERTIFICATE'))
        .join(''),
    ),
  );
  return run(
    'openssl',
    tsVerifyArgs(file('token.der', token), { dataFile: file('data.bin', data) }, env.rootCaFile, chain),
  );
}

/**
 * openssl ocsp: the response verifies (responder chain up to our root) and says `good` for `cert`, looked up
 * with OpenSSL's default SHA-1 CertID (no -sha256: the RFC 5019 profile validators use).
 */
async function opensslOcsp(
  response: Uint8Array,
  cert: Uint8Array,
  issuer: Uint8Array,
): Promise<{ ok: boolean; output: string }> {
  const issuerPem = file('issuer.pem', Buffer.from(toPem(issuer, 'CERTIFICATE')));
  const r = await run('openssl', [
    'ocsp',
    '-respin',
    file('ocsp.der', response),
    '-issuer',
    issuerPem,
    '-cert',
    file('cert.pem', Buffer.from(toPem(cert, 'CERTIFICATE'))),
    '-CAfile',
    env.rootCaFile,
    '-no_nonce',
  ]);
  return { ok: r.ok && /Response verify OK/.test(r.output) && /: good/.test(r.output), output: r.output };
}

// ---------------------------------------------------------------------------------------------------------
// CMS inspection

function signerInfo(cms: Uint8Array): pkijs.SignerInfo {
  return new pkijs.SignedData({ schema: pkijs.ContentInfo.fromBER(new Uint8Array(cms)).content }).signerInfos[0]!;
}

function attributeTypes(attrs: pkijs.SignedAndUnsignedAttributes | undefined): string[] {
  return (attrs?.attributes ?? []).map((a) => a.type);
}

function signatureTimeStamp(cms: Uint8Array): { token: Buffer; signatureValue: Buffer } | undefined {
  const si = signerInfo(cms);
  const attr = si.unsignedAttrs?.attributes.find((a) => a.type === OID.signatureTimeStamp);
  if (!attr) return undefined;
  return {
    token: Buffer.from(attr.values[0]!.toBER()),
    signatureValue: Buffer.from(si.signature.valueBlock.valueHexView),
  };
}

function certificateParts(der: Uint8Array): { subject: string; issuer: string; selfSigned: boolean } {
  const c = pkijs.Certificate.fromBER(new Uint8Array(der));
  const subject = Buffer.from(c.subject.toSchema().toBER()).toString('hex');
  const issuer = Buffer.from(c.issuer.toSchema().toBER()).toString('hex');
  return { subject, issuer, selfSigned: subject === issuer };
}

/** openssl crl: the CRL's signature verifies against our root; openssl verify -crl_check: `cert` is not on it. */
async function opensslCrl(crl: Uint8Array, cert: Uint8Array): Promise<{ ok: boolean; output: string }> {
  const crlPem = file('list.crl.pem', Buffer.from(toPem(crl, 'X509 CRL')));
  const signature = await run('openssl', ['crl', '-in', crlPem, '-CAfile', env.rootCaFile, '-noout']);
  if (!signature.ok || !/verify OK/.test(signature.output))
    return signature.ok ? { ok: false, output: signature.output } : signature;
  return run('openssl', [
    'verify',
    '-crl_check',
    '-CAfile',
    env.rootCaFile,
    '-CRLfile',
    crlPem,
    file('subject.pem', Buffer.from(toPem(cert, 'CERTIFICATE'))),
  ]);
}

/**
 * EN 319 142-1 5.4.2 (B-LT): revocation data for every certificate in the DSS that is not self-signed. Each
 * OCSP response verifies and says good for one of them; each certificate OCSP does not cover is on no CRL of
 * its issuer that verifies.
 */
async function checkRevocationData(dss: ValidationMaterial, root: Buffer): Promise<void> {
  const all = [...dss.certificates, root];
  const parts = all.map(certificateParts);
  const issuerOf = (i: number) => all.find((_, j) => parts[j]!.subject === parts[i]!.issuer);
  const covered = new Set<number>();
  for (const response of dss.ocsps) {
    const outputs: string[] = [];
    let accepted = false;
    for (const [i, cert] of all.entries()) {
      const issuer = issuerOf(i);
      if (parts[i]!.selfSigned || !issuer || covered.has(i)) continue;
      const r = await opensslOcsp(response, cert, issuer);
      outputs.push(r.output);
      if (r.ok) {
        covered.add(i);
        accepted = true;
        break;
      }
    }
    assert.ok(accepted, `openssl ocsp accepts the response for no certificate:\n${outputs.join('\n')}`);
  }
  for (const [i, cert] of all.entries()) {
    if (parts[i]!.selfSigned || covered.has(i)) continue;
    const checks = await Promise.all(dss.crls.map((crl) => opensslCrl(crl, cert)));
    assert.ok(
      checks.some((c) => c.ok),
      `certificate ${i} has neither an OCSP response nor a CRL that openssl accepts:\n${checks.map((c) => c.output).join('\n')}`,
    );
  }
}

// ---------------------------------------------------------------------------------------------------------

const sizes: string[] = [];

async function checkSignedPdf(t: TestContext, level: PadesLevel, result: PadesResult): Promise<void> {
  const pdf = result.pdfs[0]!;
  const cms = result.signatures[0]!;
  const signatures = readSignatures(pdf);
  const expectedTypes = level === 'AdES-B-LTA' ? ['ETSI.CAdES.detached', 'ETSI.RFC3161'] : ['ETSI.CAdES.detached'];
  assert.deepEqual(
    signatures.map((s) => s.subFilter),
    expectedTypes,
  );
  assert.ok(signatures[0]!.contents.equals(cms), 'the PDF carries the CMS signDoc returned');

  // pdfsig: valid and trusted, trusting only our root
  const verdict = await pdfsig(pdf);
  assert.equal(verdict.signatures.length, expectedTypes.length, verdict.output);
  const cades = verdict.signatures[0]!;
  assert.equal(cades.type, 'ETSI.CAdES.detached', verdict.output);
  assert.ok(cades.valid && cades.trusted, verdict.output);

  // openssl cms over exactly the bytes the /ByteRange covers: the hash we sent was the right one
  const cmsCheck = await opensslCms(signatures[0]!);
  assert.ok(cmsCheck.ok, cmsCheck.output);

  // the PAdES CMS profile (EN 319 142-1 5.4, 6.3)
  const si = signerInfo(cms);
  const signed = attributeTypes(si.signedAttrs);
  assert.ok(!signed.includes(OID.signingTime), 'PAdES: no signing-time');
  assert.equal(signed.filter((a) => a === OID.signingCertificateV2).length, 1, 'exactly one signing-certificate-v2');

  // B-T and above: signature-time-stamp over the signature value
  const sts = signatureTimeStamp(cms);
  assert.equal(sts !== undefined, level !== 'AdES-B-B', 'signature-time-stamp from B-T on');
  if (sts) {
    const ts = await opensslTs(sts.token, sts.signatureValue);
    assert.ok(ts.ok, ts.output);
  }

  // revocationInfo at every level: OCSP for the signer certificate (issuing CA's responder) and for the issuing
  // CA (and from B-T on the TSA certificate) from the root's delegated responder, the root key being offline;
  // every piece accepted by openssl ocsp
  const info = result.revocationInfo;
  assert.ok(info && Array.isArray(info.ocsp) && Array.isArray(info.crl), `revocationInfo for P at ${level}`);
  const expectedOcsp = level === 'AdES-B-B' ? 2 : 3;
  assert.ok(info.ocsp.length >= expectedOcsp, `revocationInfo.ocsp for P at ${level}: signer, issuing CA, TSA`);
  const certificates = [...cmsCertificates(cms), ...(sts ? cmsCertificates(sts.token) : [])];
  await checkRevocationData(
    {
      certificates: certificates.filter((c, i) => certificates.findIndex((o) => o.equals(c)) === i),
      ocsps: info.ocsp.map((b) => Buffer.from(b, 'base64')),
      crls: info.crl.map((b) => Buffer.from(b, 'base64')),
    },
    readRoot(),
  );

  // B-LT and above: the DSS with the same material, all of it issued after the signature time-stamp
  const dss = await readDss(pdf);
  if (level === 'AdES-B-LT' || level === 'AdES-B-LTA') {
    const fresh = await assertIssuedAfter(
      { ocsp: dss.ocsps, crl: dss.crls },
      await tokenGenTime(sts!.token),
      `PAdES ${level}`,
    );
    assert.ok(fresh >= 3, 'OCSP responses for the signer, the issuing CA and the TSA at least');
    assert.deepEqual(
      new Set(dss.ocsps.map((o) => o.toString('base64'))),
      new Set(info.ocsp),
      'the DSS holds the OCSP responses of revocationInfo',
    );
    assert.deepEqual(
      new Set(dss.crls.map((o) => o.toString('base64'))),
      new Set(info.crl ?? []),
      'the DSS holds the CRLs of revocationInfo',
    );
    assert.deepEqual(
      new Set(dss.certificates.map((c) => c.toString('base64'))),
      new Set(cmsCertificates(cms).map((c) => c.toString('base64'))),
    );
    await checkRevocationData(dss, readRoot());
  } else {
    assert.equal(dss.certificates.length + dss.ocsps.length + dss.crls.length, 0, 'no DSS below B-LT');
  }

  // B-LTA: a document time-stamp over everything before it, DSS included
  if (level === 'AdES-B-LTA') {
    const doc = signatures[1]!;
    // poppler 22.12 lists the document time-stamp (its TSA as signer) but does not verify ETSI.RFC3161:
    // "Signature Type: unknown", "Unable to validate this type of signature", "not yet been verified".
    // openssl ts -verify below is the oracle for it.
    const docTs = verdict.signatures[1]!;
    assert.match(docTs.text, /Signer Certificate Common Name: .*Time-Stamping/, verdict.output);
    assert.match(docTs.text, /Total document signed/, verdict.output);
    assert.doesNotMatch(docTs.text, /Signature is Invalid|Digest Mismatch/, verdict.output);
    const ts = await opensslTs(doc.contents, doc.covered);
    assert.ok(ts.ok, ts.output);
    t.diagnostic(`pdfsig on the document time-stamp: ${verdict.signatures[1]!.text.replace(/\s+/g, ' ').trim()}`);
  }
  const line = `${level}: CMS ${cms.length} bytes, PDF ${pdf.length} bytes (input ${SAMPLE.length})`;
  sizes.push(line);
  t.diagnostic(line);
}

function readRoot(): Buffer {
  const pem = readFileSync(env.rootCaFile, 'utf8');
  return Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
}

describe('PAdES through the real flow', () => {
  for (const level of LEVELS) {
    it(`${level}: pdfsig valid and trusted, openssl cms/ts/ocsp accept`, async (t) => {
      await checkSignedPdf(t, level, await sign(level));
    });
  }

  it('RSA-3072 with SHA-384 at B-LTA: pdfsig valid and trusted, the CMS fits the reserved /Contents', async (t) => {
    const result = await signPdfs(env.endpoints, {
      pdfs: [SAMPLE],
      labels: ['sample.pdf'],
      level: 'AdES-B-LTA',
      hashAlgorithm: SHA384,
      signAlgo: SHA384_WITH_RSA,
    });
    const verdict = await pdfsig(result.pdfs[0]!);
    assert.ok(verdict.signatures[0]!.valid && verdict.signatures[0]!.trusted, verdict.output);
    assert.match(verdict.signatures[0]!.text, /Signing Hash Algorithm: SHA-384/);
    const cmsCheck = await opensslCms(readSignatures(result.pdfs[0]!)[0]!);
    assert.ok(cmsCheck.ok, cmsCheck.output);
    assert.ok(result.signatures[0]!.length < SIGNATURE_CONTENTS_BYTES / 2, `${result.signatures[0]!.length} bytes`);
    const line = `AdES-B-LTA, RSA-3072, SHA-384: CMS ${result.signatures[0]!.length} bytes, PDF ${result.pdfs[0]!.length} bytes`;
    sizes.push(line);
    t.diagnostic(line);
  });

  it('the P-256 PAdES B-LT CMS stays under 8 KB', async () => {
    const result = await sign('AdES-B-LT');
    assert.ok(result.signatures[0]!.length < 8192, `${result.signatures[0]!.length} bytes`);
  });

  it('several PDFs in one signDoc call, each with its own signature', async () => {
    const other = Buffer.from(SAMPLE);
    other[other.indexOf('D:2024') + 2] = 0x31; // another creation date (1024): another document
    const result = await sign('AdES-B-B', [SAMPLE, other]);
    for (const pdf of result.pdfs) {
      const verdict = await pdfsig(pdf);
      assert.ok(
        verdict.signatures.length === 1 && verdict.signatures[0]!.valid && verdict.signatures[0]!.trusted,
        verdict.output,
      );
    }
  });

  it('a second B-LT signature keeps the first valid (incremental updates only)', async (t) => {
    const first = (await sign('AdES-B-LT')).pdfs[0]!;
    const second = (await sign('AdES-B-LT', [first])).pdfs[0]!;
    assert.ok(second.subarray(0, first.length).equals(first), 'the signed file is a prefix of the twice-signed one');
    const verdict = await pdfsig(second);
    assert.equal(verdict.signatures.length, 2, verdict.output);
    for (const s of verdict.signatures) assert.ok(s.valid && s.trusted, verdict.output);
    // each signature covers everything before its own /Contents; the DSS after it is outside its range
    const [a, b] = readSignatures(second);
    assert.ok(a!.byteRange[2] + a!.byteRange[3] < b!.byteRange[1], 'the first signature ends before the second starts');
    assert.ok(b!.byteRange[2] + b!.byteRange[3] > first.length, 'the second covers the whole once-signed file');
    const dss = await readDss(second);
    t.diagnostic(
      `twice B-LT: PDF ${second.length} bytes, DSS ${dss.certificates.length} certificates, ${dss.ocsps.length} OCSP responses`,
    );
  });
});

describe('the oracles reject tampered input', () => {
  let signed: Buffer;
  before(async () => {
    signed = (await sign('AdES-B-LTA')).pdfs[0]!;
  });

  /** a copy with one byte changed inside the first signature's first signed range (the page content) */
  function tampered(): Buffer {
    const copy = Buffer.from(signed);
    const at = copy.indexOf('D:2024') + 2; // the creation date in /Info: in the original, covered by every signature
    assert.ok(at > 0 && at < readSignatures(signed)[0]!.byteRange[1]);
    copy[at] = copy[at]! ^ 0x01;
    return copy;
  }

  it('pdfsig: a byte changed inside the signed range', async () => {
    const verdict = await pdfsig(tampered());
    assert.ok(verdict.signatures.length >= 1, verdict.output);
    assert.ok(!verdict.signatures[0]!.valid, verdict.output);
    assert.match(verdict.signatures[0]!.text, /Digest Mismatch|Signature is Invalid/, verdict.output);
  });

  it('openssl cms: the covered bytes changed', async () => {
    const sig = readSignatures(tampered())[0]!;
    const r = await opensslCms(sig);
    assert.ok(!r.ok, r.output);
  });

  it('openssl ts: the document time-stamp over changed bytes', async () => {
    const doc = readSignatures(tampered())[1]!;
    const r = await opensslTs(doc.contents, doc.covered);
    assert.ok(!r.ok, r.output);
  });

  it('openssl ocsp: a response with a changed signature byte', async () => {
    const dss = await readDss(signed);
    const response = Buffer.from(dss.ocsps[0]!);
    response[response.length - 5] = response[response.length - 5]! ^ 0x01; // inside the signature BIT STRING
    const signer = dss.certificates[0]!;
    const issuer =
      dss.certificates.find((c) => certificateParts(c).subject === certificateParts(signer).issuer) ??
      dss.certificates[1]!;
    const r = await opensslOcsp(response, signer, issuer);
    assert.ok(!r.ok, r.output);
  });
});

describe('qtsp sign --format P', () => {
  it('writes doc.signed.pdf at B-LT; signing that again keeps the first signature valid', async () => {
    const doc = join(work, 'doc.pdf');
    writeFileSync(doc, SAMPLE);
    const first = await qtsp(['sign', doc, '--format', 'P', '--level', 'B-LT', '--data-dir', env.dataDir]);
    assert.equal(first.code, 0, first.output);
    assert.match(first.output, /signed 1 PDF\(s\) at AdES-B-LT: .*doc\.signed\.pdf/);
    assert.ok(readFileSync(doc).equals(SAMPLE), 'the input file is left alone');
    const second = await qtsp([
      'sign',
      join(work, 'doc.signed.pdf'),
      '--format',
      'P',
      '--level',
      'B-LT',
      '--data-dir',
      env.dataDir,
    ]);
    assert.equal(second.code, 0, second.output);
    const verdict = await pdfsig(readFileSync(join(work, 'doc.signed.signed.pdf')));
    assert.equal(verdict.signatures.length, 2, verdict.output);
    for (const s of verdict.signatures) assert.ok(s.valid && s.trusted, verdict.output);
  });

  it('refuses a file that is not a PDF', async () => {
    const text = join(work, 'note.txt');
    writeFileSync(text, 'not a pdf');
    const res = await qtsp(['sign', text, '--format', 'P', '--data-dir', env.dataDir]);
    assert.equal(res.code, 2, res.output);
    assert.match(res.output, /not a PDF/);
  });
});

after(() => {
  if (sizes.length) console.log(`PAdES sizes:\n  ${sizes.join('\n  ')}`);
});
