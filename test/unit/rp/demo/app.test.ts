/**
 * The demo RP's upload and sessions over real HTTP, without banks (the chooser is never reached): visits make no
 * session, so a flood of them pushes no other browser's signing out; the documents all sessions keep are bounded
 * (503 page when full); the chooser's error_description is shown isolated. The whole flow in a browser is in
 * test/integration/demo-rp.test.ts.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type DemoRpOptions, demoRpApp } from '../../../../src/rp/demo/app.ts';

const KB = 1024;
const CHOOSER = 'https://chooser.invalid/account-chooser/';

let server: Server;
let base: string;

before(async () => {
  const options: DemoRpOptions = {
    endpoints: {
      serviceConfigurationUrl: 'https://platform.invalid/service-configuration',
      issuer: 'https://bank.invalid',
      tlsCaFile: '/nonexistent',
      rp: { clientId: 'demo', certFile: '/nonexistent', keyFile: '/nonexistent', redirectUri: 'https://rp/callback' },
    },
    accountChooserUrl: CHOOSER,
    verifier: { rootCaFile: '/nonexistent', issuingCaFile: '/nonexistent' },
    maxUploadBytes: 100 * KB,
    maxSessions: 5,
    maxKeptBytes: 250 * KB,
  };
  server = createServer(demoRpApp(options));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** The form as a browser posts it; its answer, the cookie it set and the chooser state it redirects with. */
async function upload(size: number, cookie?: string) {
  const form = new FormData();
  form.set('format', 'C');
  form.set('level', 'AdES-B-B');
  form.set('document', new File([Buffer.alloc(size, 0x61)], 'a.txt', { type: 'text/plain' }));
  const res = await fetch(`${base}/sign`, {
    method: 'POST',
    body: form,
    redirect: 'manual',
    ...(cookie ? { headers: { cookie } } : {}),
  });
  const location = res.headers.get('location');
  return {
    res,
    body: await res.text(),
    cookie: res.headers.get('set-cookie')?.split(';')[0] ?? cookie,
    state: location ? new URL(location).searchParams.get('state') : null,
  };
}

describe('demo RP sessions', () => {
  it('a visit makes no session; a flood of visits leaves a started signing in place', async () => {
    const victim = await upload(10);
    assert.equal(victim.res.status, 303, victim.body);
    assert.ok(victim.cookie && victim.state);
    let cookies = 0;
    for (let i = 0; i < 50; i++) {
      const visit = await fetch(`${base}/`);
      assert.equal(visit.status, 200);
      if (visit.headers.get('set-cookie')) cookies++;
      await visit.text();
    }
    const back = await fetch(`${base}/bank-chosen?${new URLSearchParams({ state: victim.state, error: 'canceled' })}`, {
      headers: { cookie: victim.cookie },
    });
    assert.equal(back.status, 200, await back.clone().text());
    assert.match(await back.text(), /You cancelled/);
    assert.equal(cookies, 0, 'no session cookie for a visit');
  });

  it('the chooser error_description is shown isolated, its bidirectional controls visible', async () => {
    const started = await upload(10);
    const q = new URLSearchParams({
      state: started.state!,
      error: 'server_error',
      error_description: 'chooser \u202Etxt.exe\u202C said',
    });
    const res = await fetch(`${base}/bank-chosen?${q}`, { headers: { cookie: started.cookie! } });
    const page = await res.text();
    assert.equal(res.status, 400);
    assert.ok(page.includes('<bdi id="detail">chooser ⟨U+202E⟩txt.exe⟨U+202C⟩ said</bdi>'), page);
    assert.ok(!page.includes('\u202E'), 'no acting override in the page');
  });
});

describe('demo RP kept documents', () => {
  it('beyond the bound on kept bytes: a clear 503 page, nothing kept; room again once a session is used up', async () => {
    const kept = [await upload(100 * KB), await upload(100 * KB)];
    for (const k of kept) assert.equal(k.res.status, 303, k.body);
    const refused = await upload(100 * KB);
    assert.equal(refused.res.status, 503);
    assert.match(refused.body, /The demo is busy/);
    assert.equal(refused.res.headers.get('set-cookie'), null, 'no session for a refused upload');
    // a state used up (the person cancelled at the chooser) frees its document
    const q = new URLSearchParams({ state: kept[0]!.state!, error: 'canceled' });
    assert.equal((await fetch(`${base}/bank-chosen?${q}`, { headers: { cookie: kept[0]!.cookie! } })).status, 200);
    assert.equal((await upload(100 * KB)).res.status, 303);
  });
});
