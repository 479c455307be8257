/**
 * The demo relying party (src/rp/demo) in a real browser against the whole ecosystem: upload, the platform's
 * account chooser, the bank's login and consent page, signDoc, the result page with its downloads and the
 * independent validator's verdict; each download checked again here (openssl cms -verify, pdfsig). Then what
 * must not sign: a replayed or unknown state (no signDoc call), a file over the limit, a cancel at the bank,
 * Select another bank (back to the chooser with prompt=select_account), an error the bank redirects with.
 * Every offered format x level walked through the browser with no FAILED check (pdfsig for PAdES, openssl ts
 * for its document time-stamp at B-LTA), and the same verifier saying FAILED for tampered results.
 * Screenshots of every page state go under screenshotDir().
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { OFFERED, OFFERED_LEVELS } from '../../src/ades/offer.ts';
import { SESSION_COOKIE } from '../../src/rp/demo/app.ts';
import { SIGNATURE_FORMATS } from '../../src/ades/formats.ts';
import { pkiPaths } from '../../src/ca/material.ts';
import { verifyCades, verifyPades, verifyXades, type Verdict } from '../../src/rp/demo/verify.ts';
import { authorizeSigning } from '../../src/rp/flow.ts';
import { readSignatures } from '../../src/rp/pdf.ts';
import { httpRequest, tlsAgent, type HttpAgent } from '../../src/util/http-client.ts';
import { LOG_OPTIONS } from '../../src/util/logger.ts';
import { launchBrowser, sandboxContext, screenshotDir } from '../helpers/browser.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { opensslCmsVerify, run } from '../helpers/openssl.ts';
import { nssTrustStore } from '../helpers/pki-oracles.ts';

const SAMPLE_PDF = readFileSync(fileURLToPath(new URL('../../fixtures/documents/sample.pdf', import.meta.url)));
const TEXT = Buffer.from('Hello from the demo relying party test.\n', 'utf8');
const BANK_BIC = 'SNDBDEFFXXX';
const SECOND_BANK_BIC = 'SNDCDEFFXXX';
const SECOND_FACTOR = '123456';
const MAX_UPLOAD = 10 * 1024 * 1024;
/** the sandbox bank's test identity without given and family name (src/sandbox/users.ts) */
const NO_NAMES_SUB = 'user-0001';

const logLines: string[] = [];
const sink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    done();
  },
});

let env: TestEnvironment;
let browser: Browser;
let demoUrl: string;
let agent: HttpAgent;
let work: string;
let nssDir: string;

before(async () => {
  env = await startEnvironment({}, { demoRpPort: 0, logger: pino({ ...LOG_OPTIONS, level: 'trace' }, sink) });
  assert.ok(env.demoRp, 'the demo RP runs when demoRpPort is given');
  demoUrl = env.demoRp.url;
  agent = tlsAgent({ ca: readFileSync(env.sandbox.tlsCaFile) });
  browser = await launchBrowser();
  work = mkdtempSync(join(tmpdir(), 'qtsp-demo-rp-test-'));
  // pdfsig's trust store: our root and nothing else
  nssDir = await nssTrustStore(join(work, 'nss'), env.rootCaFile);
});

