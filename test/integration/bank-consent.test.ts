/**
 * The sandbox bank's login and consent page (spec 2.7, 5.10, 5.11, 7.3) over real HTTPS: the page and its
 * headers, the single-use CSRF-protected form bound to the browser's cookie, expiry, the second factor, every
 * outcome with state and iss; then the same flows clicked through in chromium, with screenshots of each page
 * state. A second sandbox whose consent pages live one second serves the tests of a page posted after its life.
 */
import { after, before, describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { pkiPaths } from '../../src/ca/material.ts';
import { CONSENT_KEPT_EXPIRED_SECONDS, CONSENT_TTL_SECONDS } from '../../src/sandbox/as/store.ts';
import { DEFAULT_SIGNING_DOCUMENTS, type Sandbox } from '../../src/sandbox/index.ts';
import { httpRequest, type HttpAgent, type HttpResponse, jsonBody, tlsAgent } from '../../src/util/http-client.ts';
import { launchBrowser, sandboxContext, screenshotDir } from '../helpers/browser.ts';
import { startTestSandbox, type TestSandbox } from '../helpers/sandbox.ts';

const QTSP_ID = 'sp:sandbox.qtsp.localhost:0b7e3c1e-5a51-4f49-9d8e-4b0c6a2f1e77';
const SHA256_OID = '2.16.840.1.101.3.4.2.1';
const LABEL = '<script>alert(1)</script> & "Vertrag" Ü';
const ESCAPED = '&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;Vertrag&quot; Ü';
const FACTOR = '123456';
const VERIFIER = 'v'.repeat(43);
const CHALLENGE = createHash('sha256').update(VERIFIER).digest('base64url');
const sha256 = (text: string) => createHash('sha256').update(Buffer.from(text, 'utf8')).digest('base64');
/** the cookie that binds a consent page to the browser that loaded it */
const BROWSER_COOKIE = '__Secure-sandbox-bank-browser';
/** the consent page's life in the second sandbox, and a wait that outlasts it */
const SHORT_LIFE_SECONDS = 1;
const pastShortLife = () => new Promise((resolve) => setTimeout(resolve, SHORT_LIFE_SECONDS * 1000 + 500));

/** A sandbox and our RP's agent for it (PAR, token over mutual TLS). */
interface Env {
  readonly sandbox: Sandbox;
  readonly rpAgent: HttpAgent;
}

let testSandbox: TestSandbox;
let shortSandbox: TestSandbox;
let dataDir: string;
let sandbox: Sandbox;
let rpAgent: HttpAgent;
let qtspAgent: HttpAgent;
/** a browser's side: trusts both sandboxes' TLS CAs, presents no certificate */
let plainAgent: HttpAgent;
let short: Env;

function rpAgentOf(s: Sandbox): HttpAgent {
  const ca = readFileSync(s.tlsCaFile);
  return tlsAgent({ ca, cert: readFileSync(s.rp.certFile), key: readFileSync(s.rp.keyFile) });
}

before(async () => {
  [testSandbox, shortSandbox] = await Promise.all([
    startTestSandbox('qtsp-bank-consent-', QTSP_ID),
    startTestSandbox('qtsp-bank-consent-short-', QTSP_ID, { consentLifetimeSeconds: SHORT_LIFE_SECONDS }),
  ]);
  ({ dataDir, sandbox } = testSandbox);
  const ca = readFileSync(sandbox.tlsCaFile);
  rpAgent = rpAgentOf(sandbox);
  short = { sandbox: shortSandbox.sandbox, rpAgent: rpAgentOf(shortSandbox.sandbox) };
  const pki = pkiPaths(dataDir);
  qtspAgent = tlsAgent({ ca, cert: readFileSync(pki.clientCert), key: readFileSync(pki.clientKey) });
  plainAgent = tlsAgent({ ca: Buffer.concat([ca, readFileSync(short.sandbox.tlsCaFile)]) });
});

after(async () => {
  for (const a of [rpAgent, qtspAgent, plainAgent, short?.rpAgent]) await a?.close();
  await testSandbox?.close();
  await shortSandbox?.close();
});

// ---- the RP side by hand: PAR (mTLS), authorize URL, token ----

type Claims = Record<string, null | { essential: true }>;

function postForm(
  url: string,
  fields: Record<string, string | undefined>,
  agent: HttpAgent,
  cookie?: string,
): Promise<HttpResponse> {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(fields)) if (v !== undefined) body.append(k, v);
  return httpRequest(url, {
    method: 'POST',
    agent,
    timeoutMs: 10_000,
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}) },
    body: body.toString(),
  });
}

