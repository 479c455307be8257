/**
 * Renewal at a ceremony on a moved clock (libfaketime): one ecosystem started at the key ceremony signs a CAdES
 * B-LT signature; a year and a day on it refuses to sign (the root CRL has ended); `qtsp pki ceremony --renew`
 * plans (`--dry-run`) and renews the root CRL, the TSA with a fresh TSU key and both delegated OCSP responders
 * with fresh keys (in a token: made there, sensitive and never extractable, the replaced ones destroyed once the
 * instance switched, as pkcs11-tool shows); the running instance picks them up without a restart. Then a new CAdES B-LT signature passes openssl on the
 * moved clock (CMS, its time-stamp under the renewed TSA, the renewed responders' OCSP answers), a PAdES B-LT
 * PDF passes pdfsig on the moved clock (valid, trusted, revocation checked online), and the
 * signature made before the renewal still verifies at its signing time (openssl -attime). Then our TLS client
 * certificate is rotated through the SP directory (`qtsp pki client-cert --rotate`, the instance switches,
 * `--retire`) and a signature is made with the new one. Two years and a day on, the root CRL of that ceremony
 * has ended: signDoc answers 503 until a second `ceremony --renew --within 30` renews it and the TSA (its key
 * usage period ended); then CAdES B-LT and B-LTA pass openssl (cms, ts incl. the archive time-stamp, ocsp),
 * PAdES B-LT pdfsig and XAdES B-T xmlsec1, all on the moved clock, and the signatures made before each
 * renewal verify at their signing times. Three years on, past
 * the end of the responder certificate the ceremony renewed, the service has certified its responder's key
 * again by itself, and our OCSP answers verify with openssl on the moved clock.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { pkiPaths } from '../../src/ca/material.ts';
import { SOFTHSM2_MODULE } from '../../src/custody/softhsm/token.ts';
import { fromPem } from '../../src/util/base64.ts';
import { SHA256 } from '../../src/crypto/algorithms.ts';
import { readSignatures } from '../../src/rp/pdf.ts';
import { TEST_KEY_CUSTODY } from '../helpers/environment.ts';
import { cmsVerifyArgs, tsVerifyArgs } from '../helpers/openssl.ts';
import {
  clockRp,
  MovedClock,
  notReadyNaming,
  readinessWhen,
  startClockEcosystem,
  type MovedEcosystem,
} from '../helpers/moved-clock.ts';
import { archiveImprint, ATTR, cmsParts, nssTrustStore, ocspOfRevocationChoice, sha } from '../helpers/pki-oracles.ts';
import { xmlsecVerify } from '../helpers/xmlsec.ts';

const DAY = 24 * 3600 * 1000;
const QTSP = fileURLToPath(new URL('../../bin/qtsp.js', import.meta.url));
/** the ceremony runs with the instance's key custody and reload check */
const CEREMONY_ENV = { QTSP_KEYS_PROVIDER: TEST_KEY_CUSTODY, QTSP_CALENDAR_RELOAD_CHECK_SECONDS: '1' };
const KEY_LABELS = ['qtsp-tsa', 'qtsp-ocsp-responder', 'qtsp-root-ocsp-responder'];
const SAMPLE = readFileSync(fileURLToPath(new URL('../../fixtures/documents/sample.pdf', import.meta.url)));

interface Signed {
  readonly signature: Buffer;
  readonly document: Buffer;
  readonly ocsp: Buffer[];
}

