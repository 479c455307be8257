/**
 * The IDP directory client (spec 4.6, 5.7 step 1) against the sandbox platform over real HTTPS, with the
 * clock injected so that TTL and maximum age are exact: list pull, single lookups, inactive and unknown
 * issuers, and a failing directory (cut connections, HTTP 500) served from the last good answer until its
 * maximum age, then failing closed.
 */
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { tlsAgent, type HttpAgent } from '../../../src/util/http-client.ts';
import type { Sandbox } from '../../../src/sandbox/index.ts';
import { IdpDirectory, IdpDirectoryUnavailable } from '../../../src/trust/idp-directory.ts';
import { startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';

const QTSP_ID = 'sp:sandbox.qtsp.localhost:6f1c4c52-0b0e-4c4e-9d6b-2b9b8f0d7a31';
const UNKNOWN = 'https://unknown-bank.localhost';
const TTL = 60_000;
const MAX_STALE = 600_000;

let started: TestSandbox;
let sandbox: Sandbox;
let agent: HttpAgent;
let clock = 1_000_000;

function directory(): IdpDirectory {
  return new IdpDirectory({
    url: sandbox.idpDirectoryUrl,
    agent,
    ttlMs: TTL,
    maxStaleMs: MAX_STALE,
    timeoutMs: 3000,
    now: () => clock,
  });
}

before(async () => {
  started = await startTestSandbox('qtsp-idps-', QTSP_ID);
  ({ sandbox } = started);
  agent = tlsAgent({ ca: fs.readFileSync(sandbox.tlsCaFile) });
});

after(async () => {
  agent?.destroy();
  await started?.close();
});

afterEach(async () => {
  await sandbox.controls.reset();
});

describe('IDP directory: answers', () => {
  it('the list pull fills the cache: no request until the TTL ends', async () => {
    const idps = directory();
    assert.equal(await idps.refreshList(), 2, 'both sandbox banks');
    sandbox.controls.idpDirectory.mode = 'reset'; // any request now fails
    assert.equal(await idps.status(sandbox.issuer), 'active');
    assert.equal((await idps.record(sandbox.issuer))?.notification_email, 'notify@bank.sandbox.localhost');
  });

  it('single lookups: active, then inactive once the TTL ends; unknown issuers are unknown', async () => {
    const idps = directory();
    assert.equal(await idps.status(sandbox.issuer), 'active');
    sandbox.controls.setIdpStatus('inactive');
    assert.equal(await idps.status(sandbox.issuer), 'active', 'cached within the TTL');
    clock += TTL;
    assert.equal(await idps.status(sandbox.issuer), 'inactive');
    assert.equal(await idps.status(UNKNOWN), 'unknown');
  });

  it('an issuer missing from a good list becomes unknown', async () => {
    const idps = directory();
    assert.equal(await idps.status(UNKNOWN), 'unknown'); // cached by a single lookup (404)
    assert.equal(await idps.status(sandbox.issuer), 'active');
    await idps.refreshList();
    assert.equal(await idps.status(UNKNOWN), 'unknown');
    assert.equal(await idps.status(sandbox.issuer), 'active');
  });
});

describe('IDP directory: failing', () => {
  it('never answered: not ready, and the reason says so; ready after its first answer', async () => {
    const idps = directory();
    assert.equal(idps.readiness().ready, false, 'nothing asked yet');
    sandbox.controls.idpDirectory.mode = 'reset';
    await assert.rejects(idps.refreshList());
    const r = idps.readiness();
    assert.equal(r.ready, false);
    assert.match(r.reasons.join(), /IDP directory has never answered/);
    sandbox.controls.idpDirectory.mode = 'normal';
    await idps.refreshList();
    assert.deepEqual(idps.readiness(), { ready: true, reasons: [] });
    assert.equal(idps.listAgeSeconds(), 0);
    assert.ok(idps.activeIssuers().includes(sandbox.issuer));
  });

  for (const mode of ['reset', 'http500'] as const) {
    it(`${mode}: the last good answer serves until the maximum age, then the issuer fails closed`, async () => {
      const idps = directory();
      assert.equal(await idps.status(sandbox.issuer), 'active');
      sandbox.controls.idpDirectory.mode = mode;
      clock += TTL; // the answer is due for a refresh, which fails
      assert.equal(await idps.status(sandbox.issuer), 'active');
      assert.match(idps.readiness().reasons.join(), /IDP directory failing/);
      assert.equal(idps.readiness().ready, true);
      await assert.rejects(idps.refreshList(), 'a failing list pull rejects');
      assert.equal(await idps.status(sandbox.issuer), 'active', 'and leaves the cache alone');
      clock += MAX_STALE - TTL - 1;
      assert.equal(await idps.status(sandbox.issuer), 'active', 'one millisecond before the maximum age');
      clock += 1;
      assert.equal(idps.readiness().ready, false, 'not ready once cached answers no longer serve');
      assert.match(idps.readiness().reasons.join(), /beyond trust\.idpMaxStaleSeconds/);
      await assert.rejects(idps.status(sandbox.issuer), (err: Error) => {
        assert.ok(err instanceof IdpDirectoryUnavailable);
        assert.ok(err.message.includes(sandbox.issuer), err.message);
        assert.match(err.message, /600 s old, beyond the maximum of 600 s \(trust\.idpMaxStaleSeconds\)/);
        return true;
      });
      await assert.rejects(idps.status(UNKNOWN), /has never answered about issuer/);
      sandbox.controls.idpDirectory.mode = 'normal';
      assert.equal(await idps.status(sandbox.issuer), 'active', 'answers again once the directory is back');
      assert.deepEqual(idps.readiness(), { ready: true, reasons: [] });
    });
  }
});
