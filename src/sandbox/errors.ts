/**
 * Protocol errors of the sandbox: one class carrying HTTP status, OAuth error code and a public
 * description, and the express error handler that renders them as JSON {error, error_description}.
 * Anything unexpected becomes 500 server_error; no stack trace ever leaves the process.
 */
import type { NextFunction, Request, Response } from 'express';

export class OAuthError extends Error {
  override name = 'OAuthError';
  constructor(
    readonly status: number,
    readonly error: string,
    readonly description: string,
  ) {
    super(`${error}: ${description}`);
  }
}

export const invalidRequest = (description: string, status = 400): OAuthError =>
  new OAuthError(status, 'invalid_request', description);
export const invalidDetails = (description: string): OAuthError =>
  new OAuthError(400, 'invalid_authorization_details', description);
export const accessDenied = (description: string): OAuthError => new OAuthError(400, 'access_denied', description);
export const invalidClient = (description: string): OAuthError => new OAuthError(401, 'invalid_client', description);
export const invalidGrant = (description: string): OAuthError => new OAuthError(400, 'invalid_grant', description);
export const unableToMeet = (description: string): OAuthError =>
  new OAuthError(400, 'unable_to_meet_service_requirements', description);
export const notFound = (description: string): OAuthError => new OAuthError(404, 'not_found', description);

/** body-parser errors carry an HTTP status and a type. */
function fromBodyParser(err: unknown): OAuthError | undefined {
  const e = err as { status?: unknown; type?: unknown };
  if (typeof e?.status !== 'number' || typeof e.type !== 'string') return undefined;
  if (e.status === 413) return invalidRequest('request body too large', 413);
  if (e.status === 415) return invalidRequest('unsupported content type or charset', 415);
  return e.status >= 400 && e.status < 500 ? invalidRequest('malformed request body') : undefined;
}

export function sendError(res: Response, err: OAuthError): void {
  res
    .status(err.status)
    .set('Cache-Control', 'no-store')
    .json({ error: err.error, error_description: err.description });
}

export function errorHandler(err: unknown, _req: Request, res: Response, _next: NextFunction): void {
  const known = err instanceof OAuthError ? err : fromBodyParser(err);
  if (known) {
    sendError(res, known);
    return;
  }
  // only the message: never a stack, a token or a request body
  console.error(`sandbox: internal error: ${err instanceof Error ? err.message : String(err)}`);
  sendError(res, new OAuthError(500, 'server_error', 'internal error'));
}

export function notFoundHandler(req: Request, res: Response): void {
  sendError(res, notFound(`no route ${req.method} ${req.path}`));
}
