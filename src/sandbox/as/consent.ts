/**
 * The bank's login and consent flow (spec 5.10, 5.11, 7.3): GET /authorize creates a pending consent (expiring,
 * single-use CSRF token, bound to the browser by a cookie) and shows the page; POST /authorize/consent takes the
 * tester's choice. Each post must come with the browser's cookie, else it is refused (400) and changes nothing,
 * and carry the token of the page last shown; a replayed or forged form gets an HTML error page (400) and ends
 * the pending consent, nothing issued. Outcomes: code (identity, correct second factor), access_denied (Cancel,
 * at once with a friendly error_description; too many wrong factors; a page posted after its life),
 * account_selection_requested (Select another bank), unable_to_meet_service_requirements (after a page stating
 * the problem).
 */
import { timingSafeEqual } from 'node:crypto';
import type { Request, Response } from 'express';
import { cookieValue } from '../../util/cookies.ts';
import { type Html, sendPage } from '../../util/html.ts';
import { OAuthError } from '../errors.ts';
import { defaultUser, TEST_USERS, type TestUser } from '../users.ts';
import { consentPage, consentTitle, errorPage, insufficientPage, insufficientTitle } from './consent-page.ts';
import { documentViews, type IdentityView, identityView, type PartiesView, rpDisplayName } from './consent-view.ts';
import type { SpRecord } from '../platform/sp-record.ts';
import type { PlatformClient } from '../types.ts';
import type { AsContext } from './context.ts';
import type { InsufficientData, PendingConsent, PushedRequest } from './model.ts';
import { CODE_TTL_SECONDS, CONSENT_KEPT_EXPIRED_SECONDS, randomId } from './store.ts';

/** The fixed second factor of the sandbox bank, shown on its page as a hint (spec 5.10). */
export const SANDBOX_SECOND_FACTOR = '123456';
/** Wrong second factors allowed before the bank ends the login with access_denied. */
export const MAX_FACTOR_ATTEMPTS = 3;

const CANCELLED = 'You cancelled at your bank. Nothing was signed and no data was shared.';
const OTHER_BANK = 'The user chose to select another bank.';
const TOO_MANY_FACTORS = 'The second factor was entered wrongly too often; the bank ended the login.';
const GONE = 'The service or its trust service provider is no longer active at the bank.';
const BUSY = 'The bank has too many logins open at once. Nothing was signed; please try again in a few minutes.';
const EXPIRED = 'The page of the bank expired before the user answered. Nothing was signed and no data was shared.';
const FORM_REJECTED =
  'This form was already used, has expired, or is not valid. The bank has ended this login for your safety.';
const OTHER_BROWSER =
  'This form belongs to a login started in another browser, or your browser did not send the cookie of the bank. ' +
  'Finish the login in the browser where it started.';

/**
 * The cookie that binds a pending consent to the browser that loaded its page. SameSite=Lax: GET /authorize
 * arrives as a cross-site navigation from the RP, and the cookie must come with it so that a second login in the
 * same browser keeps the first one's binding; the form posts to its own origin. Path: the authorize routes only.
 */
const BROWSER_COOKIE = '__Secure-sandbox-bank-browser';
const BROWSER_COOKIE_OPTIONS = { httpOnly: true, secure: true, sameSite: 'lax', path: '/authorize' } as const;
const BROWSER_ID = /^[A-Za-z0-9_-]{43}$/;

/** The authorization response (spec 5.11, 6.1, 7.3): every redirect carries state (when sent) and iss. */
export function redirectToClient(
  res: Response,
  status: 302 | 303,
  pushed: PushedRequest,
  iss: string,
  params: Record<string, string>,
): void {
  const url = new URL(pushed.redirectUri);
  for (const [key, value] of Object.entries({ ...params, state: pushed.state, iss }))
    if (value !== undefined) url.searchParams.append(key, value);
  res.status(status).set('Location', url.toString()).end();
}

/** The code, bound to client, user, PKCE and authorization_details (spec 2.10, 3). */
export function issueCode(ctx: AsContext, pushed: PushedRequest, user: TestUser, claimNames: string[]): string {
  const code = randomId();
  ctx.store.codes.set(code, { ...pushed, sub: user.sub, claimNames }, CODE_TTL_SECONDS * 1000);
  return code;
}

/** A form the bank refuses: rendered as an HTML page (`shown`), never JSON, since a browser posted it. */
class FormRejected extends Error {
  constructor(
    reason: string,
    readonly shown = FORM_REJECTED,
  ) {
    super(reason);
  }
}

/** The browser's binding value: the one its cookie holds, or a new one. */
function browserOf(req: Request): string {
  const sent = cookieValue(req, BROWSER_COOKIE);
  return sent !== undefined && BROWSER_ID.test(sent) ? sent : randomId();
}

