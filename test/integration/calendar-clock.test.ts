/**
 * The service on a moved clock (libfaketime), without renewals: one ecosystem started at the key ceremony, then
 * moved a year and a day on (the root CRL has ended) and two years and a day on (the delegated OCSP responders
 * have ended). Each time: readiness is not ready naming the object and what renews it, signDoc answers 503
 * naming it and returns no signature, and `qtsp pki status` on the same clock shows it expired.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { authorizeSigning, callSignDoc, signDocRequest } from '../../src/rp/flow.ts';
import {
  MovedClock,
  notReadyNaming,
  readiness,
  startClockEcosystem,
  type MovedEcosystem,
} from '../helpers/moved-clock.ts';
import { SHA256_OID } from '../helpers/environment.ts';

const QTSP = fileURLToPath(new URL('../../bin/qtsp.js', import.meta.url));
const OBJECTS = [
  'root-ca',
  'issuing-ca',
  'tsa',
  'ocsp-responder',
  'root-ocsp-responder',
  'root-crl',
  'tls-client',
  'tls-server',
];

describe('the long-lived material on a moved clock, without renewals', () => {
  let dir: string;
  let clock: MovedClock;
  let eco: MovedEcosystem;
  let sad: string;
  const hash = createHash('sha256').update('a contract signed years on').digest('base64');

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'qtsp-clock-'));
    clock = new MovedClock(dir);
    // without renewals: the service does not renew its OCSP responder certificate either
    eco = await startClockEcosystem(clock, dir, { responderRenewDays: 0 });
  });
  after(async () => {
    await eco?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const ready = () => readiness(eco);
  const status = (...args: string[]) =>
    clock.run(process.execPath, [QTSP, 'pki', 'status', '--data-dir', join(dir, 'data'), ...args]);
  const signDoc = () =>
    callSignDoc(
      eco.signDocUrl,
      eco.endpoints,
      signDocRequest(
        { accessToken: sad },
        { hashes: [hash], hashAlgorithmOID: SHA256_OID, format: 'C', level: 'AdES-B-LT' },
      ),
    );

  it('at the ceremony: ready; status and metrics list every object with its end', async () => {
    const r = await ready();
    assert.equal(r.status, 200, JSON.stringify(r));
    const s = await status();
    assert.equal(s.code, 0, s.output);
    for (const object of OBJECTS) assert.match(s.output, new RegExp(`^${object} +\\S+ \\S+ \\S+ +\\d+ days`, 'm'));
    const metrics = await (await fetch(`${eco.opsUrl}/metrics`)).text();
    for (const object of OBJECTS)
      assert.match(metrics, new RegExp(`qtsp_pki_end_timestamp_seconds\\{object="${object}",[^}]*\\} \\d+`));
    const auth = await authorizeSigning(eco.endpoints, {
      documentDigests: [{ hash, label: 'contract' }],
      hashAlgorithmOID: SHA256_OID,
    });
    sad = auth.accessToken;
  });

  it('a year and a day on: the root CRL has ended; not ready and signDoc 503, both naming it', async () => {
    clock.set(366);
    const r = await notReadyNaming(eco, 'root-crl');
    assert.equal(r.status, 503);
    assert.match(r.reasons.join('\n'), /expired: root-crl .*nextUpdate .*renew: qtsp pki ceremony/);
    const res = await signDoc();
    assert.equal(res.status, 503, JSON.stringify(res.body));
    const body = res.body as { error: string; error_description: string; SignatureObject?: unknown };
    assert.equal(body.error, 'temporarily_unavailable');
    assert.match(body.error_description, /root-crl/);
    assert.equal(body.SignatureObject, undefined);
    const s = await status();
    assert.equal(s.code, 1, s.output);
    assert.match(s.output, /^root-crl +nextUpdate \S+ \S+ +EXPIRED/m);
    assert.match(s.output, /^ocsp-responder +notAfter \S+ \S+ +\d+ days/m);
  });

  it('two years and a day on: the OCSP responders have ended too; not ready and signDoc 503 naming them', async () => {
    clock.set(731);
    const r = await notReadyNaming(eco, 'ocsp-responder');
    assert.equal(r.status, 503);
    const reasons = r.reasons.join('\n');
    assert.match(reasons, /expired: root-ocsp-responder .*notAfter/);
    assert.match(reasons, /expired: root-crl /);
    const res = await signDoc();
    assert.equal(res.status, 503, JSON.stringify(res.body));
    const description = (res.body as { error_description: string }).error_description;
    assert.match(description, /ocsp-responder .*root-ocsp-responder/);
    const s = await status('--json');
    assert.equal(s.code, 1, s.output);
    // the sandbox reissues the server certificate it gave the QTSP within seconds on its own clock check, so
    // tls-server is ended or already renewed, depending on when that check ran
    const ended = (JSON.parse(s.output) as { object: string; endsAt: string; signing: boolean }[])
      .filter((e) => e.signing && new Date(e.endsAt).getTime() < Date.now() + 731 * 24 * 3600_000)
      .map((e) => e.object)
      .filter((o) => o !== 'tls-server');
    assert.deepEqual(ended, ['ocsp-responder', 'root-ocsp-responder', 'root-crl', 'tls-client']);
  });
});
