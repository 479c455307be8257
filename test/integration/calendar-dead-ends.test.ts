/**
 * No dead end in the calendar, on a moved clock (libfaketime): one ecosystem started at the key ceremony.
 * Thirteen months on, with the root CRL renewed alone (`ceremony --renew-crl`), the TSU key's usage period has
 * ended (EN 319 421 7.6): readiness is not ready and signDoc answers 503 naming it, `qtsp pki status` shows it
 * EXPIRED and exits 1, and our TSA answers a TimeStampReq with a rejection (openssl reads it); `ceremony --renew`
 * renews the TSU key, and a CAdES B-LT signature passes openssl (its time-stamp under the renewed TSA). Twenty-five
 * months on, our TLS client certificate has expired: readiness and the 503 name the registration with the
 * platform's credential, not the rotation the directory now refuses; the documented commands (`ceremony
 * --renew`, `pki client-cert --register`, which finds the platform through the data directory) bring B-LT
 * signing back, verified by openssl on the moved clock.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pkiPaths } from '../../src/ca/material.ts';
import { fromPem } from '../../src/util/base64.ts';
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
import { ATTR, cmsParts } from '../helpers/pki-oracles.ts';

const QTSP = fileURLToPath(new URL('../../bin/qtsp.js', import.meta.url));
/** the ceremony runs with the instance's key custody and reload check */
const CEREMONY_ENV = { QTSP_KEYS_PROVIDER: TEST_KEY_CUSTODY, QTSP_CALENDAR_RELOAD_CHECK_SECONDS: '1' };