after(async () => {
  await browser?.close();
  await agent?.close();
  await env?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

async function screenshot(page: Page, name: string): Promise<void> {
  const path = join(screenshotDir(), `demo-rp-${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log('screenshot:', path);
}

/** signDoc calls the QTSP has answered so far, whatever the status. */
async function signDocCalls(): Promise<number> {
  const metric = await env.qtsp.deps.metrics.requests.get();
  return metric.values.reduce((sum, v) => sum + v.value, 0);
}

interface Upload {
  readonly name: string;
  readonly mimeType: string;
  readonly buffer: Buffer;
}

/** The form filled in and sent: the browser ends at the account chooser. */
async function upload(page: Page, file: Upload, format: string, level: string): Promise<void> {
  await page.goto(demoUrl);
  await page.setInputFiles('input[name=document]', file);
  await page.check(`input[name=format][value="${format}"]`);
  await page.check(`input[name=level][value="${level}"]`);
  await Promise.all([
    page.waitForURL((u) => u.pathname.startsWith('/account-chooser/')),
    page.click('button[type=submit]'),
  ]);
}

/** At the chooser: the bank picked; the demo RP hands the browser on to that bank's page. */
async function chooseBank(page: Page, options: { bic?: string; shot?: string } = {}): Promise<void> {
  const bic = options.bic ?? BANK_BIC;
  const bank = env.sandbox.banks.find((b) => b.bic === bic);
  assert.ok(bank, `the sandbox runs a bank ${bic}`);
  if (options.shot) await screenshot(page, options.shot);
  await Promise.all([
    page.waitForURL((u) => u.origin === new URL(bank.issuer).origin && u.pathname === '/authorize'),
    page.click(`button[name=preselect_bic][value="${bic}"]`),
  ]);
  await page.waitForSelector('#consent');
}

/** At the bank: the default identity, the second factor, Consent; the browser ends on the result page. */
async function consent(page: Page, shot?: string): Promise<void> {
  await page.fill('#otp', SECOND_FACTOR);
  if (shot) await screenshot(page, shot);
  await Promise.all([page.waitForURL((u) => u.pathname.startsWith('/result/')), page.click('#consent')]);
}

async function downloadOf(page: Page, kind: string): Promise<Buffer> {
  const [download] = await Promise.all([page.waitForEvent('download'), page.click(`a[href$="/${kind}"]`)]);
  return readFileSync((await download.path())!);
}

/** A copy of `bytes` with the byte at `at` changed. */
function flipped(bytes: Buffer, at: number): Buffer {
  const copy = Buffer.from(bytes);
  copy[at] = copy[at]! ^ 0x01;
  return copy;
}

const show = (v: Verdict) => v.checks.map((c) => `${c.name}\n${c.command}\n${c.output}`).join('\n\n');

interface ShownCheck {
  readonly name: string;
  readonly verdict: string;
  readonly output: string;
}

/** The checks on a result page: each one's name, its own verdict and the tool's output. */
async function shownChecks(page: Page): Promise<ShownCheck[]> {
  return page.locator('.check').evaluateAll((els) =>
    els.map((e) => ({
      name: e.querySelector('.check-name')?.textContent ?? '',
      verdict: e.querySelector('.check-verdict')?.textContent ?? '',
      output: e.querySelector('.check-output')?.textContent ?? '',
    })),
  );
}

async function newPage(): Promise<{ context: BrowserContext; page: Page }> {
  const context = await sandboxContext(browser);
  return { context, page: await context.newPage() };
}

describe('demo RP in a browser', () => {
  it('the upload form offers the three formats and the QTSP levels', async () => {
    const { context, page } = await newPage();
    try {
      const res = await page.goto(demoUrl);
      assert.equal(res?.status(), 200);
      assert.match(res?.headers()['content-security-policy'] ?? '', /form-action 'self' https:\/\/127\.0\.0\.1:\d+/);
      for (const f of ['C', 'X', 'P']) assert.equal(await page.locator(`input[name=format][value="${f}"]`).count(), 1);
      const levels = await page
        .locator('input[name=level]')
        .evaluateAll((els) => els.map((e) => e.getAttribute('value')));
      assert.deepEqual(levels, [...OFFERED_LEVELS]);
      await screenshot(page, '01-upload-form');
    } finally {
      await context.close();
    }
  });

  it('CAdES B-T: chooser, bank, signDoc; the verdict passes and openssl verifies the download; no replay', async () => {
    const { context, page } = await newPage();
    try {
      let callbackUrl = '';
      page.on('request', (r) => {
        if (new URL(r.url()).pathname === '/callback') callbackUrl = r.url();
      });
      await upload(page, { name: 'hello.txt', mimeType: 'text/plain', buffer: TEXT }, 'C', 'AdES-B-T');
      const chooser = new URL(page.url());
      assert.equal(chooser.searchParams.get('client_id'), 'sandbox-demo-rp');
      assert.equal(chooser.searchParams.get('return_bic'), 'true');
      assert.ok((chooser.searchParams.get('state') ?? '').length >= 32, 'an unguessable state');
      await chooseBank(page, { shot: '02-account-chooser' });
      await consent(page, '03-bank-consent');
      assert.match((await page.locator('#verdict').textContent()) ?? '', /^PASSED/);
      assert.match((await page.locator('.check-command').textContent()) ?? '', /^openssl cms -verify -cades/);
      assert.match((await page.locator('.check-output').textContent()) ?? '', /Verification successful/);
      await screenshot(page, '04-result-cades-b-t');
      const signature = await downloadOf(page, 'signature');
      const check = await opensslCmsVerify(signature, TEXT, env.rootCaFile);
      assert.ok(check.ok, check.output);
      // a name every plain object has is no download
      const id = new URL(page.url()).pathname.split('/')[2]!;
      for (const kind of ['constructor', '__proto__', 'toString', 'valueOf', 'hasOwnProperty']) {
        const res = await page.request.get(new URL(`/download/${id}/${kind}`, demoUrl).toString());
        assert.equal(res.status(), 404, kind);
        assert.match(res.headers()['content-type'] ?? '', /^text\/html/, kind);
      }

      // the bank's redirect once more: its state is used up, nothing is signed again
      const before = await signDocCalls();
      const replay = await page.goto(callbackUrl);
      assert.equal(replay?.status(), 400);
      assert.match(await page.content(), /Unknown or used answer from the bank/);
      assert.equal(await signDocCalls(), before, 'no signDoc call for a replayed state');
      await screenshot(page, 'error-replayed-state');
    } finally {
      await context.close();
    }
  });

  it('PAdES B-B of a PDF at the second bank: the signed PDF downloads, pdfsig calls it valid and trusted', async () => {
    const { context, page } = await newPage();
    try {
      await upload(page, { name: 'sample.pdf', mimeType: 'application/pdf', buffer: SAMPLE_PDF }, 'P', 'AdES-B-B');
      await chooseBank(page, { bic: SECOND_BANK_BIC });
      await consent(page);
      assert.match((await page.locator('#verdict').textContent()) ?? '', /^PASSED/);
      assert.match((await page.locator('.check-command').textContent()) ?? '', /^pdfsig -nssdir/);
      await screenshot(page, '05-result-pades-b-b');
      const pdf = await downloadOf(page, 'signed-pdf');
      const file = join(work, 'sample.signed.pdf');
      writeFileSync(file, pdf);
      const verdict = await run('pdfsig', ['-nssdir', `sql:${nssDir}`, file]);
      assert.match(verdict.output, /Signature Validation: Signature is Valid\./, verdict.output);
      assert.match(verdict.output, /Certificate Validation: Certificate is Trusted\./, verdict.output);
    } finally {
      await context.close();
    }
  });

  it('a file over the limit gets a clear error on the form', async () => {
    const { context, page } = await newPage();
    try {
      await page.goto(demoUrl);
      const big = { name: 'big.bin', mimeType: 'application/octet-stream', buffer: Buffer.alloc(MAX_UPLOAD + 1) };
      await page.setInputFiles('input[name=document]', big);
      const [res] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/sign')), page.click('button')]);
      assert.equal(res.status(), 413);
      await page.waitForSelector('[role=alert]');
      assert.match(
        (await page.locator('[role=alert]').textContent()) ?? '',
        /too large: this demo takes files of up to 10 MB/,
      );
      await screenshot(page, 'error-too-large');
    } finally {
      await context.close();
    }
  });

  it('Cancel at the bank: the friendly page, nothing signed', async () => {
    const { context, page } = await newPage();
    try {
      const before = await signDocCalls();
      await upload(page, { name: 'hello.txt', mimeType: 'text/plain', buffer: TEXT }, 'X', 'AdES-B-B');
      await chooseBank(page);
      await Promise.all([page.waitForURL((u) => u.pathname === '/callback'), page.click('#cancel')]);
      assert.match((await page.locator('h1').textContent()) ?? '', /The signing stopped at your bank/);
      // the bank's own words say which it was; the page itself claims no reason it cannot know
      assert.match((await page.locator('#bank-said').textContent()) ?? '', /^You cancelled at your bank\./);
      assert.equal(await signDocCalls(), before);
      await screenshot(page, 'cancelled-at-bank');
    } finally {
      await context.close();
    }
  });

  it('Select another bank: the chooser again (prompt=select_account, no error); then XAdES B-T, xmlsec1 passes', async () => {
    const { context, page } = await newPage();
    try {
      await upload(page, { name: 'hello.txt', mimeType: 'text/plain', buffer: TEXT }, 'X', 'AdES-B-T');
      await chooseBank(page);
      await Promise.all([
        page.waitForURL((u) => u.pathname.startsWith('/account-chooser/') && u.searchParams.has('prompt')),
        page.click('#select-bank'),
      ]);
      assert.equal(new URL(page.url()).searchParams.get('prompt'), 'select_account');
      assert.equal(await page.locator('.error').count(), 0);
      await screenshot(page, 'chooser-after-select-another-bank');
      // the same document goes on with the bank chosen again
      await chooseBank(page);
      await consent(page);
      assert.match((await page.locator('#verdict').textContent()) ?? '', /^PASSED/);
      assert.match((await page.locator('.check-command').textContent()) ?? '', /^xmlsec1 --verify/);
      assert.match((await page.locator('.check-output').textContent()) ?? '', /OK/);
      await screenshot(page, '06-result-xades-b-t');
    } finally {
      await context.close();
    }
  });

  it('an identity the bank lacks data for: unable_to_meet_service_requirements, a clear error page', async () => {
    const { context, page } = await newPage();
    try {
      const before = await signDocCalls();
      await upload(page, { name: 'hello.txt', mimeType: 'text/plain', buffer: TEXT }, 'C', 'AdES-B-B');
      await chooseBank(page);
      // the sandbox's test identity without names: the bank states the problem, then redirects with the error
      await page.check(`#identity-${NO_NAMES_SUB}`);
      await page.fill('#otp', SECOND_FACTOR);
      await page.click('#consent');
      await page.waitForSelector('#continue');
      await Promise.all([page.waitForURL((u) => u.pathname === '/callback'), page.click('#continue')]);
      assert.match((await page.locator('h1').textContent()) ?? '', /cannot vouch/);
      assert.match((await page.locator('[role=alert]').textContent()) ?? '', /Nothing was shared/);
      assert.equal(await signDocCalls(), before);
      await screenshot(page, 'error-unable-to-meet-service-requirements');
    } finally {
      await context.close();
    }
  });
});

