/**
 * The account chooser of the platform (spec 2.1, 4.1, 6.1, 7.5):
 *   GET /account-chooser/?client_id&prompt&state&preselect_bic&return_bic
 *     302 to the RP's first account chooser redirect URI with issuer_url, state, selected_bic, or with error
 *     (canceled, unknown_issuer, invalid_request + error_description); or the page listing the active banks.
 *   GET /account-chooser/cookie   sandbox only: forgets the stored choice
 * A request without a usable client_id gets an HTML error page and no redirect. The selection cookie holds the
 * chosen BIC (HttpOnly, Secure, SameSite=Lax, path /account-chooser/); the page's form is a GET to the chooser
 * itself with preselect_bic, which selects a bank exactly as an RP may (so it needs no CSRF token).
 */
import { type Request, type Response, Router } from 'express';
import { cookieValue } from '../../util/cookies.ts';
import type { ClientRegistry } from '../clients.ts';
import { CHOOSER_PATH, sendChooserErrorPage, sendChooserPage, sendCookieResetPage } from './account-chooser-page.ts';
import type { IdpRecord, PlatformDirectory } from './directory.ts';

export interface AccountChooserOptions {
  readonly directory: PlatformDirectory;
  readonly clients: ClientRegistry;
}

const COOKIE = 'account_chooser_bic';
const COOKIE_OPTIONS = { httpOnly: true, secure: true, sameSite: 'lax', path: CHOOSER_PATH } as const;
const COOKIE_MAX_AGE_MS = 365 * 24 * 3600 * 1000;
/** ISO 9362: 4 letters bank, 2 letters country, 2 location, optionally 3 branch */
const BIC = /^[A-Z]{6}[A-Z0-9]{2}(?:[A-Z0-9]{3})?$/;

/** The request names no RP the chooser may answer: HTML error page, no redirect (spec 2.1 client_id). */
class ClientRefused extends Error {}

/** An error the chooser redirects to the RP (spec 2.1 response, 7.5). */
class ChooserError extends Error {
  constructor(
    readonly error: 'canceled' | 'unknown_issuer' | 'invalid_request',
    readonly description?: string,
  ) {
    super(description ?? error);
  }
}

interface ChooserClient {
  readonly clientId: string;
  readonly redirectUri: string;
}

/** The checked request (spec 2.1). */
interface ChooserRequest {
  readonly client: ChooserClient;
  readonly state: string | undefined;
  readonly selectAccount: boolean;
  readonly preselectBic: string | undefined;
  /** return_bic as sent ('true' or 'false'), for the page's form */
  readonly returnBic: string | undefined;
  readonly cancel: boolean;
}

function queryOf(req: Request): URLSearchParams {
  return new URL(req.originalUrl, 'https://platform.invalid').searchParams;
}

/** A parameter sent at most once; a repeated one is invalid_request. */
function single(query: URLSearchParams, name: string): string | undefined {
  const values = query.getAll(name);
  if (values.length > 1) throw new ChooserError('invalid_request', `parameter ${name} is repeated`);
  return values[0];
}

/** client_id: a registered RP, not inactive, with an account chooser redirect URI (spec 2.1, 3). */
function chooserClient(clients: ClientRegistry, query: URLSearchParams): ChooserClient {
  const ids = query.getAll('client_id');
  if (ids.length === 0 || ids[0] === '') throw new ClientRefused('The request names no client_id.');
  if (ids.length > 1) throw new ClientRefused('The request names client_id more than once.');
  const clientId = ids[0]!;
  const registration = clients.get(clientId)?.registration;
  if (!registration) throw new ClientRefused(`No relying party with client_id "${clientId}" is registered.`);
  if (registration.state === 'inactive') throw new ClientRefused(`The relying party "${clientId}" is inactive.`);
  const redirectUri = registration.accountChooserRedirectUris[0];
  if (!redirectUri)
    throw new ClientRefused(`The relying party "${clientId}" has no account chooser redirect URI registered.`);
  return { clientId, redirectUri };
}

/** The parameters besides client_id and state; errors go back to the RP by redirect. */
function checkedRequest(query: URLSearchParams, client: ChooserClient, state: string | undefined): ChooserRequest {
  single(query, 'state');
  const prompt = single(query, 'prompt');
  const preselectBic = single(query, 'preselect_bic');
  const returnBic = single(query, 'return_bic');
  if (prompt !== undefined && prompt !== 'select_account')
    throw new ChooserError('invalid_request', 'prompt must be select_account');
  if (prompt !== undefined && preselectBic !== undefined)
    throw new ChooserError('invalid_request', 'prompt must not be combined with preselect_bic');
  if (returnBic !== undefined && returnBic !== 'true' && returnBic !== 'false')
    throw new ChooserError('invalid_request', 'return_bic must be true or false');
  return {
    client,
    state,
    selectAccount: prompt !== undefined,
    preselectBic,
    returnBic,
    cancel: query.has('cancel'),
  };
}

