/**
 * CAdES B-T, B-LT and B-LTA through the real signDoc flow (sandbox bank, mTLS, our TSA and OCSP responder),
 * over all six hash algorithms, each result checked by OpenSSL: `openssl cms -verify -cades`; every
 * time-stamp with `openssl ts -verify` (the signature-time-stamp over the signature value, the
 * archive-time-stamp-v3 over an imprint this test recomputes from OpenSSL's parse per EN 319 122-1 5.5.3);
 * every OCSP response in the CMS and in revocationInfo with `openssl ocsp` (the signer's from the issuing CA's
 * responder; the issuing CA's and the TSA's from the root's delegated responder, since the root key is offline);
 * the root CRL of the key ceremony with `openssl crl`. Each tool is also shown to reject a tampered input.
 * After the ceremony no private key among the service's files is the root's. CMS sizes per level are reported as diagnostics.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createPrivateKey, createPublicKey, X509Certificate } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HASH_ALGORITHMS, type HashAlgorithm } from '../../src/crypto/algorithms.ts';
import { ceremonyRootKeyFile } from '../../src/ca/material.ts';
import { fromPem } from '../../src/util/base64.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { opensslCmsVerify, run, scratch } from '../helpers/openssl.ts';
import {
  archiveImprint,
  assertIssuedAfter,
  ATTR,
  cmsParts,
  ocspOfRevocationChoice,
  ocspTimes,
  sha,
  tamper,
  tokenGenTime,
  verifyCrl,
  verifyOcsp,
  verifyToken,
  type CmsParts,
  pkiFiles,
  type PkiFiles,
} from '../helpers/pki-oracles.ts';
import { authorize, labelled, signaturesOf, signDocBody, signThroughSandbox } from '../helpers/signing.ts';
import { callSignDoc } from '../../src/rp/flow.ts';

const LEVELS = ['AdES-B-T', 'AdES-B-LT', 'AdES-B-LTA'] as const;
type Level = (typeof LEVELS)[number];
const DOCS = [Buffer.from('contract of sale\n'), Buffer.from('annex: terms and conditions, ünïcödé\n')];

let env: TestEnvironment;
let files: PkiFiles;
let work: ReturnType<typeof scratch>;

before(async () => {
  env = await startEnvironment({ trust: { idpCacheTtlSeconds: 0 } });
  work = scratch();
  files = pkiFiles(env.dataDir, work);
});
after(async () => {
  await env.close();
  work.remove();
});

interface Signed {
  readonly signatures: Buffer[];
  readonly revocationInfo?: { ocsp: string[]; crl: string[] };
}

async function sign(level: Level | 'AdES-B-B', alg: HashAlgorithm, docs: readonly Buffer[] = DOCS): Promise<Signed> {
  const hashes = docs.map((d) => sha(alg.node, d).toString('base64'));
  const res = await signThroughSandbox(env, hashes, {
    hashAlgorithmOID: alg.oid,
    fields: { conformance_level: level },
  });
  const signatures = signaturesOf(res);
  const revocationInfo = res.body.revocationInfo as Signed['revocationInfo'];
  return { signatures, ...(revocationInfo ? { revocationInfo } : {}) };
}

/**
 * openssl ocsp for each certificate an embedded response may cover: the signer (issuing CA's responder), the
 * issuing CA and the TSA (the root's delegated responder); the name of the one it verifies as good for.
 */
async function ocspCovers(response: Buffer, signer: string): Promise<string | undefined> {
  const candidates = [
    ['signer', files.issuing, signer],
    ['issuing CA', files.root, files.issuing],
    ['TSA', files.root, files.tsa],
  ] as const;
  for (const [name, issuing, cert] of candidates) {
    const r = await verifyOcsp(response, { root: files.root, issuing, cert });
    if (r.ok && r.output.includes(`${cert}: good`)) return name;
  }
  return undefined;
}

function unsignedValues(parts: CmsParts, name: string): Buffer[] {
  return parts.unsigned.filter((a) => a.name === name).flatMap((a) => a.values);
}

/** OCSP responses and CRLs in SignedData.crls */
async function revocationInCms(parts: CmsParts): Promise<{ ocsp: Buffer[]; crl: Buffer[] }> {
  const ocsp: Buffer[] = [];
  const crl: Buffer[] = [];
  for (const choice of parts.crls) {
    const response = await ocspOfRevocationChoice(choice);
    if (response) ocsp.push(response);
    else crl.push(choice);
  }
  return { ocsp, crl };
}

