/**
 * Revocation data for B-LT, through LocalRevocation with our OCSP responder and CRL issuer:
 * with `after` (a time-stamp's genTime) every OCSP producedAt/thisUpdate and CRL thisUpdate is strictly later,
 * also when the cache holds data from the same second; the embedded OCSP responses carry SHA-1 CertIDs and
 * pass `openssl ocsp` without -sha256. The issuing CA's status comes from the root's delegated responder (the root
 * key is offline; its CRL from the key ceremony is never fresher than a time-stamp). Our TSA's genTime and OCSP
 * producedAt carry milliseconds, so a response made just after a time-stamp is dated after it without waiting for
 * the next second. Times are read back by OpenSSL. The clock is the real one shifted so
 * that "now" sits late in a second: the wait for the next second is then short and always exercised.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CeremonyCrl, CrlIssuer } from '../../../src/revocation/crl.ts';
import { loadCaMaterial, loadTrustServiceMaterial, pkiPaths, type CaMaterial } from '../../../src/ca/material.ts';
import { ensureTrustServiceCertificates, pkiInit } from '../../../src/ca/init.ts';
import { loadKeyed } from '../../../src/ca/authority.ts';
import { generateKeyPair } from '../../../src/crypto/keys.ts';
import { OcspResponder } from '../../../src/revocation/ocsp.ts';
import { pkiUrls } from '../../../src/ca/publication.ts';
import { mintTestSignerCertificate } from '../../helpers/signer.ts';
import { LocalRevocation } from '../../../src/revocation/local.ts';
import { DomainError } from '../../../src/domain-error.ts';
import { toPem } from '../../../src/util/base64.ts';
import { assertIssuedAfter, crlThisUpdate, ocspTimes, tokenGenTime, verifyOcsp } from '../../helpers/pki-oracles.ts';
import { genTimeOf, LocalTsa } from '../../../src/timestamping/tsa.ts';
import { HASH_ALGORITHMS } from '../../../src/crypto/algorithms.ts';
import { run, scratch } from '../../helpers/openssl.ts';

let dir: string;
let ca: CaMaterial;
let signerDer: Buffer;
/** ms added to the real clock: set per test so that now is late in a second */
let shift = 0;
const clock = () => new Date(Date.now() + shift);

/** shifts the clock so that it reads `ms` milliseconds into the current second (no wall-clock assertion) */
function placeClockAt(ms: number): void {
  shift = 0;
  shift = ms - (Date.now() % 1000);
}

const storeDown = async (): Promise<never> => {
  throw new Error('Connection terminated unexpectedly');
};

/** `failingStore`: the certificate store answers every read with an error (a database gone) */
function provider(failingStore = false): LocalRevocation {
  const material = loadTrustServiceMaterial(dir);
  const p = pkiPaths(dir);
  const status = { certificateStatus: failingStore ? storeDown : async () => ({ status: 'good' as const }) };
  const responders = [
    new OcspResponder({ responder: material.ocspResponder, ca: ca.issuing, status, validitySeconds: 3600, clock }),
    new OcspResponder({
      responder: loadKeyed(p.rootOcspCert, p.rootOcspKey),
      ca: ca.root,
      status,
      validitySeconds: 3600,
      clock,
    }),
  ];
  const crlOptions = {
    revoked: { revokedCertificates: failingStore ? storeDown : async () => [] },
    validitySeconds: 86400,
    refreshSeconds: 300,
    clock,
  };
  const crls = [
    new CeremonyCrl(ca.root.der, readFileSync(p.rootCrl)),
    new CrlIssuer({ ca: ca.issuing, ...crlOptions }),
  ];
  return new LocalRevocation(responders, status, crls, clock);
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'qtsp-freshness-'));
  pkiInit({ dataDir: dir, qtspId: 'sp:test.example:00000000-0000-4000-8000-000000000000' });
  ensureTrustServiceCertificates(dir, pkiUrls('http://127.0.0.1:1'));
  ca = loadCaMaterial(dir);
  const keys = generateKeyPair('P-256');
  signerDer = (await mintTestSignerCertificate(ca.issuing, keys.publicKey, 'freshness')).der;
});
after(() => rmSync(dir, { recursive: true, force: true }));

