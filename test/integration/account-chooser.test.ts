/**
 * The platform's account chooser (spec 2.1, 4.1, 6.1, 7.5) over real HTTPS: the client_id rules (an HTML error
 * page, no redirect), prompt and preselect_bic, the selection cookie, an inactive stored bank, cancel, the
 * cookie reset; then in a real browser: the list of both banks, picking bank 2, the cookie's at-once redirect,
 * the reset and cancel. Screenshots of each page go to screenshotDir().
 */
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { parseClientOption, type Sandbox } from '../../src/sandbox/index.ts';
import { httpRequest, type HttpAgent, type HttpResponse, tlsAgent } from '../../src/util/http-client.ts';
import { launchBrowser, sandboxContext, screenshotDir } from '../helpers/browser.ts';
import { startTestSandbox, type TestSandbox } from '../helpers/sandbox.ts';

const QTSP_ID = 'sp:sandbox.qtsp.localhost:6f1c4c52-0b0e-4c4e-9d6b-2b9b8f0d7a31';
const BANK1 = 'SNDBDEFFXXX';
const BANK2 = 'SNDCDEFFXXX';
const CHOSEN = 'https://rp.example/bank-chosen?from=chooser';
const FILE_CHOSEN = 'https://file-rp.example/bank-chosen';

let testSandbox: TestSandbox;
let dataDir: string;
let sandbox: Sandbox;
let agent: HttpAgent;

before(async () => {
  // an RP registered from a file entry: its chooser redirect URI comes from account_chooser_redirect_uris
  const fromFile = parseClientOption(
    JSON.stringify({
      client_id: 'file-rp',
      redirect_uris: ['https://file-rp.example/callback'],
      account_chooser_redirect_uris: [FILE_CHOSEN],
      'x5t#S256': 'A'.repeat(43),
    }),
  );
  testSandbox = await startTestSandbox('qtsp-chooser-', QTSP_ID, { clients: [fromFile] });
  ({ dataDir, sandbox } = testSandbox);
  agent = tlsAgent({ ca: readFileSync(sandbox.tlsCaFile) });
  await sandbox.registerClient({ clientId: 'chooser-rp', state: 'active', accountChooserRedirectUris: [CHOSEN] });
  await sandbox.registerClient({ clientId: 'demo-rp', state: 'demo', accountChooserRedirectUris: [CHOSEN] });
  await sandbox.registerClient({ clientId: 'gone-rp', state: 'inactive', accountChooserRedirectUris: [CHOSEN] });
  await sandbox.registerClient({ clientId: 'plain-rp', state: 'active' });
});

after(async () => {
  agent?.destroy();
  await testSandbox?.close();
});

afterEach(async () => {
  await sandbox.controls.reset();
});

// ---- plain HTTPS ----

function chooser(query: Record<string, string> | string, cookie?: string): Promise<HttpResponse> {
  const q = typeof query === 'string' ? query : new URLSearchParams(query).toString();
  return httpRequest(`${sandbox.accountChooserUrl}?${q}`, {
    agent,
    timeoutMs: 10_000,
    headers: cookie ? { cookie } : {},
  });
}