interface Parties {
  readonly view: PartiesView;
  readonly qtsp: SpRecord;
  readonly client: PlatformClient;
}

/** The RP and the QTSP of the request, while both are still served (spec 3, 2.13). */
function parties(ctx: AsContext, pushed: PushedRequest): Parties | undefined {
  const client = ctx.clients.get(pushed.clientId)?.registration;
  const qtsp = ctx.directory.activeQtsp(pushed.sign.qtspId);
  if (!client || client.state === 'inactive' || !qtsp) return undefined;
  const view: PartiesView = {
    bankName: ctx.bank.name,
    rp: { clientId: pushed.clientId, name: rpDisplayName(client) },
    qtsp: { name: qtsp.client_name, tosUri: qtsp.tos_uri, tosLabel: qtsp.tos_uri_label, policyUri: qtsp.policy_uri },
  };
  return { view, qtsp, client };
}

/**
 * Source expression of the redirect target for CSP form-action: chromium applies form-action to the redirect
 * that follows the post too, so the RP's redirect origin (and no other) is allowed besides 'self'.
 */
function redirectTarget(pushed: PushedRequest): string {
  const url = new URL(pushed.redirectUri);
  return url.protocol === 'https:' || url.protocol === 'http:' ? url.origin : url.protocol;
}

function pageOptions(pushed: PushedRequest, title: string) {
  return { title, formTargets: [redirectTarget(pushed)] };
}

/** Sends a page of the pending consent: the browser's binding cookie comes with each. */
function sendConsentPage(res: Response, p: PendingConsent, title: string, body: Html): void {
  res.cookie(BROWSER_COOKIE, p.browser, BROWSER_COOKIE_OPTIONS);
  sendPage(res, 200, pageOptions(p.pushed, title), body);
}

/** Shows the consent page for a pending consent, with a fresh CSRF token. */
function showConsent(ctx: AsContext, res: Response, id: string, p: PendingConsent, sub: string, error?: string): void {
  const pushed = p.pushed;
  const found = parties(ctx, pushed);
  if (!found) {
    endWithError(ctx, res, id, p, 'access_denied', GONE);
    return;
  }
  const { view, qtsp, client } = found;
  p.csrfToken = randomId();
  const body = consentPage({
    ...view,
    consentId: id,
    csrfToken: p.csrfToken,
    purpose: pushed.purpose,
    documents: documentViews(pushed.sign, qtsp),
    identities: [...TEST_USERS.values()].map((u) => identityView(qtsp, client, pushed, u)),
    selectedSub: sub,
    error,
    secondFactorHint: SANDBOX_SECOND_FACTOR,
  });
  sendConsentPage(res, p, consentTitle(view), body);
}

/**
 * GET /authorize without headless consent: a pending consent bound to this browser, and its page (spec 5.10).
 * It is kept a while after its page expired, so that a late post can still send the user back to the RP.
 */
export function startConsent(ctx: AsContext, req: Request, res: Response, pushed: PushedRequest): void {
  const id = randomId();
  const lifeMs = ctx.consentLifetimeSeconds * 1000;
  const pending: PendingConsent = {
    pushed,
    browser: browserOf(req),
    expiresAt: Date.now() + lifeMs,
    csrfToken: '',
    failedFactors: 0,
  };
  if (!ctx.store.consents.set(id, pending, lifeMs + CONSENT_KEPT_EXPIRED_SECONDS * 1000)) {
    // RFC 6749 4.1.2.1: the RP hears it, with its state, instead of the bank keeping ever more pages open
    redirectToClient(res, 302, pushed, ctx.urls.issuer, { error: 'temporarily_unavailable', error_description: BUSY });
    return;
  }
  const hinted = pushed.loginHint ? TEST_USERS.get(pushed.loginHint) : undefined;
  showConsent(ctx, res, id, pending, (hinted ?? defaultUser()).sub);
}

function endWithError(
  ctx: AsContext,
  res: Response,
  id: string,
  p: PendingConsent,
  error: string,
  description: string,
): void {
  ctx.store.consents.delete(id);
  redirectToClient(res, 303, p.pushed, ctx.urls.issuer, { error, error_description: description });
}

function tokensEqual(expected: string, actual: string): boolean {
  const a = Buffer.from(expected);
  const b = Buffer.from(actual);
  return a.length === b.length && a.length > 0 && timingSafeEqual(a, b);
}

/** The posted fields; a repeated field is a forged form. */
function postedFields(req: Request): Map<string, string> {
  const params = new URLSearchParams(typeof req.body === 'string' ? req.body : '');
  const fields = new Map<string, string>();
  for (const [key, value] of params) {
    if (fields.has(key)) throw new FormRejected(`field ${key} is repeated`);
    fields.set(key, value);
  }
  return fields;
}

/**
 * The pending consent the form belongs to. A post without the cookie of the browser that loaded the page is
 * refused before anything changes; then the CSRF token is used up here (single use).
 */