async function checkSignature(level: Level, alg: HashAlgorithm, signature: Buffer, doc: Buffer): Promise<CmsParts> {
  const s = scratch();
  try {
    const signer = s.file('signer.pem');
    const cms = await opensslCmsVerify(signature, doc, files.root, signer);
    assert.ok(cms.ok, `cms ${level} ${alg.name}: ${cms.output}`);
    const parts = await cmsParts(signature);
    const [sigTs] = unsignedValues(parts, ATTR.signatureTimeStamp);
    assert.ok(sigTs, 'no signature-time-stamp');
    const ts = await verifyToken(sigTs, { data: parts.signatureValue }, files.root, files.tsa);
    assert.ok(ts.ok, `signature-time-stamp ${alg.name}: ${ts.output}`);
    if (level === 'AdES-B-T') {
      assert.equal(parts.crls.length, 0);
      return parts;
    }
    assert.equal(parts.version, 5, 'SignedData with id-ri-ocsp-response must be version 5 (RFC 5652 5.1)');
    const tsaDer = fromPem(readFileSync(files.tsa, 'utf8'))[0]!;
    assert.ok(
      parts.certificates.some((c) => c.equals(tsaDer)),
      'the TSA certificate is not in SignedData.certificates',
    );
    assert.equal(parts.certificates.length, 4, 'signer, issuing CA, TSA, root');
    const revocation = await revocationInCms(parts);
    assert.equal(revocation.ocsp.length, 3, 'three OCSP responses: signer, issuing CA, TSA');
    assert.equal(revocation.crl.length, 0, 'no CRL: the root CRL of the key ceremony predates the time-stamp');
    const covered = await Promise.all(revocation.ocsp.map((response) => ocspCovers(response, signer)));
    assert.deepEqual(covered.sort(), ['TSA', 'issuing CA', 'signer'], 'openssl ocsp: good for each certificate');
    // issued strictly after the signature time-stamp's genTime: OCSP producedAt and thisUpdate
    assert.equal(await assertIssuedAfter(revocation, await tokenGenTime(sigTs), `${level} ${alg.name}`), 3);
    if (level === 'AdES-B-LTA') {
      const [ats] = unsignedValues(parts, ATTR.archiveTimeStampV3);
      assert.ok(ats, 'no archive-time-stamp-v3');
      const imprint = sha(alg.node, await archiveImprint(parts, ats, sha(alg.node, doc), alg));
      const ok = await verifyToken(ats, { digestHex: imprint.toString('hex') }, files.root, files.tsa);
      assert.ok(ok.ok, `archive-time-stamp-v3 ${alg.name}: ${ok.output}`);
    }
    return parts;
  } finally {
    s.remove();
  }
}

