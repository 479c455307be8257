/**
 * The status page of the operations listener (GET /) in a real browser (Debian's chromium, playwright-core),
 * served by a running `qtsp serve` on a clock libfaketime can move: every part rendered for a healthy service
 * that signed, sealed and audited (readiness, the calendar's bars, the journal, the deliveries, signDoc of the
 * last hour), then for the same service with the clock moved past an object's end (not ready, the object shown
 * as ended). Nothing runs on the page and nothing loads from elsewhere (CSP), checked by the browser itself.
 * Screenshots go under screenshotDir(), their paths printed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, screenshotDir } from '../helpers/browser.ts';
import { sha256b64 } from '../helpers/delivery.ts';
import { startServeFleet, type ServeFleet, type ServeProcess } from '../helpers/instances.ts';
import { MovedClock, readinessWhen } from '../helpers/moved-clock.ts';
import { eventually } from '../helpers/prometheus.ts';
import { signThroughSandbox } from '../helpers/signing.ts';

const SIGNINGS = 3;

let dir: string;
let clock: MovedClock;
let fleet: ServeFleet;
let serve: ServeProcess;
let browser: Browser;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'qtsp-status-page-'));
  clock = new MovedClock(dir);
  fleet = await startServeFleet();
  serve = await fleet.spawn(
    fleet.instanceEnv('status', {
      extra: {
        ...clock.env(),
        QTSP_JOURNAL_SEAL_INTERVAL_SECONDS: '1',
        QTSP_JOURNAL_AUDIT_INTERVAL_SECONDS: '2',
        QTSP_LOG_LEVEL: 'warn',
      },
    }),
  );
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await fleet?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const metric = async (name: string): Promise<number | undefined> => {
  const text = await (await fetch(`${serve.opsUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
};

/** the page in a fresh context; CSP violations and page errors collected */
async function open(name: string): Promise<{ page: Page; problems: string[]; text: (id: string) => Promise<string> }> {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  const res = await page.goto(`${serve.opsUrl}/`);
  assert.equal(res?.status(), 200);
  const headers = res!.headers();
  assert.match(headers['content-security-policy'] ?? '', /^default-src 'none'; style-src 'sha256-/);
  assert.equal(headers['content-type'], 'text/html; charset=utf-8');
  const path = join(screenshotDir(), `status-page-${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log('screenshot:', path);
  return { page, problems, text: async (id) => (await page.locator(`#${id}`).textContent()) ?? '' };
}

describe('the status page in chromium', () => {
  it('a healthy service: ready, the calendar bars, the journal sealed and audited, deliveries, the last hour', async () => {
    for (let i = 0; i < SIGNINGS; i++) {
      const r = await signThroughSandbox(fleet.shared, [sha256b64(`status page ${i}`)], {
        signDocUrl: serve.signDocUrl,
      });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
    await eventually('a batch sealed and a clean audit after it', 60_000, async () =>
      (await metric('qtsp_journal_last_batch_number'))! >= 1 && (await metric('qtsp_journal_audit_clean')) === 1
        ? true
        : undefined,
    );
    const { page, problems, text } = await open('healthy');
    assert.match(await text('readiness'), /^Readiness\s*ready/);
    const objects = await page.locator('#calendar svg g.object').count();
    assert.ok(objects >= 5, `${objects} calendar objects`);
    // the bars' colours come from SVG attributes: the style CSP does not apply to them, so the browser drew them
    const fills = await page
      .locator('#calendar svg g.object rect')
      .evaluateAll((rects) => rects.map((r) => getComputedStyle(r).fill));
    assert.ok(fills.includes('rgb(46, 125, 50)'), `later than 90 days is green: ${fills.join(', ')}`);
    const journal = await text('journal');
    assert.match(journal, /last batch\s*\d+, sealed \d{4}-/);
    assert.match(journal, /unsealed entries\s*\d+/);
    assert.match(journal, /second TSA\s*off/);
    assert.match(journal, /last audit\s*clean,\s*\d{4}-/);
    assert.match(await text('deliveries'), /mediation/);
    const signDoc = await text('signdoc');
    assert.match(signDoc, new RegExp(`answers\\s*${SIGNINGS} \\(200: ${SIGNINGS}\\)`));
    assert.match(signDoc, /p50 \/ p90 \/ p99\s*≤ [\d.]+ s/);
    // the style block applied (CSP allowed it by hash), no script on the page, no violation reported
    assert.equal(await page.locator('#readiness p.ok').evaluate((p) => getComputedStyle(p).fontWeight), '600');
    assert.equal(await page.evaluate(() => document.scripts.length), 0);
    assert.deepEqual(problems, []);
  });

  it('an expired object (clock moved past its end): not ready, the object ended, in dark red', async () => {
    const days = (await (await fetch(`${serve.opsUrl}/metrics`)).text())
      .split('\n')
      .filter((l) => l.startsWith('qtsp_pki_days_left{') && l.includes('renewed_by="ceremony"'))
      .map((l) => ({ object: /object="([^"]+)"/.exec(l)![1]!, days: Number(l.split(' ').at(-1)) }))
      .sort((a, b) => a.days - b.days);
    const soonest = days[0]!;
    clock.set(Math.ceil(soonest.days) + 2);
    await readinessWhen(
      serve,
      (r) => r.reasons.some((reason) => reason.startsWith('expired:')),
      'names an expired object',
    );
    const { page, problems, text } = await open('expired');
    const readiness = await text('readiness');
    assert.match(readiness, /not ready/);
    assert.match(readiness, /expired: /);
    const row = page.locator(`#calendar svg g.object[data-object="${soonest.object}"]`);
    assert.match(await row.innerHTML(), /days \(ended\)/);
    assert.equal(await row.locator('rect').evaluate((r) => getComputedStyle(r).fill), 'rgb(92, 10, 10)');
    assert.deepEqual(problems, []);
  });
});