function claimPending(
  ctx: AsContext,
  req: Request,
  fields: Map<string, string>,
): { id: string; pending: PendingConsent } {
  const id = fields.get('consent_id') ?? '';
  const pending = id ? ctx.store.consents.get(id) : undefined;
  if (!pending) throw new FormRejected('unknown or expired consent');
  if (!tokensEqual(pending.browser, cookieValue(req, BROWSER_COOKIE) ?? ''))
    throw new FormRejected('posted without the cookie of the browser that loaded the page', OTHER_BROWSER);
  const valid = tokensEqual(pending.csrfToken, fields.get('csrf_token') ?? '');
  pending.csrfToken = '';
  if (!valid) {
    ctx.store.consents.delete(id);
    throw new FormRejected('CSRF token does not match');
  }
  return { id, pending };
}

/** Spec 7.3: the problem stated, and that nothing is shared, before unable_to_meet_service_requirements. */
function explainInsufficient(
  res: Response,
  id: string,
  p: PendingConsent,
  view: PartiesView,
  identity: IdentityView,
  insufficient: InsufficientData,
): void {
  p.insufficient = insufficient;
  p.csrfToken = randomId();
  // spec 7.3: the IDP logs the event with metadata (no personal data: claim names only)
  console.info(
    `sandbox bank: unable_to_meet_service_requirements for client ${p.pushed.clientId}, ` +
      `user ${identity.sub}, missing ${insufficient.missing.join(', ') || 'data'}`,
  );
  const body = insufficientPage({ ...view, consentId: id, csrfToken: p.csrfToken, identity });
  sendConsentPage(res, p, insufficientTitle(view), body);
}

/** Consent pressed: identity and second factor (spec 5.10), then the claims check (7.3, 7.4), then the code. */
function consent(ctx: AsContext, res: Response, id: string, p: PendingConsent, fields: Map<string, string>): void {
  const user = TEST_USERS.get(fields.get('identity') ?? '');
  if (!user) throw new FormRejected('no test identity chosen');
  if (!tokensEqual(SANDBOX_SECOND_FACTOR, fields.get('otp')?.trim() ?? '')) {
    p.failedFactors++;
    const left = MAX_FACTOR_ATTEMPTS - p.failedFactors;
    if (left <= 0) endWithError(ctx, res, id, p, 'access_denied', TOO_MANY_FACTORS);
    else showConsent(ctx, res, id, p, user.sub, `The second factor is wrong. ${left} attempt(s) left.`);
    return;
  }
  const found = parties(ctx, p.pushed);
  if (!found) {
    endWithError(ctx, res, id, p, 'access_denied', GONE);
    return;
  }
  const { view, qtsp, client } = found;
  const identity = identityView(qtsp, client, p.pushed, user);
  if (identity.insufficient) {
    explainInsufficient(res, id, p, view, identity, identity.insufficient);
    return;
  }
  ctx.store.consents.delete(id);
  const code = issueCode(
    ctx,
    p.pushed,
    user,
    identity.shared.map((c) => c.name),
  );
  redirectToClient(res, 303, p.pushed, ctx.urls.issuer, { code });
}

function act(ctx: AsContext, res: Response, id: string, p: PendingConsent, fields: Map<string, string>): void {
  const action = fields.get('action');
  // spec 7.3: the RP hears that the login ended, with state, rather than the user meeting a dead end
  if (Date.now() >= p.expiresAt) endWithError(ctx, res, id, p, 'access_denied', EXPIRED);
  else if (p.insufficient) {
    if (action !== 'acknowledge') throw new FormRejected('only the acknowledgement is accepted now');
    endWithError(ctx, res, id, p, 'unable_to_meet_service_requirements', p.insufficient.description);
  } else if (action === 'cancel') endWithError(ctx, res, id, p, 'access_denied', CANCELLED);
  else if (action === 'select_bank') endWithError(ctx, res, id, p, 'account_selection_requested', OTHER_BANK);
  else if (action === 'consent') consent(ctx, res, id, p, fields);
  else throw new FormRejected('unknown action');
}

/** POST /authorize/consent (form encoded, from the bank's own page). */
export function consentHandler(ctx: AsContext) {
  return (req: Request, res: Response): void => {
    let claimed: { id: string; pending: PendingConsent } | undefined;
    try {
      const fields = postedFields(req);
      claimed = claimPending(ctx, req, fields);
      act(ctx, res, claimed.id, claimed.pending, fields);
    } catch (err) {
      if (!(err instanceof FormRejected || err instanceof OAuthError)) throw err;
      if (claimed) ctx.store.consents.delete(claimed.id);
      const shown = err instanceof FormRejected ? err.shown : FORM_REJECTED;
      sendPage(res, 400, { title: 'Sandbox Bank: request not valid' }, errorPage(shown));
    }
  };
}