describe('CAdES levels through signDoc, checked by OpenSSL', () => {
  /** the genTime of every signature time-stamp of the tests below */
  const everyGenTime: number[] = [];
  for (const alg of HASH_ALGORITHMS.values()) {
    for (const level of LEVELS) {
      it(`${level} with ${alg.name}`, async () => {
        const signed = await sign(level, alg);
        assert.equal(signed.signatures.length, DOCS.length);
        const inCms: Buffer[] = [];
        const genTimes = new Set<number>();
        for (const [i, signature] of signed.signatures.entries()) {
          const parts = await checkSignature(level, alg, signature, DOCS[i]!);
          const r = await revocationInCms(parts);
          inCms.push(...r.ocsp, ...r.crl);
          genTimes.add((await tokenGenTime(unsignedValues(parts, ATTR.signatureTimeStamp)[0]!)).getTime());
        }
        everyGenTime.push(...genTimes);
        if (level === 'AdES-B-T') {
          assert.equal(signed.revocationInfo, undefined, 'no revocationInfo below B-LT');
          return;
        }
        // revocationInfo carries exactly the OCSP responses and CRLs of the signatures (spec 2.12)
        const reported = [...signed.revocationInfo!.ocsp, ...signed.revocationInfo!.crl].sort();
        assert.deepEqual([...new Set(inCms.map((b) => b.toString('base64')))].sort(), reported);
        // both signatures share one signer certificate: one OCSP response each for the signer, the issuing CA
        // and the TSA, made after their time-stamps (for each time-stamp, at most: a response made after the
        // later of the two serves both, one made between them serves the earlier only, and each certificate's
        // responses are made on their own, so two for one certificate and one for another is fine); no CRL
        const made = signed.revocationInfo!.ocsp.length;
        assert.ok(made >= 3 && made <= 3 * genTimes.size, `${made} OCSP responses`);
        assert.equal(signed.revocationInfo!.crl.length, 0);
      });
    }
  }

  // one genTime in a thousand falls on a whole second by chance; every one of them does only if the TSA rounds
  it('the time-stamps of those signatures are dated to the millisecond', () => {
    assert.ok(everyGenTime.length >= HASH_ALGORITHMS.size * LEVELS.length, `${everyGenTime.length} genTimes`);
    assert.ok(
      everyGenTime.some((t) => t % 1000 !== 0),
      `genTime of ${everyGenTime.length} time-stamps: all on a whole second`,
    );
  });

  it('revocationInfo: every OCSP response verifies with openssl ocsp (good), every CRL with openssl crl', async () => {
    const alg = HASH_ALGORITHMS.get('2.16.840.1.101.3.4.2.1')!;
    const signed = await sign('AdES-B-LT', alg);
    const s = scratch();
    try {
      const signer = s.file('signer.pem');
      assert.ok((await opensslCmsVerify(signed.signatures[0]!, DOCS[0]!, files.root, signer)).ok);
      assert.ok(signed.revocationInfo!.ocsp.length >= 3);
      for (const b64 of signed.revocationInfo!.ocsp) {
        const name = await ocspCovers(Buffer.from(b64, 'base64'), signer);
        assert.ok(name, `openssl ocsp: the response is good for no certificate of the chain: ${b64}`);
      }
      for (const b64 of signed.revocationInfo!.crl) {
        const ok = await verifyCrl(Buffer.from(b64, 'base64'), files.rootAndIssuing);
        assert.ok(ok.ok && /verify OK/.test(ok.output), ok.output);
      }
    } finally {
      s.remove();
    }
  });
});

/** the revocationInfo OCSP responses of `calls` B-LT signDoc calls made one after another */
async function sequentialOcsp(calls: number): Promise<Buffer[][]> {
  const alg = HASH_ALGORITHMS.get('2.16.840.1.101.3.4.2.1')!;
  const out: Buffer[][] = [];
  for (let i = 0; i < calls; i++) {
    const hash = sha(alg.node, Buffer.from(`sequential B-LT document ${i}\n`)).toString('base64');
    const auth = await authorize(env.endpoints, labelled([hash]));
    const body = signDocBody(auth.accessToken, [hash], { conformance_level: 'AdES-B-LT' });
    const res = await callSignDoc(auth.qtsp.signDoc, env.endpoints, body);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const info = (res.body as { revocationInfo: { ocsp: string[] } }).revocationInfo;
    out.push(info.ocsp.map((b64) => Buffer.from(b64, 'base64')));
  }
  return out;
}

describe('B-LT waits for no whole second', () => {
  // With revocation data in whole seconds, each call's responses were dated in a later second than its
  // time-stamp, so ten calls one after another spanned nine seconds on any machine. Whether a call waits is read
  // from the data, not timed: the OCSP responses, read by OpenSSL, are dated to the millisecond (each after its
  // time-stamp, as the tests above check), which a whole-second date never is.
  it('the OCSP responses of B-LT calls one after another are dated to the millisecond', async () => {
    const responses = (await sequentialOcsp(5)).flat();
    const millis = await Promise.all(responses.map(async (r) => (await ocspTimes(r)).producedAt.getUTCMilliseconds()));
    assert.ok(
      millis.some((ms) => ms !== 0),
      `producedAt of ${responses.length} responses: all on a whole second`,
    );
  });
});

