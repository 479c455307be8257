/**
 * The account chooser's pages (spec 2.1, 4.1): the list of banks, the error page for a request that names no
 * usable RP, and the sandbox's cookie reset. Plain HTML forms, no script; every value escaped by util/html.ts.
 */
import type { Response } from 'express';
import { html, sendPage } from '../../util/html.ts';
import type { IdpRecord } from './directory.ts';

/** The path the chooser's form submits to (itself). */
export const CHOOSER_PATH = '/account-chooser/';

export interface ChooserView {
  readonly clientId: string;
  /** the request's state and return_bic as sent, carried through the form unchanged */
  readonly state?: string;
  readonly returnBic?: string;
  /** the active banks, bank 1 first */
  readonly banks: readonly IdpRecord[];
  /** where the chooser redirects after the form (CSP form-action also covers redirects after a submit) */
  readonly redirectTarget: string;
}

function hidden(name: string, value: string | undefined) {
  return value === undefined ? '' : html`<input type="hidden" name="${name}" value="${value}">`;
}

function bankButtons(banks: readonly IdpRecord[]) {
  if (banks.length === 0) return html`<p class="error">No bank is available right now.</p>`;
  const button = (b: IdpRecord) =>
    html`<button type="submit" name="preselect_bic" value="${b.bic}">${b.name} <small>(BIC ${b.bic})</small></button>`;
  return html`<fieldset><legend>Banks</legend>${banks.map((b) => html`${button(b)}<br>`)}</fieldset>`;
}

/**
 * The list of active banks as one GET form to the chooser itself: a bank's button sends preselect_bic (the
 * request parameter that selects a bank, spec 2.1), Cancel sends cancel.
 */
export function sendChooserPage(res: Response, view: ChooserView): void {
  const body = html`<h1>Choose your bank</h1>
<p>Which bank do you want to use with <strong>${view.clientId}</strong>?</p>
<form method="get" action="${CHOOSER_PATH}">
${hidden('client_id', view.clientId)}${hidden('state', view.state)}${hidden('return_bic', view.returnBic)}
${bankButtons(view.banks)}
<button type="submit" name="cancel" value="1">Cancel</button>
</form>`;
  sendPage(res, 200, { title: 'Account chooser', formTargets: [view.redirectTarget] }, body);
}

/** The request names no RP the chooser may redirect to: it stops here and says why (spec 2.1 client_id). */
export function sendChooserErrorPage(res: Response, reason: string): void {
  const body = html`<h1>The account chooser cannot continue</h1>
<p class="error">${reason}</p>
<p>The service that sent you here is not set up for the account chooser. Go back to it and try again later.</p>`;
  sendPage(res, 400, { title: 'Account chooser: request refused' }, body);
}

/** Sandbox only (spec 4.1): the stored bank choice is gone. */
export function sendCookieResetPage(res: Response, forgotten: string | undefined): void {
  const what = forgotten
    ? html`<p>The stored bank choice (BIC <strong>${forgotten}</strong>) is forgotten.</p>`
    : html`<p>No bank choice was stored.</p>`;
  const body = html`<h1>Account chooser cookie reset</h1>
${what}
<p>The account chooser shows the list of banks again on the next request.</p>`;
  sendPage(res, 200, { title: 'Account chooser cookie reset' }, body);
}