/** PAR as the default RP, without headless consent unless asked; returns the authorization URL. */
async function authorizationUrl(
  o: {
    docs?: { hash: string; label: string }[];
    claims?: Claims;
    extra?: Record<string, string>;
    issuer?: string;
    env?: Env;
  } = {},
): Promise<string> {
  const env = o.env ?? { sandbox, rpAgent };
  const issuer = o.issuer ?? env.sandbox.issuer;
  const sign = {
    type: 'sign',
    locations: [QTSP_ID],
    credentialID: 'qes_eidas',
    documentDigests: o.docs ?? [{ hash: sha256('a contract'), label: LABEL }],
    hashAlgorithmOID: SHA256_OID,
    ...(o.claims ? { identity_assurance_claims: o.claims } : {}),
  };
  const res = await postForm(
    `${issuer}/par`,
    {
      response_type: 'code',
      client_id: sandbox.rp.clientId,
      redirect_uri: sandbox.rp.redirectUri,
      code_challenge: CHALLENGE,
      code_challenge_method: 'S256',
      state: 'state-7',
      authorization_details: JSON.stringify([sign]),
      ...o.extra,
    },
    env.rpAgent,
  );
  assert.equal(res.status, 201, res.body.toString());
  const requestUri = (jsonBody(res) as { request_uri: string }).request_uri;
  const q = new URLSearchParams({ client_id: sandbox.rp.clientId, request_uri: requestUri });
  return `${issuer}/authorize?${q.toString()}`;
}

function redeem(code: string, issuer = sandbox.issuer): Promise<HttpResponse> {
  return postForm(
    `${issuer}/token`,
    {
      grant_type: 'authorization_code',
      code,
      client_id: sandbox.rp.clientId,
      redirect_uri: sandbox.rp.redirectUri,
      code_verifier: VERIFIER,
    },
    rpAgent,
  );
}

async function introspectedSub(accessToken: string): Promise<{ sub: unknown; claims: Record<string, unknown> }> {
  const res = await postForm(`${sandbox.issuer}/introspect`, { client_id: QTSP_ID, token: accessToken }, qtspAgent);
  assert.equal(res.status, 200, res.body.toString());
  const payload = JSON.parse(Buffer.from(res.body.toString().split('.')[1]!, 'base64url').toString()) as {
    sub: unknown;
    verified_claims: { claims: Record<string, unknown> };
  };
  return { sub: payload.sub, claims: payload.verified_claims.claims };
}

// ---- the browser side by hand: the page and its form ----

interface ShownPage {
  readonly res: HttpResponse;
  readonly html: string;
  readonly consentId: string;
  readonly csrfToken: string;
  /** `name=value` of the browser cookie the page came with, sent back with each post */
  readonly cookie: string | undefined;
}

function setCookies(res: HttpResponse): string[] {
  return ([] as string[]).concat(res.headers['set-cookie'] ?? []);
}

function field(html: string, name: string): string {
  const m = new RegExp(`name="${name}" value="([^"]*)"`).exec(html);
  assert.ok(m, `no field ${name} in ${html}`);
  return m[1]!;
}

function shown(res: HttpResponse): ShownPage {
  const html = res.body.toString();
  const cookie = setCookies(res).find((c) => c.startsWith(`${BROWSER_COOKIE}=`));
  return {
    res,
    html,
    consentId: field(html, 'consent_id'),
    csrfToken: field(html, 'csrf_token'),
    cookie: cookie?.split(';')[0],
  };
}

/** The page as a browser opens it: with the cookies it holds for the bank, if any. */
async function openPage(url: string, cookie?: string, agent = plainAgent): Promise<ShownPage> {
  const res = await httpRequest(url, { agent, timeoutMs: 10_000, headers: cookie ? { cookie } : {} });
  assert.equal(res.status, 200, res.body.toString());
  return shown(res);
}