function setCookies(res: HttpResponse): string[] {
  const value = res.headers['set-cookie'];
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

/** The selection cookie a response sets, as a Cookie header value. */
function selectionCookie(res: HttpResponse): string {
  const set = setCookies(res).find((c) => c.startsWith('account_chooser_bic='));
  assert.ok(set, `no selection cookie in ${JSON.stringify(res.headers)}`);
  return set.split(';')[0]!;
}

/** The redirect's target without its query, and its query. */
function redirected(res: HttpResponse, target = CHOSEN): URLSearchParams {
  assert.equal(res.status, 302, res.body.toString());
  const location = new URL(String(res.headers.location));
  const expected = new URL(target);
  assert.equal(`${location.origin}${location.pathname}`, `${expected.origin}${expected.pathname}`);
  for (const [name, value] of expected.searchParams) assert.equal(location.searchParams.get(name), value);
  assert.equal(res.headers['cache-control'], 'no-store');
  return location.searchParams;
}

function assertRedirectError(res: HttpResponse, error: string, state?: string): URLSearchParams {
  const params = redirected(res);
  assert.equal(params.get('error'), error);
  assert.equal(params.get('issuer_url'), null);
  assert.equal(params.get('state'), state ?? null);
  if (error === 'invalid_request') assert.match(String(params.get('error_description')), /\w+/);
  return params;
}

function assertErrorPage(res: HttpResponse, text: RegExp): void {
  assert.equal(res.status, 400, res.body.toString());
  assert.equal(res.headers.location, undefined, 'an invalid client_id must not redirect');
  assert.match(String(res.headers['content-type']), /^text\/html/);
  assert.match(String(res.headers['content-security-policy']), /default-src 'none'/);
  assert.match(res.body.toString(), text);
}

function bankIssuer(bic: string): string {
  return sandbox.banks.find((b) => b.bic === bic)!.issuer;
}

describe('account chooser: client_id (spec 2.1)', () => {
  it('missing, repeated, unknown, inactive or without a chooser redirect URI: an HTML error page, no redirect', async () => {
    assertErrorPage(await chooser({}), /names no client_id/);
    assertErrorPage(await chooser('client_id=chooser-rp&client_id=demo-rp'), /more than once/);
    assertErrorPage(await chooser({ client_id: 'nobody' }), /No relying party with client_id &quot;nobody&quot;/);
    assertErrorPage(await chooser({ client_id: 'gone-rp' }), /is inactive/);
    assertErrorPage(await chooser({ client_id: 'plain-rp' }), /no account chooser redirect URI/);
    const hostile = await chooser({ client_id: '<script>alert(1)</script>' });
    assertErrorPage(hostile, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    assert.doesNotMatch(hostile.body.toString(), /<script>/);
  });

  it('a demo client, a client from a file and the default RP are served', async () => {
    assert.equal((await chooser({ client_id: 'demo-rp' })).status, 200);
    redirected(await chooser({ client_id: 'file-rp', preselect_bic: BANK1 }), FILE_CHOSEN);
    assert.deepEqual(sandbox.rp.accountChooserRedirectUris, ['https://rp.sandbox.localhost/sandbox-rp/bank-chosen']);
    redirected(
      await chooser({ client_id: sandbox.rp.clientId, preselect_bic: BANK1 }),
      sandbox.rp.accountChooserRedirectUris[0],
    );
    const file = JSON.parse(readFileSync(join(dataDir, 'sandbox', 'endpoints.json'), 'utf8'));
    const listed = (id: string) =>
      file.clients.find((c: { client_id: string }) => c.client_id === id).account_chooser_redirect_uris;
    assert.deepEqual(listed('file-rp'), [FILE_CHOSEN]);
    assert.deepEqual(listed('chooser-rp'), [CHOSEN]);
    assert.deepEqual(listed('plain-rp'), []);
    assert.equal(file.accountChooserUrl, sandbox.accountChooserUrl);
  });
});

describe('account chooser: parameters (spec 2.1, 7.5)', () => {
  it('prompt other than select_account, prompt with preselect_bic, a bad return_bic, a repeated one: invalid_request', async () => {
    assertRedirectError(
      await chooser({ client_id: 'chooser-rp', prompt: 'login', state: 's1' }),
      'invalid_request',
      's1',
    );
    const both = await chooser({
      client_id: 'chooser-rp',
      prompt: 'select_account',
      preselect_bic: BANK1,
      state: 's2',
    });
    assert.match(String(assertRedirectError(both, 'invalid_request', 's2').get('error_description')), /preselect_bic/);
    assertRedirectError(await chooser({ client_id: 'chooser-rp', return_bic: 'yes' }), 'invalid_request');
    assertRedirectError(
      await chooser('client_id=chooser-rp&preselect_bic=SNDBDEFFXXX&preselect_bic=SNDCDEFFXXX'),
      'invalid_request',
    );
  });

  it('preselect_bic selects without a page, replaces the stored choice; selected_bic only with return_bic=true', async () => {
    const first = await chooser({ client_id: 'chooser-rp', preselect_bic: BANK2, state: 'st', return_bic: 'true' });
    const params = redirected(first);
    assert.equal(params.get('issuer_url'), bankIssuer(BANK2));
    assert.equal(params.get('state'), 'st');
    assert.equal(params.get('selected_bic'), BANK2);
    const set = setCookies(first).find((c) => c.startsWith('account_chooser_bic='))!;
    assert.match(set, /^account_chooser_bic=SNDCDEFFXXX;/);
    assert.match(set, /; HttpOnly/);
    assert.match(set, /; Secure/);
    assert.match(set, /; SameSite=Lax/);
    assert.match(set, /; Path=\/account-chooser\//);

    const replaced = await chooser({ client_id: 'chooser-rp', preselect_bic: 'sndbdeffxxx' }, selectionCookie(first));
    const second = redirected(replaced);
    assert.equal(second.get('issuer_url'), bankIssuer(BANK1));
    assert.equal(second.has('selected_bic'), false);
    assert.equal(second.has('state'), false);
    assert.equal(selectionCookie(replaced), `account_chooser_bic=${BANK1}`);
  });

  it('preselect_bic without a matching active bank: invalid_request with a description', async () => {
    const unknown = await chooser({ client_id: 'chooser-rp', preselect_bic: 'NOSUCHBKXXX', state: 'x' });
    assert.match(String(assertRedirectError(unknown, 'invalid_request', 'x').get('error_description')), /NOSUCHBKXXX/);
    sandbox.controls.setIdpStatus('inactive', BANK2);
    assertRedirectError(await chooser({ client_id: 'chooser-rp', preselect_bic: BANK2 }), 'invalid_request');
  });

  it('without a cookie: the page lists the active banks as a form to the chooser itself', async () => {
    const res = await chooser({ client_id: 'chooser-rp', state: 'a"b<c', return_bic: 'true' });
    assert.equal(res.status, 200);
    const page = res.body.toString();
    for (const b of sandbox.banks) {
      assert.ok(page.includes(b.name), b.name);
      assert.match(page, new RegExp(`name="preselect_bic" value="${b.bic}"`));
    }
    assert.match(page, /<form method="get" action="\/account-chooser\/">/);
    assert.match(page, /name="client_id" value="chooser-rp"/);
    assert.match(page, /name="state" value="a&quot;b&lt;c"/);
    assert.match(page, /name="return_bic" value="true"/);
    assert.match(page, /name="cancel"[^>]*>Cancel</);
    const csp = String(res.headers['content-security-policy']);
    assert.match(csp, /form-action 'self' https:\/\/rp\.example;/, 'the redirect after the form must be allowed');
    assert.match(csp, /frame-ancestors 'none'/);
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    assert.equal(res.headers['referrer-policy'], 'no-referrer');
    assert.equal(res.headers['cache-control'], 'no-store');

    sandbox.controls.setIdpStatus('inactive', BANK1);
    const fewer = (await chooser({ client_id: 'chooser-rp' })).body.toString();
    assert.doesNotMatch(fewer, /value="SNDBDEFFXXX"/, 'an inactive bank is not offered');
    assert.match(fewer, /value="SNDCDEFFXXX"/);
  });

  it('with a cookie: at once to the stored bank; prompt=select_account shows the page again', async () => {
    const cookie = selectionCookie(await chooser({ client_id: 'chooser-rp', preselect_bic: BANK2 }));
    const again = redirected(await chooser({ client_id: 'chooser-rp', state: 'later', return_bic: 'true' }, cookie));
    assert.equal(again.get('issuer_url'), bankIssuer(BANK2));
    assert.equal(again.get('state'), 'later');
    assert.equal(again.get('selected_bic'), BANK2);
    const prompted = await chooser({ client_id: 'chooser-rp', prompt: 'select_account' }, cookie);
    assert.equal(prompted.status, 200);
    assert.match(prompted.body.toString(), /Choose your bank/);
    const forged = await chooser({ client_id: 'chooser-rp' }, 'account_chooser_bic=not-a-bic');
    assert.equal(forged.status, 200, 'a cookie that holds no BIC is ignored');
  });

  it('a stored bank that is now inactive: unknown_issuer, and the cookie is cleared', async () => {
    const cookie = selectionCookie(await chooser({ client_id: 'chooser-rp', preselect_bic: BANK2 }));
    sandbox.controls.setIdpStatus('inactive', BANK2);
    const res = await chooser({ client_id: 'chooser-rp', state: 's' }, cookie);
    assertRedirectError(res, 'unknown_issuer', 's');
    assert.match(setCookies(res).join('\n'), /account_chooser_bic=;.*Expires=Thu, 01 Jan 1970/);
    const unknown = await chooser({ client_id: 'chooser-rp' }, 'account_chooser_bic=NOSUCHBKXXX');
    assertRedirectError(unknown, 'unknown_issuer');
  });

  it('cancel: error=canceled with the state', async () => {
    assertRedirectError(await chooser({ client_id: 'chooser-rp', state: 'c1', cancel: '1' }), 'canceled', 'c1');
  });

  it('/account-chooser/cookie clears the cookie and says so; the path without its slash is redirected', async () => {
    const reset = await httpRequest(`${sandbox.accountChooserUrl}cookie`, {
      agent,
      timeoutMs: 10_000,
      headers: { cookie: `account_chooser_bic=${BANK2}` },
    });
    assert.equal(reset.status, 200);
    assert.match(reset.body.toString(), /BIC <strong>SNDCDEFFXXX<\/strong>\) is forgotten/);
    assert.match(
      setCookies(reset).join('\n'),
      /account_chooser_bic=;.*Path=\/account-chooser\/.*Expires=Thu, 01 Jan 1970/,
    );
    const none = await httpRequest(`${sandbox.accountChooserUrl}cookie`, { agent, timeoutMs: 10_000 });
    assert.match(none.body.toString(), /No bank choice was stored/);

    const bare = await httpRequest(`${sandbox.platformUrl}/account-chooser?client_id=chooser-rp`, {
      agent,
      timeoutMs: 10_000,
    });
    assert.equal(bare.status, 301);
    assert.equal(bare.headers.location, '/account-chooser/?client_id=chooser-rp');
  });
});

// ---- a real browser ----

describe('account chooser in a browser', () => {
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let rpServer: Server;
  let target: string;

  before(async () => {
    // the RP's chooser redirect target: a plain HTTP listener on loopback that says what it got
    rpServer = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' }).end(`RP received ${req.url}`);
    });
    await new Promise<void>((resolve) => rpServer.listen(0, '127.0.0.1', resolve));
    target = `http://127.0.0.1:${(rpServer.address() as AddressInfo).port}/bank-chosen`;
    await sandbox.registerClient({ clientId: 'browser-rp', state: 'active', accountChooserRedirectUris: [target] });
    browser = await launchBrowser();
    context = await sandboxContext(browser);
    page = await context.newPage();
  });

  after(async () => {
    await context?.close();
    await browser?.close();
    await new Promise((resolve) => rpServer?.close(resolve));
  });

  async function shot(name: string): Promise<void> {
    const path = join(screenshotDir(), name);
    await page.screenshot({ path, fullPage: true });
    console.log('screenshot:', path);
  }

  /** The query the RP's listener got, once the browser is there. */
  async function landed(): Promise<URLSearchParams> {
    await page.waitForURL((url) => url.href.startsWith(target));
    return new URL(page.url()).searchParams;
  }

  const open = (query: string) => page.goto(`${sandbox.accountChooserUrl}?client_id=browser-rp&${query}`);

  it('lists both banks, picks bank 2, then redirects at once; the cookie reset shows the page again; cancel', async () => {
    await open('state=b1&return_bic=true');
    for (const b of sandbox.banks) {
      const button = page.locator(`button[name="preselect_bic"][value="${b.bic}"]`);
      assert.match(String(await button.textContent()), new RegExp(`^${b.name} \\(BIC ${b.bic}\\)$`));
    }
    await shot('account-chooser-banks.png');
    await page.getByRole('button', { name: /^Second Sandbox Bank/ }).click();
    let params = await landed();
    assert.equal(params.get('issuer_url'), bankIssuer(BANK2));
    assert.equal(params.get('state'), 'b1');
    assert.equal(params.get('selected_bic'), BANK2);

    await open('state=b2');
    params = await landed();
    assert.equal(params.get('issuer_url'), bankIssuer(BANK2), 'the cookie sent the browser on at once');
    assert.equal(params.get('state'), 'b2');

    await page.goto(`${sandbox.accountChooserUrl}cookie`);
    await page.getByText('is forgotten').waitFor();
    await shot('account-chooser-cookie-reset.png');

    await open('state=b3');
    await page.getByRole('button', { name: /^Second Sandbox Bank/ }).waitFor();
    await page.getByRole('button', { name: 'Cancel' }).click();
    params = await landed();
    assert.equal(params.get('error'), 'canceled');
    assert.equal(params.get('state'), 'b3');
    assert.equal(params.get('issuer_url'), null);
  });

  it('an unknown client_id: the error page, the browser stays at the chooser', async () => {
    await page.goto(`${sandbox.accountChooserUrl}?client_id=nobody`);
    await page.getByText('The account chooser cannot continue').waitFor();
    assert.ok(page.url().startsWith(sandbox.accountChooserUrl));
    await shot('account-chooser-unknown-client.png');
  });
});
