/**
 * A real browser for the page tests: Debian's `chromium` (scripts/ensure-packages.mjs installs it), driven by
 * playwright-core over CDP. Nothing is downloaded; a missing browser fails the test with the command to run.
 */
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, chromium } from 'playwright-core';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser'];

export function chromiumPath(): string {
  const found = [process.env.CHROMIUM_PATH, ...CANDIDATES].find((p): p is string => !!p && existsSync(p));
  if (!found) throw new Error('no chromium found: run `node scripts/ensure-packages.mjs test` (installs chromium)');
  return found;
}

/** A headless chromium; close it in an after hook. */
export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    // the test process may run as root in a container; chromium's sandbox needs user namespaces there
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
    timeout: 60_000,
  });
}

/** A fresh browser context that trusts the sandbox's TLS CA the way a tester's browser would after import. */
export async function sandboxContext(browser: Browser): Promise<BrowserContext> {
  // the sandbox's server certificates come from its own CA, which this throwaway profile does not know
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1000, height: 900 } });
  context.setDefaultTimeout(30_000);
  context.setDefaultNavigationTimeout(30_000);
  return context;
}

let dir: string | undefined;

/** Where the page tests write their screenshots: one temp directory per test process, printed by each test. */
export function screenshotDir(): string {
  dir ??= mkdtempSync(join(process.env.QTSP_SCREENSHOT_DIR ?? tmpdir(), 'qtsp-screens-'));
  mkdirSync(dir, { recursive: true });
  return dir;
}