describe('the calendar without dead ends: the TSU key usage period, an expired TLS client certificate', () => {
  let dir: string;
  let clock: MovedClock;
  let eco: MovedEcosystem;
  let firstTsa: Buffer;
  const data = () => join(dir, 'data');
  const file = (name: string, bytes: Uint8Array) => {
    const path = join(dir, name);
    writeFileSync(path, bytes);
    return path;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'qtsp-dead-ends-'));
    clock = new MovedClock(dir);
    // the service checks every second what it renews itself (its OCSP responder, the mail certificate)
    eco = await startClockEcosystem(clock, dir, { checkIntervalSeconds: 1 });
    firstTsa = fromPem(readFileSync(pkiPaths(data()).tsaCert, 'utf8'))[0]!;
  });
  after(async () => {
    await eco?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const qtsp = (args: string[], env: Record<string, string> = {}) =>
    clock.run(process.execPath, [QTSP, ...args, '--data-dir', data()], env);
  const callSign = async (text: string, level: string) => {
    const document = Buffer.from(text);
    const res = await clockRp(clock, {
      endpoints: eco.endpoints,
      signDocUrl: eco.signDocUrl,
      document,
      format: 'C',
      level,
    });
    return { res: res as { status: number; body: unknown }, document };
  };
  /** a CAdES B-LT signature that openssl verifies on the moved clock, its time-stamp under the current TSA */
  const signsBlt = async (text: string) => {
    const { res, document } = await callSign(text, 'AdES-B-LT');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const signature = Buffer.from((res.body as { SignatureObject: string[] }).SignatureObject[0]!, 'base64');
    const p = pkiPaths(data());
    const cms = await clock.run(
      'openssl',
      cmsVerifyArgs(file('sig.p7s', signature), file('doc', document), p.rootCert),
    );
    assert.ok(cms.ok, cms.output);
    const parts = await cmsParts(signature);
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
  };
  /** signDoc refused: 503 temporarily_unavailable, no signature, the description matching `named` */
  const refused = async (named: RegExp) => {
    const { res } = await callSign('refused', 'AdES-B-T');
    assert.equal(res.status, 503, JSON.stringify(res.body));
    const body = res.body as { error: string; error_description: string; SignatureObject?: unknown };
    assert.equal(body.error, 'temporarily_unavailable');
    assert.match(body.error_description, named);
    assert.equal(body.SignatureObject, undefined);
  };
  /** our TSA's answer (POST /tsa) to a TimeStampReq openssl made, as `openssl ts -reply -text` reads it */
  const tsaReply = async () => {
    const query = join(dir, 'query.tsq');
    const made = await clock.run('openssl', [
      'ts',
      '-query',
      '-data',
      file('d', Buffer.from('x')),
      '-sha256',
      '-out',
      query,
    ]);
    assert.ok(made.ok, made.output);
    const res = await fetch(`${eco.publicationUrl}/tsa`, {
      method: 'POST',
      headers: { 'content-type': 'application/timestamp-query' },
      body: readFileSync(query),
    });
    const reply = file('reply.tsr', Buffer.from(await res.arrayBuffer()));
    return (await clock.run('openssl', ['ts', '-reply', '-in', reply, '-text'])).output;
  };

  it('thirteen months on, the root CRL renewed alone: the old TSU key signs nothing', async () => {
    clock.set(395);
    await notReadyNaming(eco, 'root-crl');
    const crl = await qtsp(['pki', 'ceremony', '--renew-crl'], CEREMONY_ENV);
    assert.equal(crl.code, 0, crl.output);
    const r = await readinessWhen(
      eco,
      (x) => !x.reasons.some((reason) => reason.startsWith('expired: root-crl ')),
      'past the renewed root CRL',
    );
    assert.equal(r.status, 503, JSON.stringify(r));
    assert.match(r.reasons.join('\n'), /^expired: tsa .* key usage period \S+; renew: qtsp pki ceremony --renew/m);
    await refused(/tsa \(.*\) key usage period ended/);
    const status = await qtsp(['pki', 'status']);
    assert.notEqual(status.code, 0, status.output);
    assert.match(status.output, /^tsa +notAfter \S+ \S+ +\d+ days +key usage until \S+ \S+ \(EXPIRED\)/m);
    assert.match(status.output, /^not signing: tsa ended$/m);
    const reply = await tsaReply();
    assert.match(reply, /Status: Rejected\./);
    assert.match(reply, /usage period ended/);
  });

  it('thirteen months on: ceremony --renew renews the TSU key; B-LT passes openssl under the renewed TSA', async () => {
    const renewed = await qtsp(['pki', 'ceremony', '--renew'], CEREMONY_ENV);
    assert.equal(renewed.code, 0, renewed.output);
    assert.match(renewed.output, /^ {2}tsa: key usage period ended /m);
    assert.match(renewed.output, /renewed tsa;/);
    await readinessWhen(eco, (x) => x.status === 200, 'ready after the TSU renewal');
    const tsa = fromPem(readFileSync(pkiPaths(data()).tsaCert, 'utf8'))[0]!;
    assert.ok(
      !new X509Certificate(tsa).publicKey.equals(new X509Certificate(firstTsa).publicKey),
      'the renewed TSA certificate certifies the old TSU key',
    );
    await signsBlt('signed thirteen months on');
    const status = await qtsp(['pki', 'status']);
    assert.equal(status.code, 0, status.output);
    assert.match(await tsaReply(), /Status: Granted\./);
  });

  it('twenty-five months on: the expired client certificate is named with the way back, not --rotate', async () => {
    clock.set(760);
    const r = await notReadyNaming(eco, 'tls-client');
    const reason = r.reasons.find((x) => x.startsWith('expired: tls-client '))!;
    assert.match(reason, /renew: qtsp pki client-cert --register/);
    assert.doesNotMatch(reason, /renew: qtsp pki client-cert --rotate/);
    await refused(/tls-client/);
    const status = await qtsp(['pki', 'status']);
    assert.notEqual(status.code, 0, status.output);
    assert.match(
      status.output,
      /^tls-client +notAfter \S+ \S+ +EXPIRED.*\n.*\n {4}renew: qtsp pki client-cert --register/m,
    );
    // the rotation authenticates with the expired certificate: the directory refuses it
    const rotate = await qtsp(['pki', 'client-cert', '--rotate']);
    assert.equal(rotate.code, 1, rotate.output);
    assert.match(rotate.output, /not valid now/);
  });

  it('twenty-five months on: ceremony --renew and client-cert --register bring B-LT signing back', async () => {
    const renewed = await qtsp(['pki', 'ceremony', '--renew'], CEREMONY_ENV);
    assert.equal(renewed.code, 0, renewed.output);
    const registered = await qtsp(['pki', 'client-cert', '--register']);
    assert.equal(registered.code, 0, registered.output);
    await readinessWhen(eco, (x) => x.status === 200, 'ready after the renewal and the registration');
    await signsBlt('signed twenty-five months on');
    const status = await qtsp(['pki', 'status']);
    assert.equal(status.code, 0, status.output);
  });
});
