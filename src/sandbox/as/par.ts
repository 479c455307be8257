/**
 * POST /par: pushed authorization request for type sign (spec 2.4, 2.8, 7.2). Steps in order: form body,
 * client authentication (mTLS), client state, response_type, redirect_uri, PKCE, authorization_details,
 * code injection protection; then a fresh request_uri bound to the client. The sandbox-only parameter
 * sandbox_consent=auto asks for headless consent instead of the bank's page.
 */
import type { Request, Response } from 'express';
import { accessDenied, invalidRequest } from '../errors.ts';
import { TEST_USERS } from '../users.ts';
import type { RegisteredClient } from '../clients.ts';
import { authenticateRp, isServed } from './client-auth.ts';
import type { AsContext } from './context.ts';
import { Form } from './form.ts';
import type { PushedRequest } from './model.ts';
import { validateSignDetails } from './sign-details.ts';
import { randomId, REQUEST_URI_TTL_SECONDS } from './store.ts';

const REQUEST_URI_PREFIX = 'urn:ietf:params:oauth:request_uri:';
/** RFC 7636 section 4.2: BASE64URL(SHA-256(verifier)) is 43 characters. */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

function checkResponseType(form: Form): void {
  if (form.get('response_type') !== 'code') throw invalidRequest('response_type must be code');
}

function checkRedirectUri(form: Form, client: RegisteredClient): string {
  const uri = form.require('redirect_uri');
  // exact string comparison (RFC 9700 2.1): no prefix, pattern or normalisation
  if (!client.registration.redirectUris.includes(uri))
    throw invalidRequest('redirect_uri is not registered for this client');
  return uri;
}

/** PKCE with S256 only (spec 2.4, 5.3). */
function checkPkce(form: Form): string | undefined {
  const challenge = form.get('code_challenge');
  const method = form.get('code_challenge_method');
  if (challenge === undefined) {
    if (method !== undefined) throw invalidRequest('code_challenge_method without code_challenge');
    return undefined;
  }
  if (method !== 'S256') throw invalidRequest('code_challenge_method must be S256');
  if (!S256_CHALLENGE.test(challenge)) throw invalidRequest('code_challenge is not an S256 challenge');
  return challenge;
}

/** Sandbox convenience: login_hint picks a test user; the default user otherwise. */
function checkLoginHint(form: Form): string | undefined {
  const hint = form.get('login_hint');
  if (hint !== undefined && !TEST_USERS.has(hint)) throw invalidRequest('login_hint names no test user');
  return hint;
}

/** Sandbox only: sandbox_consent=auto skips the bank's page (headless consent, for scripts and tests). */
function checkSandboxConsent(form: Form): boolean {
  const value = form.get('sandbox_consent');
  if (value !== undefined && value !== 'auto') throw invalidRequest('sandbox_consent accepts only the value auto');
  return value === 'auto';
}

export function parHandler(ctx: AsContext) {
  return (req: Request, res: Response): void => {
    const form = Form.of(req);
    const client = authenticateRp(ctx, form, req);
    if (!isServed(client)) throw accessDenied('the client is inactive');
    checkResponseType(form);
    const redirectUri = checkRedirectUri(form, client);
    const codeChallenge = checkPkce(form);
    const loginHint = checkLoginHint(form);
    const autoConsent = checkSandboxConsent(form);
    const sign = validateSignDetails(form.get('authorization_details'), client, ctx.directory);
    const nonce = form.get('nonce');
    // spec 2.4: for signing, neither code_challenge nor nonce is invalid_request
    if (codeChallenge === undefined && nonce === undefined)
      throw invalidRequest('signing requires PKCE (code_challenge) or nonce');
    const pushed: PushedRequest = {
      clientId: client.registration.clientId,
      redirectUri,
      sign,
      codeChallenge,
      nonce,
      state: form.get('state'),
      loginHint,
      purpose: form.get('purpose'),
      autoConsent,
    };
    const requestUri = REQUEST_URI_PREFIX + randomId();
    ctx.store.pushed.set(requestUri, pushed, REQUEST_URI_TTL_SECONDS * 1000);
    res
      .status(201)
      .set('Cache-Control', 'no-cache, no-store')
      .json({ request_uri: requestUri, expires_in: REQUEST_URI_TTL_SECONDS });
  };
}