/** The page's form posted with its consent id and CSRF token, and the page's cookie (from the same browser). */
function submit(
  p: ShownPage,
  fields: Record<string, string | undefined>,
  issuer = sandbox.issuer,
  agent = plainAgent,
): Promise<HttpResponse> {
  return postForm(
    `${issuer}/authorize/consent`,
    { consent_id: p.consentId, csrf_token: p.csrfToken, ...fields },
    agent,
    p.cookie,
  );
}

/** A redirect to the RP: 303, to the registered redirect_uri, always with state and iss (spec 5.11). */
function callback(res: HttpResponse, issuer = sandbox.issuer): URLSearchParams {
  assert.equal(res.status, 303, res.body.toString());
  const location = new URL(String(res.headers.location));
  assert.equal(`${location.origin}${location.pathname}`, sandbox.rp.redirectUri);
  assert.equal(location.searchParams.get('state'), 'state-7');
  assert.equal(location.searchParams.get('iss'), issuer);
  return location.searchParams;
}

function assertRejected(res: HttpResponse, message = /already used, has expired, or is not valid/): void {
  assert.equal(res.status, 400, res.body.toString());
  assert.match(String(res.headers['content-type']), /^text\/html/);
  assert.equal(res.headers.location, undefined);
  assert.match(res.body.toString(), message);
}

/** The refusal of a post that did not come from the browser that loaded the page. */
const OTHER_BROWSER = /belongs to a login started in another browser/;