/** A page of another origin (plain HTTP on another loopback port) that builds a file and submits our form. */
async function hostileSite(): Promise<{ url: string; close(): Promise<void> }> {
  const page = `<!doctype html><html><body>
<form id="f" method="post" action="${new URL('/sign', demoUrl)}" enctype="multipart/form-data">
<input type="file" name="document"><input name="format" value="C"><input name="level" value="AdES-B-B"></form>
<script>
const data = new DataTransfer();
data.items.add(new File(['I owe the attacker everything.'], 'attacker-contract.txt', { type: 'text/plain' }));
const form = document.getElementById('f');
form.document.files = data.files;
form.submit();
</script></body></html>`;
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(page));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The bank's redirect to our callback after Consent, held back (the browser never follows it) and handed out. */
async function heldCallback(page: Page): Promise<URL> {
  await upload(page, { name: 'hello.txt', mimeType: 'text/plain', buffer: TEXT }, 'C', 'AdES-B-B');
  await chooseBank(page);
  let held: URL | undefined;
  // the consent post is sent on the browser's behalf, its redirect read and not followed
  await page.route(
    (u) => u.pathname === '/authorize/consent',
    async (route) => {
      const answer = await route.fetch({ maxRedirects: 0 });
      held = new URL(answer.headers()['location'] ?? 'about:blank');
      await route.fulfill({ status: 200, contentType: 'text/html', body: '<p id="held">held</p>' });
    },
  );
  await page.fill('#otp', SECOND_FACTOR);
  await Promise.all([page.waitForSelector('#held'), page.click('#consent')]);
  await page.unrouteAll();
  assert.equal(held?.pathname, '/callback', String(held));
  return held!;
}