describe('LocalRevocation: data issued after the time-stamp', () => {
  test('OCSP for the signer: producedAt and thisUpdate after genTime, SHA-1 CertID accepted by openssl ocsp without -sha256', async () => {
    const revocation = provider();
    placeClockAt(900);
    const genTime = new Date(Math.floor(clock().getTime() / 1000) * 1000); // a whole-second genTime, as our TSA writes
    const response = (await revocation.ocspResponse(signerDer, ca.issuing.der, genTime))!;
    assert.equal(await assertIssuedAfter({ ocsp: [response], crl: [] }, genTime, 'signer OCSP'), 1);
    const s = scratch();
    try {
      const p = pkiPaths(dir);
      const checked = await verifyOcsp(response, {
        root: p.rootCert,
        issuing: p.issuingCert,
        cert: s.file('signer.pem', toPem(signerDer, 'CERTIFICATE')),
      });
      assert.ok(checked.ok && /: good/.test(checked.output), checked.output);
      const text = await run('openssl', ['ocsp', '-respin', s.file('r.der', response), '-resp_text', '-noverify']);
      assert.match(text.output, /Hash Algorithm: sha1/);
    } finally {
      s.remove();
    }
  });

  test("our TSA's genTime and the OCSP producedAt after it carry milliseconds; producedAt > genTime, same second", async () => {
    const revocation = provider();
    const tsa = new LocalTsa(
      loadTrustServiceMaterial(dir).tsa,
      ca.root.der,
      {
        policyOid: '1.3.6.1.4.1.99999.1',
        accuracySeconds: 1,
      },
      clock,
    );
    const sha256 = HASH_ALGORITHMS.get('2.16.840.1.101.3.4.2.1')!;
    for (let round = 0; round < 3; round++) {
      placeClockAt(100); // 900 ms before the next whole second: a whole-second wait would show
      const token = await tsa.timestamp(Buffer.alloc(32, round), sha256);
      const genTime = await tokenGenTime(token); // read by OpenSSL
      assert.equal(genTime.getTime(), genTimeOf(token).getTime());
      assert.notEqual(genTime.getUTCMilliseconds(), 0, `genTime ${genTime.toISOString()} has a fraction`);
      const response = (await revocation.ocspResponse(signerDer, ca.issuing.der, genTime))!;
      const { producedAt, thisUpdates } = await ocspTimes(response);
      assert.ok(producedAt > genTime, `producedAt ${producedAt.toISOString()} > genTime ${genTime.toISOString()}`);
      assert.ok(thisUpdates.every((t) => t > genTime));
      // made without waiting for the next whole second (a generous bound: the machine may be busy)
      const nextSecond = Math.floor(genTime.getTime() / 1000) * 1000 + 1000;
      if (producedAt.getTime() < nextSecond) {
        assert.notEqual(producedAt.getUTCMilliseconds(), 0);
        return;
      }
    }
    assert.fail('three times in a row the OCSP response was dated in the second after its time-stamp: a wait');
  });

  test('a cached response from the same second as genTime is not reused; one from after it is', async () => {
    const revocation = provider();
    placeClockAt(850);
    const early = (await revocation.ocspResponse(signerDer, ca.issuing.der))!; // no freshness asked: made now
    const earlyAt = (await ocspTimes(early)).producedAt;
    const genTime = new Date(earlyAt.getTime()); // a time-stamp in the same second: a tie
    const fresh = (await revocation.ocspResponse(signerDer, ca.issuing.der, genTime))!;
    assert.ok(!fresh.equals(early), 'the tie is not reused');
    assert.ok((await ocspTimes(fresh)).producedAt > genTime);
    const again = (await revocation.ocspResponse(signerDer, ca.issuing.der, genTime))!;
    assert.ok(again.equals(fresh), 'a response issued after genTime serves the other signatures of the request');
  });

  test('concurrent signatures of one request share one response', async () => {
    const revocation = provider();
    placeClockAt(800);
    const genTime = new Date(Math.floor(clock().getTime() / 1000) * 1000);
    const all = await Promise.all([1, 2, 3, 4].map(() => revocation.ocspResponse(signerDer, ca.issuing.der, genTime)));
    assert.equal(new Set(all.map((r) => r!.toString('base64'))).size, 1);
  });

  test("the issuing CA: the root's delegated responder, producedAt after genTime, verified by openssl ocsp", async () => {
    const revocation = provider();
    placeClockAt(900);
    const genTime = new Date(Math.floor(clock().getTime() / 1000) * 1000);
    const response = (await revocation.ocspResponse(ca.issuing.der, ca.root.der, genTime))!;
    assert.equal(await assertIssuedAfter({ ocsp: [response], crl: [] }, genTime, 'issuing CA OCSP'), 1);
    const p = pkiPaths(dir);
    const checked = await verifyOcsp(response, { root: p.rootCert, issuing: p.rootCert, cert: p.issuingCert });
    assert.ok(checked.ok && /Response verify OK/.test(checked.output) && /: good/.test(checked.output), checked.output);
    const text = await run('openssl', [
      'ocsp',
      '-respin',
      scratch().file('r.der', response),
      '-resp_text',
      '-noverify',
    ]);
    assert.match(text.output, /Root OCSP Responder/);
  });

  test('the issuing CA CRL: thisUpdate after genTime, also after a CRL of the same second', async () => {
    const revocation = provider();
    placeClockAt(850);
    const first = (await revocation.crl(ca.issuing.der))!;
    const genTime = await crlThisUpdate(first); // a time-stamp in the same second as the cached CRL
    const fresh = (await revocation.crl(ca.issuing.der, genTime))!;
    assert.ok(!fresh.equals(first));
    assert.equal(await assertIssuedAfter({ ocsp: [], crl: [fresh] }, genTime, 'issuing CA CRL'), 1);
    const verified = await run('openssl', [
      'crl',
      '-inform',
      'DER',
      '-in',
      scratch().file('c.der', fresh),
      '-CAfile',
      scratch().file(
        'ca.pem',
        readFileSync(pkiPaths(dir).issuingCert, 'utf8') + readFileSync(pkiPaths(dir).rootCert, 'utf8'),
      ),
      '-noout',
    ]);
    assert.match(verified.output, /verify OK/);
  });

  test('the root CRL of the key ceremony: served as signed, a year valid; never offered as fresher than a time-stamp', async () => {
    const revocation = provider();
    const crl = (await revocation.crl(ca.root.der))!;
    assert.ok(crl.equals(readFileSync(pkiPaths(dir).rootCrl)));
    const text = await run('openssl', [
      'crl',
      '-inform',
      'DER',
      '-in',
      scratch().file('root.der', crl),
      '-noout',
      '-nextupdate',
      '-lastupdate',
    ]);
    const next = new Date(/nextUpdate=(.*)/.exec(text.output)![1]!);
    const last = new Date(/lastUpdate=(.*)/.exec(text.output)![1]!);
    assert.ok(next.getTime() - last.getTime() >= 364 * 24 * 3600_000, text.output);
    await assert.rejects(
      revocation.crl(ca.root.der, new Date()),
      (err: unknown) => err instanceof DomainError && err.kind === 'revocation_unavailable',
    );
  });

  test('a time-stamp dated seconds ahead of our clock: refused (timestamp_ahead), nothing issued', async () => {
    const revocation = provider();
    placeClockAt(100);
    const ahead = new Date(clock().getTime() + 5000);
    await assert.rejects(
      revocation.ocspResponse(signerDer, ca.issuing.der, ahead),
      (err: unknown) => err instanceof DomainError && err.kind === 'timestamp_ahead',
    );
    await assert.rejects(
      revocation.ocspResponse(ca.issuing.der, ca.root.der, ahead),
      (err: unknown) => err instanceof DomainError && err.kind === 'timestamp_ahead',
    );
    await assert.rejects(
      revocation.crl(ca.issuing.der, ahead),
      (err: unknown) => err instanceof DomainError && err.kind === 'timestamp_ahead',
    );
  });

  test('our certificate store failing: certificate_store_unavailable, not an upstream failure', async () => {
    const revocation = provider(true);
    const unavailable = (err: unknown) => err instanceof DomainError && err.kind === 'certificate_store_unavailable';
    await assert.rejects(revocation.ocspResponse(signerDer, ca.issuing.der, new Date()), unavailable);
    await assert.rejects(revocation.crl(ca.issuing.der, new Date()), unavailable);
  });

  test('the root is among the authorities (issuer of the issuing CA, which a B-B signature does not carry)', async () => {
    assert.ok(provider().authorities.some((c) => c.equals(ca.root.der)));
  });
});