describe('the consent page over HTTP', () => {
  it('is HTML with strict headers, the label escaped, the RP, the QTSP and its links', async () => {
    const p = await openPage(await authorizationUrl());
    const h = p.res.headers;
    assert.match(String(h['content-type']), /^text\/html; charset=utf-8/);
    const csp = String(h['content-security-policy']);
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /frame-ancestors 'none'/);
    // chromium applies form-action to the redirect after the post too: the RP's origin, and nothing else
    assert.ok(csp.includes(`form-action 'self' ${new URL(sandbox.rp.redirectUri).origin};`), csp);
    assert.equal(h['x-content-type-options'], 'nosniff');
    assert.equal(h['cache-control'], 'no-store');
    assert.equal(h['referrer-policy'], 'no-referrer');
    assert.ok(p.html.includes(`<bdi class="document-label">${ESCAPED}</bdi>`));
    assert.equal(p.html.includes('<script>'), false);
    assert.ok(p.html.includes(`<code id="rp-client-id">${sandbox.rp.clientId}</code>`));
    assert.match(p.html, /qtsp Sandbox Trust Service/);
    assert.match(p.html, /href="https:\/\/qtsp\.sandbox\.localhost\/tos\/v1\.0\/">Nutzungsbedingungen/);
    assert.match(p.html, /href="https:\/\/qtsp\.sandbox\.localhost\/policy\/v1\.0\/"/);
    assert.match(p.html, /id="identity-user-4711" value="user-4711" checked>/);
    assert.match(p.html, /the code is always 123456/);
  });

  it('shows the full text of a QTSP default document, and preselects the login_hint identity', async () => {
    const text = DEFAULT_SIGNING_DOCUMENTS[0]!.text;
    const p = await openPage(
      await authorizationUrl({
        docs: [{ hash: sha256(text), label: '' }],
        claims: { nationalities: null },
        extra: { login_hint: 'user-0030' },
      }),
    );
    assert.ok(p.html.includes(`<div class="doc default-document-text">${text}</div>`));
    assert.match(p.html, /id="identity-user-0030" value="user-0030" checked>/);
    assert.match(p.html, /Παπαδοπούλου/);
  });

  it('consent with the right factor: 303 with code, state, iss; the code redeems for the chosen identity', async () => {
    const p = await openPage(await authorizationUrl({ claims: { address: { essential: true } } }));
    const cb = callback(await submit(p, { identity: 'user-0030', otp: FACTOR, action: 'consent' }));
    assert.equal(cb.get('error'), null);
    const token = await redeem(cb.get('code')!);
    assert.equal(token.status, 200, token.body.toString());
    const seen = await introspectedSub((jsonBody(token) as { access_token: string }).access_token);
    assert.equal(seen.sub, 'user-0030');
    assert.equal(seen.claims['family_name'], 'Παπαδοπούλου');
    assert.deepEqual(seen.claims['address'], {
      street_address: 'Οδός Ερμού 25',
      locality: 'Αθήνα',
      postal_code: '10563',
      country: 'GR',
    });
  });

  it('a replayed form is refused with an HTML page and issues nothing', async () => {
    const p = await openPage(await authorizationUrl());
    callback(await submit(p, { identity: 'user-4711', otp: FACTOR, action: 'consent' }));
    assertRejected(await submit(p, { identity: 'user-4711', otp: FACTOR, action: 'consent' }));
    assertRejected(await submit(p, { action: 'cancel' }));
  });

  it('a forged token ends the pending consent: the right token fails afterwards', async () => {
    const p = await openPage(await authorizationUrl());
    assertRejected(
      await submit({ ...p, csrfToken: 'x'.repeat(43) }, { identity: 'user-4711', otp: FACTOR, action: 'consent' }),
    );
    assertRejected(await submit(p, { identity: 'user-4711', otp: FACTOR, action: 'consent' }));
  });

  it('malformed posts: unknown consent, missing token, repeated field, unknown action or identity', async () => {
    const p = await openPage(await authorizationUrl());
    assertRejected(await submit({ ...p, consentId: 'nope' }, { action: 'cancel' }));
    assertRejected(await submit({ ...p, csrfToken: '' }, { action: 'cancel' }));
    const repeated = await httpRequest(`${sandbox.issuer}/authorize/consent`, {
      method: 'POST',
      agent: plainAgent,
      timeoutMs: 10_000,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'consent_id=a&consent_id=b',
    });
    assertRejected(repeated);
    for (const fields of [{ action: 'delete' }, { identity: 'user-9999', otp: FACTOR, action: 'consent' }]) {
      const fresh = await openPage(await authorizationUrl());
      assertRejected(await submit(fresh, fields));
    }
    const json = await httpRequest(`${sandbox.issuer}/authorize/consent`, {
      method: 'POST',
      agent: plainAgent,
      timeoutMs: 10_000,
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    assertRejected(json);
  });

  it('the page comes with a browser cookie: HttpOnly, Secure, SameSite=Lax, for the authorize routes', async () => {
    const p = await openPage(await authorizationUrl());
    const [set] = setCookies(p.res);
    assert.match(
      set ?? '',
      new RegExp(`^${BROWSER_COOKIE}=[A-Za-z0-9_-]{43}; Path=/authorize; HttpOnly; Secure; SameSite=Lax$`),
    );
    // a second login in the same browser keeps the cookie's value: both pages stay usable
    const q = await openPage(await authorizationUrl(), p.cookie);
    assert.equal(q.cookie, p.cookie);
    assert.notEqual(q.consentId, p.consentId);
    assert.equal(callback(await submit(q, { action: 'cancel' })).get('error'), 'access_denied');
    assert.ok(callback(await submit(p, { identity: 'user-4711', otp: FACTOR, action: 'consent' })).get('code'));
  });

  it("another client's post of the consent id and token is refused and changes nothing", async () => {
    const p = await openPage(await authorizationUrl());
    const fields = { identity: 'user-4711', otp: FACTOR, action: 'consent' };
    for (const cookie of [undefined, `${BROWSER_COOKIE}=${'A'.repeat(43)}`, `other=${p.cookie?.split('=')[1]}`])
      assertRejected(await submit({ ...p, cookie }, fields), OTHER_BROWSER);
    // the browser that loaded the page goes on with the very same form: its token was not used up
    const cb = callback(await submit(p, fields));
    assert.equal((await redeem(cb.get('code')!)).status, 200);
  });

  it('a page posted after its life: back to the RP with access_denied and state, nothing issued', async () => {
    const issuer = short.sandbox.issuer;
    const p = await openPage(await authorizationUrl({ env: short }));
    await pastShortLife();
    const fields = { identity: 'user-4711', otp: FACTOR, action: 'consent' };
    // only the browser that loaded the page is sent back
    assertRejected(await submit({ ...p, cookie: undefined }, fields, issuer), OTHER_BROWSER);
    const cb = callback(await submit(p, fields, issuer), issuer);
    assert.equal(cb.get('error'), 'access_denied');
    assert.match(cb.get('error_description')!, /expired before the user answered/);
    assert.equal(cb.get('code'), null);
    assertRejected(await submit(p, fields, issuer));
  });

  it('a pending consent long past its page: the bank no longer knows the RP, an error page', async () => {
    const p = await openPage(await authorizationUrl());
    const late = (CONSENT_TTL_SECONDS + CONSENT_KEPT_EXPIRED_SECONDS + 5) * 1000;
    mock.timers.enable({ apis: ['Date'], now: Date.now() + late });
    try {
      assertRejected(await submit(p, { identity: 'user-4711', otp: FACTOR, action: 'consent' }));
    } finally {
      mock.timers.reset();
    }
  });

  it('a pending consent 20 minutes past its page is forgotten: an error page, not a way back to the RP', async () => {
    const p = await openPage(await authorizationUrl());
    mock.timers.enable({ apis: ['Date'], now: Date.now() + (CONSENT_TTL_SECONDS + 20 * 60) * 1000 });
    try {
      assertRejected(await submit(p, { identity: 'user-4711', otp: FACTOR, action: 'consent' }));
    } finally {
      mock.timers.reset();
    }
  });

  it('a wrong factor shows the page again with a fresh token; the third ends in access_denied', async () => {
    const first = await openPage(await authorizationUrl());
    const again = await submit(first, { identity: 'user-0064', otp: '654321', action: 'consent' });
    assert.equal(again.status, 200);
    const second = shown(again);
    assert.match(second.html, /The second factor is wrong\. 2 attempt\(s\) left\./);
    assert.match(second.html, /id="identity-user-0064" value="user-0064" checked>/);
    assert.notEqual(second.csrfToken, first.csrfToken);
    assert.equal(second.consentId, first.consentId);
    const third = shown(await submit(second, { identity: 'user-0064', otp: '', action: 'consent' }));
    assert.match(third.html, /1 attempt\(s\) left/);
    const cb = callback(await submit(third, { identity: 'user-0064', otp: '000000', action: 'consent' }));
    assert.equal(cb.get('error'), 'access_denied');
    assert.equal(cb.get('code'), null);
    assertRejected(await submit(third, { identity: 'user-0064', otp: FACTOR, action: 'consent' }));
  });

  it('a wrong factor then the right one still consents', async () => {
    const first = await openPage(await authorizationUrl());
    const second = shown(await submit(first, { identity: 'user-0064', otp: '1', action: 'consent' }));
    const cb = callback(await submit(second, { identity: 'user-0064', otp: FACTOR, action: 'consent' }));
    assert.equal((await redeem(cb.get('code')!)).status, 200);
  });

  it('Cancel: access_denied with a friendly description, at once', async () => {
    const cb = callback(await submit(await openPage(await authorizationUrl()), { action: 'cancel' }));
    assert.equal(cb.get('error'), 'access_denied');
    assert.match(cb.get('error_description')!, /You cancelled at your bank/);
  });

  it('Select another bank: account_selection_requested', async () => {
    const cb = callback(await submit(await openPage(await authorizationUrl()), { action: 'select_bank' }));
    assert.equal(cb.get('error'), 'account_selection_requested');
    assert.equal(cb.get('code'), null);
  });

  it('an identity lacking essential data: the explanation page, then unable_to_meet_service_requirements', async () => {
    const p = await openPage(await authorizationUrl({ claims: { address: { essential: true } } }));
    const explained = await submit(p, { identity: 'user-0404', otp: FACTOR, action: 'consent' });
    assert.equal(explained.status, 200);
    const page = shown(explained);
    assert.match(page.html, /<strong id="missing">Address<\/strong>/);
    assert.match(page.html, /No data has been shared with <bdi>sandbox-rp<\/bdi> or with qtsp Sandbox Trust Service/);
    assertRejected(await submit(page, { identity: 'user-0404', otp: FACTOR, action: 'consent' }));

    const p2 = await openPage(await authorizationUrl({ claims: { address: { essential: true } } }));
    const page2 = shown(await submit(p2, { identity: 'user-0001', otp: FACTOR, action: 'consent' }));
    assert.match(page2.html, /Given name, Family name/);
    const cb = callback(await submit(page2, { action: 'acknowledge' }));
    assert.equal(cb.get('error'), 'unable_to_meet_service_requirements');
    assert.match(cb.get('error_description')!, /could not provide all requested data/);
    assert.equal(cb.get('code'), null);
    assertRejected(await submit(page2, { action: 'acknowledge' }));
  });

  it('the second bank shows its own name and its consent is its own: iss, code, the pending consent', async () => {
    const issuer = sandbox.banks[1]!.issuer;
    const p = await openPage(await authorizationUrl({ issuer }));
    assert.match(p.html, /<h1>Second Sandbox Bank: confirm your signature<\/h1>/);
    // a pending consent lives at the bank that showed it
    assertRejected(await submit(p, { action: 'cancel' }));
    const q = await openPage(await authorizationUrl({ issuer }));
    const cb = callback(await submit(q, { identity: 'user-4711', otp: FACTOR, action: 'consent' }, issuer), issuer);
    assert.equal((await redeem(cb.get('code')!, issuer)).status, 200);
  });

  it('headless consent still redirects at once (302)', async () => {
    const res = await httpRequest(await authorizationUrl({ extra: { sandbox_consent: 'auto' } }), {
      agent: plainAgent,
      timeoutMs: 10_000,
    });
    assert.equal(res.status, 302);
    assert.ok(new URL(String(res.headers.location)).searchParams.get('code'));
  });
});

describe('pending consents are bounded', () => {
  const CAP = 2;
  let full: TestSandbox;
  let env: Env;

  before(async () => {
    full = await startTestSandbox('qtsp-bank-consent-full-', QTSP_ID, { maxPendingConsents: CAP });
    env = { sandbox: full.sandbox, rpAgent: rpAgentOf(full.sandbox) };
  });
  after(async () => {
    await env?.rpAgent.close();
    await full?.close();
  });

  it('a bank with every place taken sends the RP temporarily_unavailable with its state; a finished login frees one', async () => {
    const issuer = env.sandbox.issuer;
    const agent = tlsAgent({ ca: readFileSync(env.sandbox.tlsCaFile) });
    try {
      const pages: ShownPage[] = [];
      for (let i = 0; i < CAP; i++) pages.push(await openPage(await authorizationUrl({ env }), undefined, agent));
      const refused = await httpRequest(await authorizationUrl({ env }), { agent, timeoutMs: 10_000 });
      assert.equal(refused.status, 302, refused.body.toString());
      const to = new URL(String(refused.headers.location));
      assert.equal(`${to.origin}${to.pathname}`, sandbox.rp.redirectUri);
      assert.equal(to.searchParams.get('error'), 'temporarily_unavailable');
      assert.equal(to.searchParams.get('state'), 'state-7');
      assert.equal(to.searchParams.get('iss'), issuer);
      assert.match(to.searchParams.get('error_description') ?? '', /too many logins/);
      const cancelled = callback(await submit(pages[0]!, { action: 'cancel' }, issuer, agent), issuer);
      assert.equal(cancelled.get('error'), 'access_denied');
      await openPage(await authorizationUrl({ env }), undefined, agent);
    } finally {
      await agent.close();
    }
  });
});

// ---- in chromium ----

describe('the consent page in chromium', () => {
  let browser: Browser;
  const dialogs: string[] = [];

  before(async () => {
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
  });

  async function shot(page: Page, name: string): Promise<void> {
    const path = join(screenshotDir(), `bank-consent-${name}.png`);
    await page.screenshot({ path, fullPage: true });
    console.log('screenshot:', path);
  }

  /** A fresh page; requests to the RP's origin (where nothing listens) are answered here and recorded. */
  async function rpPage(): Promise<{ page: Page; callbacks: URL[] }> {
    const context = await sandboxContext(browser);
    const page = await context.newPage();
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    const callbacks: URL[] = [];
    const origin = new URL(sandbox.rp.redirectUri).origin;
    await page.route(`${origin}/**`, (route) => {
      callbacks.push(new URL(route.request().url()));
      return route.fulfill({ status: 200, contentType: 'text/html', body: '<h1>RP callback</h1>' });
    });
    return { page, callbacks };
  }

  async function landed(page: Page, callbacks: URL[], issuer = sandbox.issuer): Promise<URLSearchParams> {
    await page.waitForURL((u) => u.href.startsWith(sandbox.rp.redirectUri));
    assert.equal(callbacks.length, 1, callbacks.join(' '));
    const params = callbacks[0]!.searchParams;
    assert.equal(params.get('state'), 'state-7');
    assert.equal(params.get('iss'), issuer);
    return params;
  }

  it('consent: the label literally, identity, factor, a code that redeems; a replayed form gets nothing', async () => {
    const { page, callbacks } = await rpPage();
    await page.goto(await authorizationUrl({ claims: { nationalities: null } }));
    assert.equal(await page.locator('.document-label').first().textContent(), LABEL);
    await page.check('#identity-user-0030');
    await shot(page, 'page');
    await page.fill('#otp', '999999');
    await page.click('#consent');
    await page.waitForSelector('#error');
    assert.match((await page.textContent('#error')) ?? '', /second factor is wrong/);
    assert.equal(await page.isChecked('#identity-user-0030'), true);
    await shot(page, 'wrong-factor');
    const form = await page.content();
    await page.fill('#otp', FACTOR);
    await page.click('#consent');
    const params = await landed(page, callbacks);
    await shot(page, 'callback-code');
    const token = await redeem(params.get('code')!);
    assert.equal(token.status, 200, token.body.toString());
    const seen = await introspectedSub((jsonBody(token) as { access_token: string }).access_token);
    assert.equal(seen.sub, 'user-0030');
    assert.deepEqual(seen.claims['nationalities'], ['GR']);

    // the same form again, served at the bank's origin as the back button would have it
    const replay = await page.context().newPage();
    const replayUrl = `${sandbox.issuer}/replayed-form`;
    await replay.route(replayUrl, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: form }));
    await replay.goto(replayUrl);
    await replay.fill('#otp', FACTOR);
    const [answer] = await Promise.all([replay.waitForResponse(/\/authorize\/consent$/), replay.click('#consent')]);
    assert.equal(answer.status(), 400);
    assert.match((await replay.textContent('#error')) ?? '', /already used/);
    await shot(replay, 'replayed-form');
    assert.equal(callbacks.length, 1, 'no second callback');
    assert.deepEqual(dialogs, []);
    await page.context().close();
  });

  it('labels with bidirectional controls: isolated, the controls visible, read in the order sent', async () => {
    const { page } = await rpPage();
    const labels = ['invoice\u202Egnp.exe', 'contract\u2066\u202Efdp.exe\u2069 ok'];
    const docs = labels.map((label, i) => ({ hash: sha256(`document ${i}`), label }));
    await page.goto(await authorizationUrl({ docs }));
    const shownLabels = page.locator('.document-label');
    const rendered = await shownLabels.evaluateAll((els) =>
      els.map((el) => {
        // the characters in the order the browser lays them out, left to right (zero-width controls left out)
        const text = el.firstChild as Text;
        const boxes: { left: number; char: string }[] = [];
        for (let i = 0; i < text.data.length; i++) {
          const range = document.createRange();
          range.setStart(text, i);
          range.setEnd(text, i + 1);
          const box = range.getBoundingClientRect();
          if (box.width > 0) boxes.push({ left: box.left, char: text.data[i]! });
        }
        const laidOut = boxes
          .sort((a, b) => a.left - b.left)
          .map((b) => b.char)
          .join('');
        const style = getComputedStyle(el);
        return { laidOut, unicodeBidi: style.unicodeBidi };
      }),
    );
    const expected = ['invoice⟨U+202E⟩gnp.exe', 'contract⟨U+2066⟩⟨U+202E⟩fdp.exe⟨U+2069⟩ ok'];
    // laid out: the order a person reads, the controls' marks in place and nothing turned around
    assert.deepEqual(
      rendered.map((r) => r.laidOut),
      expected,
    );
    // innerText: the text as rendered, what a person can select and copy
    assert.deepEqual(await shownLabels.allInnerTexts(), expected);
    assert.deepEqual(
      rendered.map((r) => r.unicodeBidi),
      ['isolate', 'isolate'],
    );
    await shot(page, 'bidi-labels');
    await page.context().close();
  });

  it('the form copied into another browser is refused there; the browser that loaded it consents', async () => {
    const { page, callbacks } = await rpPage();
    await page.goto(await authorizationUrl());
    const form = await page.content();
    // another browser (its own cookie jar) with the same form, served at the bank's origin
    const other = await rpPage();
    const copyUrl = `${sandbox.issuer}/copied-form`;
    await other.page.route(copyUrl, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: form }));
    await other.page.goto(copyUrl);
    await other.page.fill('#otp', FACTOR);
    const [answer] = await Promise.all([
      other.page.waitForResponse(/\/authorize\/consent$/),
      other.page.click('#consent'),
    ]);
    assert.equal(answer.status(), 400);
    assert.match((await other.page.textContent('#error')) ?? '', OTHER_BROWSER);
    await shot(other.page, 'other-browser');
    assert.equal(other.callbacks.length, 0);
    await other.page.context().close();

    await page.fill('#otp', FACTOR);
    await page.click('#consent');
    const params = await landed(page, callbacks);
    assert.equal((await redeem(params.get('code')!)).status, 200);
    await page.context().close();
  });

  it('a page left past its life: Consent sends the browser back to the RP with access_denied', async () => {
    const { page, callbacks } = await rpPage();
    await page.goto(await authorizationUrl({ env: short }));
    await pastShortLife();
    await page.fill('#otp', FACTOR);
    await page.click('#consent');
    const params = await landed(page, callbacks, short.sandbox.issuer);
    assert.equal(params.get('error'), 'access_denied');
    assert.match(params.get('error_description') ?? '', /expired/);
    assert.equal(params.get('code'), null);
    await shot(page, 'expired-back-to-rp');
    await page.context().close();
  });

  it('a default document in full, then Cancel: access_denied', async () => {
    const { page, callbacks } = await rpPage();
    const text = DEFAULT_SIGNING_DOCUMENTS[1]!.text;
    const docs = [
      { hash: sha256(text), label: '' },
      { hash: sha256('terms'), label: LABEL },
    ];
    await page.goto(await authorizationUrl({ docs, claims: { birthdate: null } }));
    assert.equal(await page.textContent('.default-document-text'), text);
    await shot(page, 'default-document');
    await page.click('#cancel');
    const params = await landed(page, callbacks);
    assert.equal(params.get('error'), 'access_denied');
    await shot(page, 'cancelled');
    await page.context().close();
  });

  it('Select another bank: account_selection_requested', async () => {
    const { page, callbacks } = await rpPage();
    await page.goto(await authorizationUrl());
    await page.click('#select-bank');
    const params = await landed(page, callbacks);
    assert.equal(params.get('error'), 'account_selection_requested');
    await shot(page, 'another-bank');
    await page.context().close();
  });

  it('thin data with an essential claim: the explanation page, then unable_to_meet_service_requirements', async () => {
    const { page, callbacks } = await rpPage();
    await page.goto(await authorizationUrl({ claims: { address: { essential: true } } }));
    await page.check('#identity-user-0815');
    await page.fill('#otp', FACTOR);
    await page.click('#consent');
    await page.waitForSelector('#nothing-shared');
    assert.match((await page.textContent('#missing')) ?? '', /Address/);
    await shot(page, 'insufficient-data');
    await page.click('#continue');
    const params = await landed(page, callbacks);
    assert.equal(params.get('error'), 'unable_to_meet_service_requirements');
    assert.equal(params.get('code'), null);
    await shot(page, 'callback-unable');
    assert.deepEqual(dialogs, []);
    await page.context().close();
  });
});
