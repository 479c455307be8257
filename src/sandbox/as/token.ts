/**
 * POST /token (spec 2.9, 2.10, 5.4, 5.5): form body, mTLS client authentication, grant_type
 * authorization_code, the code issued to this client, the same redirect_uri, PKCE S256. The access token is
 * an RS256 JWT bound to the certificate of this connection (cnf x5t#S256); it carries no personal data, only
 * a jti under which the AS finds the transaction at introspection. A code redeemed twice revokes that token.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request, Response } from 'express';
import { invalidGrant, invalidRequest, OAuthError } from '../errors.ts';
import { peerFingerprint } from '../tls.ts';
import { authenticateRp, isServed } from './client-auth.ts';
import type { AsContext } from './context.ts';
import { Form } from './form.ts';
import { signJwt } from './jwt.ts';
import type { AuthorizationCode } from './model.ts';
import { randomId } from './store.ts';

/** RFC 7636 section 4.1: 43 to 128 unreserved characters. */
const CODE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

function s256(verifier: string): Buffer {
  return Buffer.from(createHash('sha256').update(verifier, 'ascii').digest('base64url'));
}

/** RFC 7636 section 4.6; a verifier without a challenge is refused too (PKCE downgrade). */
function checkPkce(code: AuthorizationCode, verifier: string | undefined): void {
  if (code.codeChallenge === undefined) {
    if (verifier !== undefined)
      throw invalidGrant('code_verifier sent, but the authorization request had no code_challenge');
    return;
  }
  if (verifier === undefined || !CODE_VERIFIER.test(verifier))
    throw invalidGrant('code_verifier is missing or malformed');
  const expected = Buffer.from(code.codeChallenge);
  const actual = s256(verifier);
  if (expected.length !== actual.length || !timingSafeEqual(expected, actual))
    throw invalidGrant('code_verifier does not match code_challenge');
}

/**
 * RFC 6749 section 4.1.3, RFC 7636 section 4.6: the code issued to this client, the same redirect_uri, PKCE.
 * Checked before the code is touched: a refused attempt (another client's above all) leaves it usable by the
 * client it was issued to.
 */
function checkedCode(ctx: AsContext, form: Form, clientId: string): AuthorizationCode {
  const code = ctx.store.codes.get(form.require('code'));
  // one message for both: another client must not learn whether a code it holds is live
  if (!code || code.clientId !== clientId) throw invalidGrant('code is unknown, expired, or not issued to this client');
  if (form.get('redirect_uri') !== code.redirectUri)
    throw invalidGrant('redirect_uri differs from the authorization request');
  checkPkce(code, form.get('code_verifier'));
  return code;
}

/**
 * The code, used once (spec 5.4): marked with the jti of the access token it buys. A second redemption that
 * passes the checks is refused and revokes that token (RFC 6749 section 4.1.2); another client's attempt never
 * gets this far, so it cannot revoke a token it was not issued. Synchronous from lookup to mark, so two
 * concurrent redemptions cannot both pass.
 */
function redeemCode(ctx: AsContext, form: Form, clientId: string, jti: string): AuthorizationCode {
  const code = checkedCode(ctx, form, clientId);
  if (code.redeemedAs !== undefined) {
    ctx.store.transactions.delete(code.redeemedAs);
    throw invalidGrant('code was already used; the access token issued with it is revoked');
  }
  code.redeemedAs = jti;
  return code;
}

export function tokenHandler(ctx: AsContext) {
  return async (req: Request, res: Response): Promise<void> => {
    const form = Form.of(req);
    const client = authenticateRp(ctx, form, req);
    if (!isServed(client)) throw new OAuthError(400, 'unauthorized_client', 'the client is inactive');
    if (form.get('grant_type') !== 'authorization_code') {
      if (form.get('grant_type') === undefined) throw invalidRequest('parameter grant_type is missing');
      throw new OAuthError(400, 'unsupported_grant_type', 'grant_type must be authorization_code');
    }
    const jti = randomId();
    const code = redeemCode(ctx, form, client.registration.clientId, jti);
    const now = Math.floor(Date.now() / 1000);
    const exp = now + ctx.tokenLifetimeSeconds;
    ctx.store.transactions.set(
      jti,
      {
        txn: randomId(16),
        clientId: code.clientId,
        sub: code.sub,
        sign: code.sign,
        claimNames: code.claimNames,
        verifiedAt: now,
      },
      (ctx.tokenLifetimeSeconds + 60) * 1000,
    );
    const accessToken = await signJwt(
      ctx.keys,
      { iss: ctx.urls.issuer, cnf: { 'x5t#S256': peerFingerprint(req.socket) }, iat: now, exp, jti },
      { typ: 'JWT' },
    );
    res
      .status(200)
      .set('Cache-Control', 'no-store')
      .type('application/json;charset=UTF-8')
      .send(
        JSON.stringify({
          access_token: accessToken,
          token_type: 'bearer',
          expires_in: ctx.tokenLifetimeSeconds,
          authorization_details: code.sign.details,
        }),
      );
  };
}
