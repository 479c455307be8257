/**
 * The demo RP's pages: the upload form, the hand-over pages on the way to the account chooser and the bank,
 * the result with its downloads and the validator's verdict, and the friendly and the error pages. Plain
 * server-rendered HTML (util/html.ts escapes every value), no script.
 */
import type { Response } from 'express';
import { OFFERED, OFFERED_LEVELS } from '../../ades/offer.ts';
import { type Html, html, isolated, sendPage } from '../../util/html.ts';
import type { SigningResult } from './sessions.ts';
import type { Check, Verdict } from './verify.ts';

export const FORMAT_NAMES: Readonly<Record<'C' | 'X' | 'P', string>> = {
  C: 'CAdES (detached CMS, .p7s)',
  X: 'XAdES (detached XML signature, .xml)',
  P: 'PAdES (signed PDF; PDF files only)',
};

const levelName = (level: string) => level.replace(/^AdES-/, '');

function formatOptions() {
  return (Object.keys(FORMAT_NAMES) as ('C' | 'X' | 'P')[]).map(
    (f) => html`<label><input type="radio" name="format" value="${f}"${f === 'C' ? html` checked` : ''}>
${FORMAT_NAMES[f]} <small>(levels ${OFFERED[f].map(levelName).join(', ')})</small></label>`,
  );
}

function levelOptions() {
  return OFFERED_LEVELS.map(
    (l) => html`<label><input type="radio" name="level" value="${l}"${l === 'AdES-B-T' ? html` checked` : ''}>
${levelName(l)}</label>`,
  );
}

/**
 * The form. `formTargets`: where its post may be redirected (the account chooser's origin): the browser
 * checks CSP form-action on redirects after a submit too.
 */
export function sendUploadPage(
  res: Response,
  o: { status?: number; error?: string; maxMb: string; formTargets: readonly string[] },
): void {
  const body = html`<h1>Sign a document</h1>
<p>A relying party of the sandbox: pick a file, a signature format and a level. You choose your bank, log in
and consent there; the QTSP signs the document's hash and an independent validator checks the result.</p>
${o.error ? html`<p class="error" role="alert">${o.error}</p>` : ''}
<form method="post" action="/sign" enctype="multipart/form-data">
<fieldset><legend>Document (up to ${o.maxMb} MB)</legend><input type="file" name="document" required></fieldset>
<fieldset><legend>Format</legend>${formatOptions()}</fieldset>
<fieldset><legend>Level</legend>${levelOptions()}</fieldset>
<button type="submit">Sign</button>
</form>`;
  sendPage(res, o.status ?? 200, { title: 'Demo relying party', formTargets: o.formTargets }, body);
}

/**
 * A page that sends the browser on to another origin (Refresh header, and a link). Not a redirect: the page
 * we come from may be another party's form, whose CSP form-action would block a redirect to a third origin.
 */
export function sendHandOver(res: Response, o: { title: string; text: string; url: string; link: string }): void {
  res.set('Refresh', `0; url=${o.url}`);
  const body = html`<h1>${o.title}</h1><p>${o.text}</p><p><a href="${o.url}">${o.link}</a></p>`;
  sendPage(res, 200, { title: o.title }, body);
}

const again = html`<p><a href="/">Sign another document</a></p>`;

/** The person stopped at the account chooser (spec 7.3: a friendly message). */
export function sendCancelled(res: Response, where: string): void {
  const body = html`<h1>You cancelled</h1>
<p>You cancelled the signing ${where}. Nothing was signed and nothing was shared with us or the QTSP.</p>${again}`;
  sendPage(res, 200, { title: 'Signing cancelled' }, body);
}

/**
 * The bank ended the login with access_denied (spec 7.3). That covers a Cancel, a page left to expire and a
 * login the bank stopped, so the page does not claim which: the bank's own words are shown beneath, as text.
 */
export function sendStoppedAtBank(res: Response, bankSaid: string | undefined): void {
  const body = html`<h1>The signing stopped at your bank</h1>
<p>Your bank ended the signing before you consented: you cancelled, its page expired, or it stopped the login.
Nothing was signed and nothing was shared with us or the QTSP.</p>
${bankSaid ? html`<p><small>Your bank said: ${isolated(bankSaid, { id: 'bank-said' })}</small></p>` : ''}${again}`;
  sendPage(res, 200, { title: 'Signing stopped at your bank' }, body);
}

/**
 * An error page. `detail` may carry another party's words (the bank's or the chooser's error_description):
 * isolated, with its bidirectional controls shown instead of acting (util/html.ts).
 */
export function sendError(res: Response, status: number, title: string, message: string, detail?: string): void {
  const body = html`<h1>${title}</h1><p class="error" role="alert">${message}</p>
${detail ? html`<p><small>${isolated(detail, { id: 'detail' })}</small></p>` : ''}${again}`;
  sendPage(res, status, { title }, body);
}

function downloads(id: string, result: SigningResult): Html[] {
  return Object.entries(result.downloads).map(
    ([kind, file]) =>
      html`<li><a href="/download/${encodeURIComponent(id)}/${kind}" download="${file.name}">${file.name}</a>
<small>(${file.bytes.length.toLocaleString('en')} bytes)</small></li>`,
  );
}

const said = (passed: boolean) => (passed ? 'PASSED' : 'FAILED');

/** One check: its name, its own verdict, the command as run and what the tool printed. */
function checkSection(check: Check, n: number): Html {
  return html`<section class="check" id="check-${n}">
<h3><span class="${check.passed ? 'check-verdict' : 'check-verdict error'}">${said(check.passed)}</span>
<span class="check-name">${check.name}</span></h3>
<p><code class="check-command">${check.command}</code></p>
<pre class="doc check-output">${check.output.trim() || '(no output)'}</pre></section>`;
}

/** The overall verdict: FAILED only when a check that applies failed (or none could run). */
function overall(v: Verdict): Html {
  const failed = v.checks.filter((c) => !c.passed);
  const summary =
    v.checks.length === 0
      ? 'no check could run'
      : failed.length === 0
        ? `every check that applies passed (${v.checks.length} of ${v.checks.length})`
        : `${failed.length} of ${v.checks.length} checks failed`;
  return html`<p class="${v.passed ? 'verdict' : 'verdict error'}" id="verdict"><strong>${said(v.passed)}</strong>:
${summary}</p>`;
}

export function sendResult(res: Response, id: string, result: SigningResult): void {
  const v = result.verdict;
  const body = html`<h1>Signed</h1>
<table><tr><th>Document</th><td>${result.fileName}</td></tr>
<tr><th>Format</th><td>${FORMAT_NAMES[result.format]}, ${levelName(result.level)}</td></tr>
<tr><th>Transaction</th><td>${result.txn}</td></tr></table>
<h2>Downloads</h2><ul>${downloads(id, result)}</ul>
<h2>Independent verification</h2>
${overall(v)}${v.checks.map((c, i) => checkSection(c, i + 1))}${again}`;
  sendPage(res, 200, { title: `Signed: ${result.fileName}` }, body);
}