describe('demo RP against hostile pages and answers', () => {
  it('a page of another origin auto-submitting the upload form: no signing starts, the session cookie stays', async () => {
    const { context, page } = await newPage();
    const hostile = await hostileSite();
    try {
      await upload(page, { name: 'hello.txt', mimeType: 'text/plain', buffer: TEXT }, 'C', 'AdES-B-B');
      const cookie = async () => (await context.cookies(demoUrl)).find((c) => c.name === SESSION_COOKIE)?.value;
      const own = await cookie();
      assert.ok(own, 'the signing started here made a session');
      const [res] = await Promise.all([
        page.waitForResponse((r) => new URL(r.url()).pathname === '/sign'),
        page.goto(hostile.url),
      ]);
      assert.equal(res.status(), 403);
      await page.waitForURL((u) => u.pathname === '/sign');
      assert.match((await page.locator('[role=alert]').textContent()) ?? '', /sent from another site/);
      assert.equal(await cookie(), own, 'the session cookie was not replaced');
      await screenshot(page, 'error-cross-site-post');
    } finally {
      await hostile.close();
      await context.close();
    }
  });

  it('an answer naming the other bank (mix-up): a 400 page, nothing signed', async () => {
    const { context, page } = await newPage();
    try {
      const before = await signDocCalls();
      const callback = await heldCallback(page);
      const other = env.sandbox.banks.find((b) => b.bic === SECOND_BANK_BIC)!;
      assert.notEqual(callback.searchParams.get('iss'), other.issuer);
      callback.searchParams.set('iss', other.issuer);
      const res = await page.goto(callback.toString());
      assert.equal(res?.status(), 400);
      assert.match((await page.locator('h1').textContent()) ?? '', /Answer from another bank/);
      assert.equal(await signDocCalls(), before);
    } finally {
      await context.close();
    }
  });

  it("the bank's error_description: isolated, its bidirectional controls shown, not acting", async () => {
    const { context, page } = await newPage();
    try {
      const callback = await heldCallback(page);
      callback.searchParams.delete('code');
      callback.searchParams.set('error', 'access_denied');
      callback.searchParams.set('error_description', 'Stopped \u202Efdp.exe\u202C here');
      await page.goto(callback.toString());
      const said = page.locator('#bank-said');
      assert.equal(await said.evaluate((e) => e.tagName), 'BDI');
      assert.equal(await said.textContent(), 'Stopped ⟨U+202E⟩fdp.exe⟨U+202C⟩ here');
      assert.ok(!(await page.content()).includes('\u202E'), 'no acting override in the page');
    } finally {
      await context.close();
    }
  });
});