/** The BIC the selection cookie holds, if it holds one. */
function storedBic(req: Request): string | undefined {
  const value = cookieValue(req, COOKIE);
  return value && BIC.test(value) ? value : undefined;
}

function redirect(res: Response, r: { client: ChooserClient; state: string | undefined }, params: object): void {
  const url = new URL(r.client.redirectUri);
  for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.append(name, value);
  if (r.state !== undefined) url.searchParams.append('state', r.state);
  res.status(302).set({ Location: url.href, 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' }).end();
}

/** Success (spec 2.1): issuer_url, state, selected_bic when asked; the cookie remembers the bank. */
function chosen(res: Response, r: ChooserRequest, idp: IdpRecord): void {
  res.cookie(COOKIE, idp.bic, { ...COOKIE_OPTIONS, maxAge: COOKIE_MAX_AGE_MS });
  redirect(res, r, { issuer_url: idp.iss, selected_bic: r.returnBic === 'true' ? idp.bic : undefined });
}

/** preselect_bic: the active bank with this BIC, else invalid_request (spec 7.5). */
function preselected(directory: PlatformDirectory, bic: string): IdpRecord {
  const idp = BIC.test(bic.toUpperCase()) ? directory.idpByBic(bic) : undefined;
  if (idp?.status !== 'active') throw new ChooserError('invalid_request', `preselect_bic ${bic} names no active bank`);
  return idp;
}

/** The stored choice, when there is one and no prompt asks for a new one: unknown or inactive -> unknown_issuer. */
function remembered(req: Request, r: ChooserRequest, directory: PlatformDirectory): IdpRecord | undefined {
  const bic = r.selectAccount ? undefined : storedBic(req);
  if (bic === undefined) return undefined;
  const idp = directory.idpByBic(bic);
  if (idp?.status !== 'active') throw new ChooserError('unknown_issuer');
  return idp;
}

/** Cancel, preselect_bic, the stored choice, or the page (spec 2.1, 7.5). */
function answer(req: Request, res: Response, r: ChooserRequest, directory: PlatformDirectory): void {
  if (r.cancel) throw new ChooserError('canceled');
  const bank = r.preselectBic !== undefined ? preselected(directory, r.preselectBic) : remembered(req, r, directory);
  if (bank) chosen(res, r, bank);
  else
    sendChooserPage(res, {
      clientId: r.client.clientId,
      ...(r.state !== undefined ? { state: r.state } : {}),
      ...(r.returnBic !== undefined ? { returnBic: r.returnBic } : {}),
      banks: directory.idps().filter((idp) => idp.status === 'active'),
      redirectTarget: formTarget(r.client.redirectUri),
    });
}

/** The CSP source of a redirect URI: its origin, or its scheme for an app's private-use scheme. */
function formTarget(uri: string): string {
  const url = new URL(uri);
  return url.origin !== 'null' ? url.origin : url.protocol;
}

function chooserHandler(o: AccountChooserOptions) {
  return (req: Request, res: Response): void => {
    const path = req.originalUrl.split('?')[0]!;
    if (!path.endsWith('/')) {
      // the cookie's path is /account-chooser/: keep every request under it
      res.redirect(301, `${path}/${req.originalUrl.slice(path.length)}`);
      return;
    }
    const query = queryOf(req);
    let client: ChooserClient;
    try {
      client = chooserClient(o.clients, query);
    } catch (err) {
      if (!(err instanceof ClientRefused)) throw err;
      sendChooserErrorPage(res, err.message);
      return;
    }
    const stateValues = query.getAll('state');
    const state = stateValues.length === 1 ? stateValues[0] : undefined;
    try {
      answer(req, res, checkedRequest(query, client, state), o.directory);
    } catch (err) {
      if (!(err instanceof ChooserError)) throw err;
      // an unusable stored choice is forgotten, so that the next visit lists the banks
      if (err.error === 'unknown_issuer') res.clearCookie(COOKIE, COOKIE_OPTIONS);
      redirect(res, { client, state }, { error: err.error, error_description: err.description });
    }
  };
}

/** GET /account-chooser/cookie (spec 4.1, sandbox only): clears the selection cookie and says so. */
function cookieResetHandler(req: Request, res: Response): void {
  const forgotten = storedBic(req);
  res.clearCookie(COOKIE, COOKIE_OPTIONS);
  sendCookieResetPage(res, forgotten);
}

/** The chooser's routes, to be mounted at /account-chooser. */
export function accountChooser(o: AccountChooserOptions): Router {
  const router = Router();
  router.get('/cookie', cookieResetHandler);
  router.get('/', chooserHandler(o));
  return router;
}
