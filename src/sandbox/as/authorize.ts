/**
 * GET /authorize?client_id&request_uri (spec 4.3): only pushed requests are accepted; a traditional
 * authorization request is answered 400 JSON (spec 9: non-PAR requests must be rejected). The sandbox
 * bank authenticates and consents for the test user at once, then redirects with code, iss and state
 * (spec 5.11), or with error unable_to_meet_service_requirements when the user's data is insufficient (7.3).
 */
import type { Request, Response } from 'express';
import { accessDenied, invalidRequest, OAuthError } from '../errors.ts';
import { defaultUser, TEST_USERS, type TestUser } from '../users.ts';
import { resolveClaimNames } from './claims.ts';
import type { AsContext } from './context.ts';
import type { PushedRequest } from './model.ts';
import { CODE_TTL_SECONDS, randomId } from './store.ts';

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

function redirectTo(res: Response, redirectUri: string, params: Record<string, string | undefined>): void {
  const url = new URL(redirectUri);
  for (const [key, value] of Object.entries(params)) if (value !== undefined) url.searchParams.append(key, value);
  res.status(302).set('Location', url.toString()).end();
}

export function authorizeHandler(ctx: AsContext) {
  return (req: Request, res: Response): void => {
    const pushed = pushedRequest(ctx, req);
    const client = ctx.clients.get(pushed.clientId);
    if (!client || client.registration.state === 'inactive') throw accessDenied('the client is inactive');
    const user: TestUser = (pushed.loginHint && TEST_USERS.get(pushed.loginHint)) || defaultUser();
    const qtsp = ctx.directory.activeQtsp(pushed.sign.qtspId);
    const iss = ctx.urls.issuer;
    let claimNames: string[];
    try {
      if (!qtsp) throw accessDenied('the QTSP is no longer active');
      claimNames = resolveClaimNames(qtsp, client.registration, pushed.sign.identityClaims, user);
    } catch (err) {
      if (!(err instanceof OAuthError)) throw err;
      redirectTo(res, pushed.redirectUri, {
        error: err.error,
        error_description: err.description,
        state: pushed.state,
        iss,
      });
      return;
    }
    const code = randomId();
    ctx.store.codes.set(code, { ...pushed, sub: user.sub, claimNames }, CODE_TTL_SECONDS * 1000);
    redirectTo(res, pushed.redirectUri, { code, state: pushed.state, iss });
  };
}