/** What each offered format x level left for the tamper test below: the result files and the signed input. */
const walked = new Map<string, { input: Buffer; downloads: Record<string, Buffer> }>();

describe('demo RP verdicts in a browser', () => {
  it('every offered format x level: no FAILED for a valid signature, each check named with its verdict', async (t) => {
    // one browser, a fresh context per combination: the account chooser remembers a bank per browser profile
    const results: { combination: string; verdict: string; shown: string; checks: ShownCheck[]; expected: string[] }[] =
      [];
    for (const format of SIGNATURE_FORMATS) {
      const pdf = format === 'P';
      const file = pdf
        ? { name: 'sample.pdf', mimeType: 'application/pdf', buffer: SAMPLE_PDF }
        : { name: 'hello.txt', mimeType: 'text/plain', buffer: TEXT };
      for (const level of OFFERED[format]) {
        const started = Date.now();
        const combination = `${format} ${level}`;
        let checks: ShownCheck[] = [];
        const { context, page } = await newPage();
        try {
          await upload(page, file, format, level);
          await chooseBank(page);
          await consent(page);
          checks = await shownChecks(page);
          results.push({
            combination,
            verdict: (await page.locator('#verdict').textContent()) ?? '',
            shown: (await page.locator('body').textContent()) ?? '',
            checks,
            expected: pdf
              ? ['pdfsig', ...(level === 'AdES-B-LTA' ? ['openssl ts -verify'] : [])]
              : [format === 'C' ? 'openssl cms -verify -cades' : 'xmlsec1 --verify'],
          });
          const downloads: Record<string, Buffer> = { signature: await downloadOf(page, 'signature') };
          if (pdf) downloads['signed-pdf'] = await downloadOf(page, 'signed-pdf');
          walked.set(combination, { input: file.buffer, downloads });
          if (level === 'AdES-B-LTA') await screenshot(page, `07-result-${format.toLowerCase()}-b-lta`);
        } finally {
          await context.close();
        }
        t.diagnostic(`${combination}: ${checks.map((c) => c.name).join(', ')} (${Date.now() - started} ms)`);
      }
    }
    const failed = results.filter((r) => !/^PASSED/.test(r.verdict));
    assert.deepEqual(
      failed.map((r) => r.combination),
      [],
      failed.map((r) => `${r.combination}:\n${r.shown}`).join('\n\n'),
    );
    for (const r of results) {
      assert.deepEqual(
        r.checks.map((c) => r.expected.find((e) => c.name.includes(e))),
        r.expected,
        `${r.combination}: the checks that apply, each named by its tool:\n${r.shown}`,
      );
      for (const c of r.checks) {
        assert.equal(c.verdict, 'PASSED', `${r.combination}: ${c.name}\n${c.output}`);
        assert.ok(c.output.trim().length > 0, `${r.combination}: ${c.name} shows its output`);
      }
    }
  });

  it('a tampered result fed to the verifier: FAILED, and the check that caught it says so', async () => {
    const verifier = { rootCaFile: env.rootCaFile, issuingCaFile: pkiPaths(env.dataDir).issuingCert };
    const lta = walked.get('P AdES-B-LTA');
    assert.ok(lta, 'the walk above signed PAdES B-LTA');
    const pdf = lta.downloads['signed-pdf']!;
    const [signature, timestamp] = readSignatures(pdf);
    assert.equal(timestamp?.subFilter, 'ETSI.RFC3161');
    const checksOf = (v: Verdict) => v.checks.map((c) => `${c.passed ? 'PASSED' : 'FAILED'} ${c.name.split(':')[0]}`);
    const intact = await verifyPades(pdf, verifier);
    assert.deepEqual(checksOf(intact), ['PASSED pdfsig', 'PASSED openssl ts -verify']);
    assert.ok(intact.passed);

    // a byte of the DSS, which only the document time-stamp covers: pdfsig still calls the signature valid
    const signedEnd = signature!.byteRange[2] + signature!.byteRange[3];
    const inDss = pdf.indexOf('stream', signedEnd) + 'stream'.length + 8;
    assert.ok(inDss > signedEnd && inDss < timestamp!.byteRange[1], 'a byte between the signature and the time-stamp');
    const dssChanged = await verifyPades(flipped(pdf, inDss), verifier);
    assert.deepEqual(checksOf(dssChanged), ['PASSED pdfsig', 'FAILED openssl ts -verify'], show(dssChanged));
    assert.equal(dssChanged.passed, false);

    // a byte of the document both cover (the binary comment after the header)
    const documentChanged = await verifyPades(flipped(pdf, 11), verifier);
    assert.deepEqual(checksOf(documentChanged), ['FAILED pdfsig', 'FAILED openssl ts -verify'], show(documentChanged));
    assert.equal(documentChanged.passed, false);

    // the time-stamp token itself: a hex digit near its end (its signature value) changed in /Contents
    const digit = timestamp!.byteRange[1] + 1 + 2 * (timestamp!.contents.length - 8);
    const tokenChanged = Buffer.from(pdf);
    tokenChanged[digit] = tokenChanged[digit] === 0x30 ? 0x31 : 0x30;
    const forged = await verifyPades(tokenChanged, verifier);
    assert.deepEqual(checksOf(forged), ['PASSED pdfsig', 'FAILED openssl ts -verify'], show(forged));
    assert.equal(forged.passed, false);

    // CAdES and XAdES: the signature over another document (one byte changed)
    for (const [combination, verify] of [
      ['C AdES-B-LTA', verifyCades],
      ['X AdES-B-T', verifyXades],
    ] as const) {
      const result = walked.get(combination);
      assert.ok(result, `the walk above signed ${combination}`);
      const v = await verify(result.downloads['signature']!, flipped(result.input, 0), verifier);
      assert.equal(v.passed, false, `${combination}: ${show(v)}`);
      assert.deepEqual(
        v.checks.map((c) => c.passed),
        [false],
      );
    }
  });
});