describe('renewal at a ceremony a year and a day on, picked up without a restart', () => {
  let dir: string;
  let clock: MovedClock;
  let eco: MovedEcosystem;
  let before_: Signed;
  let signedAt: number;
  let oldTsa: Buffer;
  let afterRenewal: Signed;
  let afterRenewalAt: number;
  /** pdfsig's trust store: our root alone */
  let nss: string | undefined;
  const data = () => join(dir, 'data');
  const file = (name: string, bytes: Uint8Array) => {
    const path = join(dir, name);
    writeFileSync(path, bytes);
    return path;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'qtsp-renewal-'));
    clock = new MovedClock(dir);
    // the service looks every second whether its OCSP responder certificate is due
    eco = await startClockEcosystem(clock, dir, { checkIntervalSeconds: 1 });
  });
  after(async () => {
    await eco?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** signDoc through the relying party's flow, run on the moved clock */
  const callSign = async (text: string, format: 'C' | 'X', level: string) => {
    const document = Buffer.from(text);
    const res = await clockRp(clock, { endpoints: eco.endpoints, signDocUrl: eco.signDocUrl, document, format, level });
    return { res: res as { status: number; body: unknown }, document };
  };
  const sign = async (text: string, format: 'C' | 'X' = 'C', level = 'AdES-B-LT'): Promise<Signed> => {
    const { res, document } = await callSign(text, format, level);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const body = res.body as { SignatureObject: string[]; revocationInfo?: { ocsp?: string[] } };
    return {
      signature: Buffer.from(body.SignatureObject[0]!, 'base64'),
      document,
      ocsp: (body.revocationInfo?.ocsp ?? []).map((o) => Buffer.from(o, 'base64')),
    };
  };
  /** openssl cms -verify -cades on the moved clock, at `attime` (Unix seconds) when given */
  const cmsVerify = (s: Signed, attime?: number) =>
    clock.run('openssl', [
      ...cmsVerifyArgs(file('sig.p7s', s.signature), file('doc', s.document), pkiPaths(data()).rootCert),
      ...(attime === undefined ? [] : ['-attime', String(attime)]),
    ]);
  const clientCert = (flag: string) =>
    clock.run(process.execPath, [
      QTSP,
      'pki',
      'client-cert',
      flag,
      '--data-dir',
      data(),
      '--sp-directory',
      eco.spDirectoryUrl,
    ]);
  /** the end of our TLS client certificate as the instance's calendar (and so its agent) holds it */
  const clientCertEnd = async (): Promise<number | undefined> => {
    const text = await (await fetch(`${eco.opsUrl}/metrics`)).text();
    const m = /^qtsp_pki_end_timestamp_seconds\{[^}]*object="tls-client"[^}]*\} (\S+)$/m.exec(text);
    return m ? Number(m[1]) : undefined;
  };
  const ceremony = (within: number, ...args: string[]) =>
    clock.run(
      process.execPath,
      [QTSP, 'pki', 'ceremony', '--renew', '--within', String(within), '--data-dir', data(), ...args],
      CEREMONY_ENV,
    );
  /** pkcs11-tool on the sandbox's SoftHSM2 token (keys.provider softhsm): its objects, one text block each */
  const tokenObjects = () => {
    const softhsm = join(data(), 'softhsm');
    const pin = readFileSync(join(softhsm, 'user.pin'), 'utf8').trim();
    const out = execFileSync(
      'pkcs11-tool',
      ['--module', SOFTHSM2_MODULE, '--token-label', 'qtsp-sandbox', '--login', '--pin', pin, '--list-objects'],
      { env: { ...process.env, SOFTHSM2_CONF: join(softhsm, 'softhsm2.conf') }, encoding: 'utf8' },
    );
    return out.split(/\n(?=\S)/);
  };
  /** the private key objects labelled `label` */
  const privateKeys = (objects: string[], label: string) =>
    objects.filter((o) => o.startsWith('Private Key Object') && new RegExp(`label:\\s+${label}\\n`).test(`${o}\n`));

  /**
   * The signature-time-stamp verifies (openssl ts) under the TSA certificate of the data directory, which the
   * signature carries, and an embedded OCSP answer of the root's responder says it is good (openssl ocsp).
   */
  const assertTimeStampedUnderTsa = async (signed: Signed) => {
    const p = pkiPaths(data());
    const tsa = fromPem(readFileSync(p.tsaCert, 'utf8'))[0]!;
    const parts = await cmsParts(signed.signature);
    assert.ok(
      parts.certificates.some((c) => c.equals(tsa)),
      'the renewed TSA certificate is not in the signature',
    );
    const token = parts.unsigned.find((a) => a.name === ATTR.signatureTimeStamp)!.values[0]!;
    const ts = await clock.run(
      'openssl',
      tsVerifyArgs(
        file('token.der', token),
        { dataFile: file('signature-value', parts.signatureValue) },
        p.rootCert,
        p.tsaCert,
      ),
    );
    assert.ok(ts.ok, ts.output);
    // the TSA's status, from the root's renewed delegated responder
    const embedded = await Promise.all(parts.crls.map(ocspOfRevocationChoice));
    let tsaGood = false;
    for (const response of embedded.filter((r): r is Buffer => r !== undefined)) {
      const r = await clock.run('openssl', [
        'ocsp',
        '-respin',
        file('resp.der', response),
        '-issuer',
        p.rootCert,
        '-cert',
        p.tsaCert,
        '-CAfile',
        p.rootCert,
        '-no_nonce',
      ]);
      tsaGood ||= r.ok && r.output.includes(`${p.tsaCert}: good`);
    }
    assert.ok(tsaGood, 'no embedded OCSP answer verifies the TSA certificate as good');
    return parts;
  };
  /** a PAdES B-LT PDF: pdfsig on the moved clock (valid, trusted, revocation online) and openssl cms */
  const assertPadesBlt = async () => {
    const signed = await clockRp(clock, {
      endpoints: eco.endpoints,
      signDocUrl: eco.signDocUrl,
      document: SAMPLE,
      format: 'P',
      level: 'AdES-B-LT',
    });
    const pdf = Buffer.from(signed.pdf!, 'base64');
    // pdfsig trusts only our root, and checks revocation online at the publication server (plain HTTP)
    nss ??= await nssTrustStore(join(dir, 'nss'), pkiPaths(data()).rootCert);
    const verdict = await clock.run('pdfsig', ['-nssdir', `sql:${nss}`, file('signed.pdf', pdf)]);
    assert.match(verdict.output, /Signature Validation: Signature is Valid\./);
    assert.match(verdict.output, /Certificate Validation: Certificate is Trusted\./);
    const embedded = readSignatures(pdf)[0]!;
    const ok = await cmsVerify({ signature: embedded.contents, document: embedded.covered, ocsp: [] });
    assert.ok(ok.ok, ok.output);
  };

  it('at the ceremony: a CAdES B-LT signature', async () => {
    before_ = await sign('signed at the ceremony');
    signedAt = Math.floor(Date.now() / 1000);
    oldTsa = fromPem(readFileSync(pkiPaths(data()).tsaCert, 'utf8'))[0]!;
    const ok = await cmsVerify(before_);
    assert.ok(ok.ok, ok.output);
  });

  it('a year and a day on: not ready; --dry-run plans the renewal, --renew renews, the instance picks it up', async () => {
    clock.set(366);
    await notReadyNaming(eco, 'root-crl');
    const crl = readFileSync(pkiPaths(data()).rootCrl);
    const plan = await ceremony(400, '--dry-run');
    assert.equal(plan.code, 0, plan.output);
    for (const object of ['tsa', 'ocsp-responder', 'root-ocsp-responder', 'root-crl'])
      assert.match(plan.output, new RegExp(`^  ${object}: `, 'm'));
    assert.ok(readFileSync(pkiPaths(data()).rootCrl).equals(crl), 'a dry run changed the root CRL');
    const renewed = await ceremony(400);
    assert.equal(renewed.code, 0, renewed.output);
    assert.match(renewed.output, /renewed tsa, ocsp-responder, root-ocsp-responder, root-crl;/);
    await readinessWhen(eco, (r) => r.status === 200, 'ready after the renewal');
    if (TEST_KEY_CUSTODY === 'softhsm') {
      assert.match(renewed.output, /destroyed the replaced keys of tsa, ocsp-responder, root-ocsp-responder/);
      // one key per name, fresh, made in the token and never extractable; no replaced or half-made one left
      const objects = tokenObjects();
      assert.ok(!objects.some((o) => /label:\s+\S+\.(retired|renewing)\n/.test(`${o}\n`)), objects.join('\n'));
      for (const label of KEY_LABELS) {
        const keys = privateKeys(objects, label);
        assert.equal(keys.length, 1, `${label}:\n${objects.join('\n')}`);
        assert.match(keys[0]!, /Access:\s+sensitive, always sensitive, never extractable/);
      }
    }
    const status = await clock.run(process.execPath, [QTSP, 'pki', 'status', '--data-dir', data()]);
    assert.equal(status.code, 0, status.output);
  });

  it('after the renewal: CAdES B-LT passes openssl on the moved clock, under the renewed TSA and responders', async () => {
    const after_ = await sign('signed a year and a day on');
    afterRenewal = after_;
    afterRenewalAt = Math.floor(Date.now() / 1000) + 366 * 86_400; // this process runs on the real clock
    const ok = await cmsVerify(after_);
    assert.ok(ok.ok, ok.output);
    const p = pkiPaths(data());
    const tsa = fromPem(readFileSync(p.tsaCert, 'utf8'))[0]!;
    assert.ok(!tsa.equals(oldTsa), 'the TSA certificate is not renewed');
    assert.ok(
      !new X509Certificate(tsa).publicKey.equals(new X509Certificate(oldTsa).publicKey),
      'the renewed TSA certificate certifies the old TSU key',
    );
    await assertTimeStampedUnderTsa(after_);
  });

  it('after the renewal: PAdES B-LT passes pdfsig on the moved clock (valid, trusted) and openssl cms', async () => {
    await assertPadesBlt();
  });

  it('the signature made before the renewal still verifies at its signing time', async () => {
    const ok = await cmsVerify(before_, signedAt);
    assert.ok(ok.ok, ok.output);
  });

  it('a year and a day on: our TLS client certificate rotated; the instance switches; signDoc works', async () => {
    const rotated = await clientCert('--rotate');
    assert.equal(rotated.code, 0, rotated.output);
    const installed = new X509Certificate(readFileSync(pkiPaths(data()).clientCert));
    const end = new Date(installed.validTo).getTime() / 1000;
    const deadline = Date.now() + 120_000;
    while ((await clientCertEnd()) !== end) {
      assert.ok(Date.now() < deadline, 'the instance never switched to the new client certificate');
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const retired = await clientCert('--retire');
    assert.equal(retired.code, 0, retired.output);
    await sign('signed with the rotated client certificate');
  });

  it('two years and a day on: signDoc refuses (503, not ready naming the root CRL) until a second ceremony', async () => {
    clock.set(731);
    await notReadyNaming(eco, 'root-crl');
    const { res } = await callSign('refused two years and a day on', 'C', 'AdES-B-LT');
    assert.equal(res.status, 503, JSON.stringify(res.body));
    assert.match(JSON.stringify(res.body), /root-crl/);
    // what is due now: the root CRL and the TSU key's usage period; --within 400 would renew everything again
    const renewed = await ceremony(30);
    assert.equal(renewed.code, 0, renewed.output);
    assert.match(renewed.output, /renewed tsa, root-crl;/);
    await readinessWhen(eco, (r) => r.status === 200, 'ready after the second renewal');
  });

  it('two years and a day on, renewed: CAdES B-LT and B-LTA pass openssl on the moved clock', async () => {
    const lt = await sign('signed two years and a day on');
    assert.ok((await cmsVerify(lt)).ok);
    await assertTimeStampedUnderTsa(lt);
    const lta = await sign('signed B-LTA two years and a day on', 'C', 'AdES-B-LTA');
    const ok = await cmsVerify(lta);
    assert.ok(ok.ok, ok.output);
    const parts = await assertTimeStampedUnderTsa(lta);
    const ats = parts.unsigned.find((a) => a.name === ATTR.archiveTimeStampV3)?.values[0];
    assert.ok(ats, 'no archive-time-stamp-v3');
    const docHash = sha('sha256', lta.document);
    const imprint = sha('sha256', await archiveImprint(parts, ats, docHash, SHA256));
    const p = pkiPaths(data());
    const verified = await clock.run(
      'openssl',
      tsVerifyArgs(file('ats.der', ats), { digestHex: imprint.toString('hex') }, p.rootCert, p.tsaCert),
    );
    assert.ok(verified.ok, verified.output);
  });

  it('two years and a day on, renewed: PAdES B-LT passes pdfsig, XAdES B-T xmlsec1, on the moved clock', async () => {
    await assertPadesBlt();
    const xades = await sign('signed XAdES two years and a day on', 'X', 'AdES-B-T');
    const p = pkiPaths(data());
    const verdict = await xmlsecVerify(
      xades.signature,
      xades.document,
      { trustedPem: p.rootCert, untrustedPem: p.issuingCert },
      (cmd, args) => clock.run(cmd, args),
    );
    assert.ok(verdict.ok, verdict.output);
  });

  it('two years and a day on: the signatures made before each renewal verify at their signing times', async () => {
    for (const [signed, at] of [
      [before_, signedAt],
      [afterRenewal, afterRenewalAt],
    ] as const) {
      const ok = await cmsVerify(signed, at);
      assert.ok(ok.ok, ok.output);
    }
  });

  it("three years on: the service has renewed the issuing CA's OCSP responder certificate; OCSP verifies", async () => {
    clock.set(1100);
    const p = pkiPaths(data());
    const ceremonyRenewed = new X509Certificate(readFileSync(p.ocspCert));
    const deadline = Date.now() + 120_000;
    for (;;) {
      const now = new X509Certificate(readFileSync(p.ocspCert));
      if (now.serialNumber !== ceremonyRenewed.serialNumber) {
        assert.ok(now.publicKey.equals(ceremonyRenewed.publicKey), 'the service certified the same responder key');
        assert.ok(
          new Date(now.validTo).getTime() > Date.now() + 1100 * DAY,
          `not valid on the moved clock: ${now.validTo}`,
        );
        break;
      }
      assert.ok(Date.now() < deadline, 'the service never renewed its OCSP responder certificate');
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    // a fresh answer for the signer certificate of the signature made a year and a day on
    const issuing = new X509Certificate(readFileSync(p.issuingCert));
    const signer = (await cmsParts(afterRenewal.signature)).certificates
      .map((der) => new X509Certificate(der))
      .find((c) => c.checkIssued(issuing))!;
    const answer = await clock.run('openssl', [
      'ocsp',
      '-issuer',
      p.issuingCert,
      '-cert',
      file('signer.pem', Buffer.from(signer.toString())),
      '-url',
      `${eco.publicationUrl}/ocsp`,
      '-CAfile',
      p.rootCert,
    ]);
    assert.ok(answer.ok, answer.output);
    assert.match(answer.output, /Response verify OK/);
    assert.match(answer.output, /signer\.pem: good/);
  });
});
