/**
 * The demo RP's result page as a browser receives it: each check with its own name, verdict, command and
 * output, and an overall verdict that is FAILED when one check failed. The verdicts of real signatures are in
 * test/integration/demo-rp.test.ts.
 */
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import express from 'express';
import { sendResult } from '../../../../src/rp/demo/pages.ts';
import type { SigningResult } from '../../../../src/rp/demo/sessions.ts';
import type { Check } from '../../../../src/rp/demo/verify.ts';

const pdfsig: Check = {
  name: 'pdfsig: every signature in the PDF valid',
  passed: true,
  command: 'pdfsig -nssdir sql:nss signed.pdf',
  output: 'Signature Field Name: Signature1\n  - Signature Validation: Signature is Valid.',
};
const timestamp: Check = {
  name: 'openssl ts -verify: the document time-stamp',
  passed: false,
  command: 'openssl ts -verify -token_in -in timestamp-1.tsr',
  output: 'Verification: FAILED <message imprint mismatch>',
};

function result(checks: readonly Check[]): SigningResult {
  return {
    fileName: 'a.pdf',
    format: 'P',
    level: 'AdES-B-LTA',
    txn: 'txn-1',
    downloads: {},
    verdict: { passed: checks.length > 0 && checks.every((c) => c.passed), checks },
  };
}

let server: Server;
let base: string;
const shown = new Map<string, SigningResult>([
  ['failed', result([pdfsig, timestamp])],
  ['passed', result([pdfsig, { ...timestamp, passed: true, output: 'Verification: OK' }])],
  ['none', result([])],
]);

before(async () => {
  const app = express();
  app.get('/result/:id', (req, res) => sendResult(res, req.params.id, shown.get(req.params.id)!));
  server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => new Promise<void>((resolve) => server.close(() => resolve())));

async function page(id: string): Promise<string> {
  const res = await fetch(`${base}/result/${id}`);
  assert.equal(res.status, 200);
  return res.text();
}

/** The text of each element with `class` in its class list, tags stripped. */
function texts(body: string, cls: string): string[] {
  const pattern = new RegExp(`<(\\w+) class="[^"]*\\b${cls}\\b[^"]*"[^>]*>([\\s\\S]*?)</\\1>`, 'g');
  return [...body.matchAll(pattern)].map((m) => m[2]!.replace(/<[^>]+>/g, '').trim());
}

describe('demo RP result page', () => {
  it('one failed check: FAILED overall, each check with its own verdict, command and output', async () => {
    const body = await page('failed');
    assert.match(body, /<p class="verdict error" id="verdict"><strong>FAILED<\/strong>:\s*1 of 2 checks failed/);
    assert.deepEqual(texts(body, 'check-verdict'), ['PASSED', 'FAILED']);
    assert.deepEqual(texts(body, 'check-name'), [pdfsig.name, timestamp.name]);
    assert.deepEqual(texts(body, 'check-command'), [pdfsig.command, timestamp.command]);
    assert.deepEqual(texts(body, 'check-output'), [
      pdfsig.output,
      'Verification: FAILED &lt;message imprint mismatch&gt;',
    ]);
  });

  it('every check passed: PASSED overall', async () => {
    const body = await page('passed');
    assert.match(body, /<p class="verdict" id="verdict"><strong>PASSED<\/strong>:\s*every check that applies passed/);
    assert.deepEqual(texts(body, 'check-verdict'), ['PASSED', 'PASSED']);
  });

  it('no check at all: FAILED, not a silent pass', async () => {
    const body = await page('none');
    assert.match(body, /<strong>FAILED<\/strong>:\s*no check could run/);
    assert.deepEqual(texts(body, 'check-verdict'), []);
  });
});