describe('each oracle rejects a tampered input', () => {
  let parts: CmsParts;
  let signature: Buffer;
  const alg = HASH_ALGORITHMS.get('2.16.840.1.101.3.4.2.1')!;
  let signer: string;

  before(async () => {
    signature = (await sign('AdES-B-LTA', alg, [DOCS[0]!])).signatures[0]!;
    parts = await cmsParts(signature);
    signer = work.file('tamper-signer.pem');
    assert.ok((await opensslCmsVerify(signature, DOCS[0]!, files.root, signer)).ok);
  });

  it('openssl cms -verify: another document, a flipped signature byte', async () => {
    assert.equal((await opensslCmsVerify(signature, DOCS[1]!, files.root)).ok, false);
    const sigValueAt = signature.indexOf(parts.signatureValue);
    assert.equal((await opensslCmsVerify(tamper(signature, sigValueAt + 10), DOCS[0]!, files.root)).ok, false);
  });

  it('openssl ts -verify: the signature-time-stamp over other data, a token with a flipped byte', async () => {
    const [token] = unsignedValues(parts, ATTR.signatureTimeStamp);
    assert.equal(
      (await verifyToken(token!, { data: tamper(parts.signatureValue, 0) }, files.root, files.tsa)).ok,
      false,
    );
    assert.equal(
      (await verifyToken(tamper(token!, -20), { data: parts.signatureValue }, files.root, files.tsa)).ok,
      false,
    );
  });

  it('openssl ts -verify: the archive time-stamp against an imprint over a changed SignedData', async () => {
    const [ats] = unsignedValues(parts, ATTR.archiveTimeStampV3);
    const docHash = sha(alg.node, DOCS[0]!);
    const good = sha(alg.node, await archiveImprint(parts, ats!, docHash, alg));
    assert.ok((await verifyToken(ats!, { digestHex: good.toString('hex') }, files.root, files.tsa)).ok);
    const other = sha(alg.node, await archiveImprint(parts, ats!, sha(alg.node, DOCS[1]!), alg));
    assert.equal((await verifyToken(ats!, { digestHex: other.toString('hex') }, files.root, files.tsa)).ok, false);
  });

  it('openssl ocsp: a response with a flipped signature byte, or checked for another certificate', async () => {
    const [response] = (await revocationInCms(parts)).ocsp;
    assert.ok((await verifyOcsp(response!, { root: files.root, issuing: files.issuing, cert: signer })).ok);
    const producedAt = response!.indexOf(Buffer.from([0x18, 0x0f])); // the first GeneralizedTime: producedAt
    const broken = await verifyOcsp(tamper(response!, producedAt + 2 + 13), {
      root: files.root,
      issuing: files.issuing,
      cert: signer,
    });
    assert.ok(!broken.ok || !/: good/.test(broken.output), broken.output);
    const otherCert = await verifyOcsp(response!, { root: files.root, issuing: files.issuing, cert: files.tsa });
    assert.ok(!otherCert.ok || !/: good/.test(otherCert.output), otherCert.output);
  });

  it('openssl crl: the root CRL of the key ceremony, and one with a flipped byte in its signed part', async () => {
    const crl = Buffer.from(await (await fetch(`${env.qtsp.publicationUrl}/crl/root.crl`)).arrayBuffer());
    const ok = await verifyCrl(crl, files.root);
    assert.ok(ok.ok && /verify OK/.test(ok.output), ok.output);
    assert.match(ok.output, /Issuer: .*qtsp Sandbox Root CA/);
    const thisUpdate = crl!.indexOf(Buffer.from([0x17, 0x0d])); // the first UTCTime: thisUpdate
    const broken = await verifyCrl(tamper(crl!, thisUpdate + 2 + 11), files.root);
    assert.ok(!broken.ok || !/verify OK/.test(broken.output), broken.output);
  });
});

