/**
 * GET /authorize?client_id&request_uri (spec 4.3): only pushed requests are accepted; a traditional
 * authorization request is answered 400 JSON (spec 9: non-PAR requests must be rejected). The bank then shows
 * its login and consent page (consent.ts). With headless consent (the sandbox-only PAR parameter
 * sandbox_consent=auto) it consents at once for the login_hint or default test user and redirects with code,
 * iss and state (spec 5.11), or with error unable_to_meet_service_requirements when the user's data is
 * insufficient (7.3).
 */
import type { Request, Response } from 'express';
import type { RegisteredClient } from '../clients.ts';
import { accessDenied, invalidRequest, OAuthError } from '../errors.ts';
import { defaultUser, TEST_USERS, type TestUser } from '../users.ts';
import { resolveClaimNames } from './claims.ts';
import { issueCode, redirectToClient, startConsent } from './consent.ts';
import type { AsContext } from './context.ts';
import type { PushedRequest } from './model.ts';

/** Parameters that belong in the pushed request, never in the front channel. */
const INLINE_PARAMETERS = [
  'response_type',
  'redirect_uri',
  'scope',
  'state',
  'nonce',
  'code_challenge',
  'code_challenge_method',
  'authorization_details',
  'request',
  'claims',
];

function queryString(req: Request, name: string): string | undefined {
  const value = req.query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') throw invalidRequest(`query parameter ${name} is empty or repeated`);
  return value;
}

/** The pushed request behind request_uri, bound to client_id, used once (spec 2.8, 3). */
function pushedRequest(ctx: AsContext, req: Request): PushedRequest {
  const inline = INLINE_PARAMETERS.filter((p) => req.query[p] !== undefined);
  if (inline.length)
    throw invalidRequest(
      `only pushed authorization requests are accepted; send ${inline.join(', ')} to the PAR endpoint`,
    );
  const requestUri = queryString(req, 'request_uri');
  if (!requestUri) throw invalidRequest('request_uri is missing: only pushed authorization requests are accepted');
  const clientId = queryString(req, 'client_id');
  if (!clientId) throw invalidRequest('client_id is missing');
  const pushed = ctx.store.pushed.get(requestUri);
  if (!pushed || pushed.clientId !== clientId)
    throw invalidRequest('request_uri is unknown, expired, used, or not issued to this client');
  ctx.store.pushed.delete(requestUri);
  return pushed;
}

/** Headless consent (sandbox_consent=auto): the login_hint or default user consents at once. */
function autoConsent(ctx: AsContext, res: Response, pushed: PushedRequest, client: RegisteredClient): void {
  const user: TestUser = (pushed.loginHint && TEST_USERS.get(pushed.loginHint)) || defaultUser();
  const qtsp = ctx.directory.activeQtsp(pushed.sign.qtspId);
  let claimNames: string[];
  try {
    if (!qtsp) throw accessDenied('the QTSP is no longer active');
    claimNames = resolveClaimNames(qtsp, client.registration, pushed.sign.identityClaims, user);
  } catch (err) {
    if (!(err instanceof OAuthError)) throw err;
    redirectToClient(res, 302, pushed, ctx.urls.issuer, { error: err.error, error_description: err.description });
    return;
  }
  const code = issueCode(ctx, pushed, user, claimNames);
  redirectToClient(res, 302, pushed, ctx.urls.issuer, { code });
}

export function authorizeHandler(ctx: AsContext) {
  return (req: Request, res: Response): void => {
    const pushed = pushedRequest(ctx, req);
    const client = ctx.clients.get(pushed.clientId);
    if (!client || client.registration.state === 'inactive') throw accessDenied('the client is inactive');
    if (pushed.autoConsent) autoConsent(ctx, res, pushed, client);
    else if (!ctx.directory.activeQtsp(pushed.sign.qtspId)) {
      const description = 'the QTSP is no longer active';
      redirectToClient(res, 302, pushed, ctx.urls.issuer, { error: 'access_denied', error_description: description });
    } else startConsent(ctx, req, res, pushed);
  };
}
