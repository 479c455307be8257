/**
 * GET /.well-known/oauth-authorization-server (spec 2.3, RFC 8414) and GET /jwks (spec 5.13: raw public
 * keys; the QTSP resolves kids through jwks_uri, spec 5.8).
 */
import type { Request, Response } from 'express';
import { OAuthError, sendError } from '../errors.ts';
import type { AsContext } from './context.ts';
import { SUPPORTED_TYPES } from './sign-details.ts';

export function metadata(issuer: string): Record<string, unknown> {
  return {
    issuer,
    pushed_authorization_request_endpoint: `${issuer}/par`,
    authorization_endpoint: `${issuer}/authorize`,
    token_endpoint: `${issuer}/token`,
    introspection_endpoint: `${issuer}/introspect`,
    jwks_uri: `${issuer}/jwks`,
    authorization_data_types_supported: [...SUPPORTED_TYPES],
    require_pushed_authorization_requests: true,
    response_types_supported: ['code'],
    grant_types_supported: ['authorization_code'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['self_signed_tls_client_auth'],
    introspection_endpoint_auth_methods_supported: ['self_signed_tls_client_auth'],
    introspection_signing_alg_values_supported: ['RS256'],
    tls_client_certificate_bound_access_tokens: true,
    authorization_response_iss_parameter_supported: true,
  };
}

export function metadataHandler(ctx: AsContext) {
  return (_req: Request, res: Response): void => {
    res.set('Cache-Control', 'no-cache').json(metadata(ctx.urls.issuer));
  };
}

export function jwksHandler(ctx: AsContext) {
  return (_req: Request, res: Response): void => {
    if (ctx.controls.jwks.mode === 'http500') {
      sendError(res, new OAuthError(500, 'server_error', 'JWKS unavailable (sandbox switch http500)'));
      return;
    }
    res.set('Cache-Control', 'no-cache').type('application/jwk-set+json').send(JSON.stringify(ctx.keys.jwks()));
  };
}