describe('the root CA key is offline', () => {
  /** every file under `dir`, but not under `skip` */
  const filesUnder = (dir: string, skip: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const path = join(dir, name);
      if (path === skip) return [];
      return statSync(path).isDirectory() ? filesUnder(path, skip) : [path];
    });
  /** the SubjectPublicKeyInfo of the private key in `file`, or undefined when it holds none */
  const publicKeyOf = (file: string): Buffer | undefined => {
    try {
      return createPublicKey(createPrivateKey(readFileSync(file))).export({ type: 'spki', format: 'der' });
    } catch {
      return undefined;
    }
  };

  it('after the key ceremony no private key among the service files is the root key; the ceremony directory holds it', () => {
    const rootSpki = new X509Certificate(readFileSync(files.root)).publicKey.export({ type: 'spki', format: 'der' });
    const ceremonyDir = join(env.dataDir, 'ceremony');
    const keys = filesUnder(env.dataDir, ceremonyDir).filter((f) => publicKeyOf(f) !== undefined);
    assert.ok(keys.length >= 3, `private keys among the service files: ${keys.join(', ')}`);
    const rootKeys = keys.filter((f) => publicKeyOf(f)!.equals(rootSpki));
    assert.deepEqual(rootKeys, [], 'the root key is among the files the service reads');
    assert.ok(
      publicKeyOf(ceremonyRootKeyFile(env.dataDir))?.equals(rootSpki),
      'the ceremony directory has the root key',
    );
  });

  it("a B-LT signature's OCSP for the issuing CA: openssl ocsp verifies it (good), produced after the time-stamp", async () => {
    const alg = HASH_ALGORITHMS.get('2.16.840.1.101.3.4.2.1')!;
    const [signature] = (await sign('AdES-B-LT', alg, [DOCS[0]!])).signatures;
    const s = scratch();
    try {
      const signer = s.file('signer.pem');
      assert.ok((await opensslCmsVerify(signature!, DOCS[0]!, files.root, signer)).ok);
      const parts = await cmsParts(signature!);
      const revocation = await revocationInCms(parts);
      const forIssuing: Buffer[] = [];
      for (const response of revocation.ocsp) {
        const r = await verifyOcsp(response, { root: files.root, issuing: files.root, cert: files.issuing });
        if (r.ok && /Response verify OK/.test(r.output) && r.output.includes(`${files.issuing}: good`))
          forIssuing.push(response);
      }
      assert.equal(forIssuing.length, 1, 'one OCSP response for the issuing CA, from the root responder');
      const genTime = await tokenGenTime(unsignedValues(parts, ATTR.signatureTimeStamp)[0]!);
      assert.equal(await assertIssuedAfter({ ocsp: forIssuing, crl: [] }, genTime, 'issuing CA OCSP'), 1);
    } finally {
      s.remove();
    }
  });
});

describe('CMS sizes per level (P-256, SHA-256, one document)', () => {
  it('stay small: B-LT under 8 KB', async (t) => {
    const alg = HASH_ALGORITHMS.get('2.16.840.1.101.3.4.2.1')!;
    const sizes: Record<string, number> = {};
    for (const level of ['AdES-B-B', ...LEVELS] as const) {
      sizes[level] = (await sign(level, alg, [DOCS[0]!])).signatures[0]!.length;
    }
    t.diagnostic(
      `CMS bytes: ${Object.entries(sizes)
        .map(([l, n]) => `${l} ${n}`)
        .join(', ')}`,
    );
    writeFileSync(join(work.dir, 'sizes.json'), JSON.stringify(sizes));
    assert.ok(
      sizes['AdES-B-B']! < sizes['AdES-B-T']! &&
        sizes['AdES-B-T']! < sizes['AdES-B-LT']! &&
        sizes['AdES-B-LT']! < sizes['AdES-B-LTA']!,
    );
    assert.ok(sizes['AdES-B-LT']! < 8192, `B-LT is ${sizes['AdES-B-LT']} bytes`);
  });
});

describe('signer certificates point at our OCSP responder, CA certificate and CRL', () => {
  it('AIA (OCSP, caIssuers) and CRL distribution points at the plain-HTTP publication server', async () => {
    const alg = HASH_ALGORITHMS.get('2.16.840.1.101.3.4.2.1')!;
    const [signature] = (await sign('AdES-B-T', alg, [DOCS[0]!])).signatures;
    const s = scratch();
    try {
      const signer = s.file('signer.pem');
      assert.ok((await opensslCmsVerify(signature!, DOCS[0]!, files.root, signer)).ok);
      const text = await run('openssl', [
        'x509',
        '-in',
        signer,
        '-noout',
        '-ext',
        'authorityInfoAccess,crlDistributionPoints',
      ]);
      const base = env.qtsp.publicationUrl; // plain HTTP: validators fetch OCSP and CRLs without TLS
      assert.ok(text.output.includes(`OCSP - URI:${base}/ocsp`), text.output);
      assert.ok(text.output.includes(`CA Issuers - URI:${base}/ca/issuing.crt`), text.output);
      assert.ok(text.output.includes(`URI:${base}/crl/issuing.crl`), text.output);
    } finally {
      s.remove();
    }
  });
});