describe('demo RP over HTTP', () => {
  async function get(path: string, cookie?: string) {
    return httpRequest(new URL(path, demoUrl), {
      agent,
      timeoutMs: 10_000,
      ...(cookie ? { headers: { cookie } } : {}),
    });
  }

  /** A session, made as a browser's is: when a signing starts (a visit makes none). */
  async function sessionCookie(): Promise<string> {
    const res = await postUpload(undefined, { format: 'C', file: 'hello.txt', type: 'text/plain', bytes: TEXT });
    assert.equal(res.status, 303);
    const set = ([] as string[]).concat(res.headers['set-cookie'] ?? []);
    assert.match(set[0] ?? '', /HttpOnly/i);
    assert.match(set[0] ?? '', /Secure/i);
    return set[0]!.split(';')[0]!;
  }

  /** The upload form posted as a browser posts it (multipart), with the session's cookie. */
  function postUpload(cookie: string | undefined, o: { format: string; file: string; type: string; bytes: Buffer }) {
    const boundary = '----demo-rp-test';
    const body = Buffer.concat([
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="format"\r\n\r\n${o.format}\r\n` +
          `--${boundary}\r\nContent-Disposition: form-data; name="level"\r\n\r\nAdES-B-B\r\n` +
          `--${boundary}\r\nContent-Disposition: form-data; name="document"; filename="${o.file}"\r\n` +
          `Content-Type: ${o.type}\r\n\r\n`,
      ),
      o.bytes,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    return httpRequest(new URL('/sign', demoUrl), {
      method: 'POST',
      agent,
      timeoutMs: 30_000,
      headers: { ...(cookie ? { cookie } : {}), 'content-type': `multipart/form-data; boundary=${boundary}` },
      body,
    });
  }

  it('a callback with an unknown state: error page, no signDoc call', async () => {
    const cookie = await sessionCookie();
    const before = await signDocCalls();
    for (const cookieSent of [cookie, undefined]) {
      const q = new URLSearchParams({ code: 'forged', state: 'unknown-state', iss: env.sandbox.issuer });
      const res = await get(`/callback?${q}`, cookieSent);
      assert.equal(res.status, 400);
      assert.match(res.body.toString(), /Nothing was signed/);
      assert.equal(res.headers['cache-control'], 'no-store');
    }
    assert.equal(await signDocCalls(), before);
  });

  it('authorizeSigning with interactive: true stops after PAR; the bank answers its page, no redirect', async () => {
    const start = await authorizeSigning(env.endpoints, {
      documentDigests: [{ hash: createHash('sha256').update(TEXT).digest('base64'), label: 'hello.txt' }],
      hashAlgorithmOID: '2.16.840.1.101.3.4.2.1',
      interactive: true,
    });
    assert.equal(start.pending.metadata.issuer, env.sandbox.issuer);
    assert.ok(start.pending.pkce, 'PKCE S256 by default');
    const page = await httpRequest(start.authorizationUrl, { agent, timeoutMs: 10_000 });
    assert.equal(page.status, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.match(page.body.toString(), /id="consent"/);
  });

  it('a bank selection with an unknown state: error page', async () => {
    const cookie = await sessionCookie();
    const q = new URLSearchParams({ issuer_url: env.sandbox.issuer, state: 'unknown-state' });
    const res = await get(`/bank-chosen?${q}`, cookie);
    assert.equal(res.status, 400);
    assert.match(res.body.toString(), /Unknown bank selection/);
  });

  it('an upload over 10 MB: 413 with a clear message', async () => {
    const cookie = await sessionCookie();
    const big = { format: 'C', file: 'big.bin', type: 'application/octet-stream', bytes: Buffer.alloc(MAX_UPLOAD + 1) };
    const res = await postUpload(cookie, big);
    assert.equal(res.status, 413);
    assert.match(res.body.toString(), /The file is too large: this demo takes files of up to 10 MB/);
  });

  it('a text file as PAdES: the form again, saying PAdES signs PDFs', async () => {
    const cookie = await sessionCookie();
    const res = await postUpload(cookie, { format: 'P', file: 'a.txt', type: 'text/plain', bytes: TEXT });
    assert.equal(res.status, 400);
    assert.match(res.body.toString(), /PAdES signs PDF files/);
  });

  it('a bank selection naming an issuer_url the platform does not know, or an inactive bank: a 400 page', async () => {
    const cookie = await sessionCookie();
    const select = async (issuer: string) => {
      const upload = await postUpload(cookie, { format: 'C', file: 'hello.txt', type: 'text/plain', bytes: TEXT });
      assert.equal(upload.status, 303, upload.body.toString());
      const state = new URL(String(upload.headers.location)).searchParams.get('state')!;
      return get(`/bank-chosen?${new URLSearchParams({ issuer_url: issuer, state })}`, cookie);
    };
    const before = await signDocCalls();
    for (const issuer of ['https://127.0.0.1:9/no-bank', 'not a URL']) {
      const res = await select(issuer);
      const page = res.body.toString();
      assert.equal(res.status, 400, page);
      assert.match(page, /<h1>Unknown bank<\/h1>/);
      assert.ok(page.includes(`The platform knows no bank at ${issuer}. Nothing was signed.`), page);
      assert.doesNotMatch(page, /The signing failed/);
    }
    const second = env.sandbox.banks.find((b) => b.bic === SECOND_BANK_BIC)!;
    env.sandbox.controls.setIdpStatus('inactive', SECOND_BANK_BIC);
    try {
      const res = await select(second.issuer);
      assert.equal(res.status, 400, res.body.toString());
      assert.match(res.body.toString(), /<h1>Bank not active<\/h1>/);
    } finally {
      env.sandbox.controls.setIdpStatus('active', SECOND_BANK_BIC);
    }
    assert.equal(await signDocCalls(), before);
  });
});

describe('demo RP log', () => {
  it('names the signings, never a document nor a token', () => {
    const events = logLines.map((l) => (JSON.parse(l) as { event?: string }).event);
    assert.ok(events.includes('demo_rp.upload') && events.includes('demo_rp.signed'), 'the demo RP logs its steps');
    const all = logLines.join('\n');
    assert.ok(!all.includes(TEXT.toString('utf8').trim()), 'no document content in the log');
    assert.ok(!/eyJ[A-Za-z0-9_-]{10,}\.eyJ/.test(all), 'no JWT (access token) in the log');
  });
});
