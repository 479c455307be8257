/**
 * How the mutual-TLS port answers, on the signDoc path and on every other route alike: JSON bodies, the 401 of a
 * connection without a client certificate, and the one mapping of a failure to an answer: the error body of
 * ETSI TS 119 432 clause 7.24.2 ({error, error_description}), never a stack trace.
 */
import type * as http from 'node:http';
import { DomainError, type DomainErrorKind } from '../domain-error.ts';
import { badRequest, SignDocError, unauthorized, type SignDocErrorCode } from '../errors.ts';
import type { Logger } from '../util/logger.ts';

export function sendJson(
  res: http.ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: unknown,
): void {
  sendJsonText(res, status, headers, JSON.stringify(body), 'utf8');
}

/** `encoding` latin1 only for text that is ASCII (a signDoc answer): the same bytes, encoded faster */
export function sendJsonText(
  res: http.ServerResponse,
  status: number,
  headers: Record<string, string>,
  text: string,
  encoding: 'utf8' | 'latin1',
): void {
  const json = Buffer.from(text, encoding); // encoded once: its length and the bytes sent
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': json.length,
  });
  res.end(json);
}

const NO_CERTIFICATE = unauthorized(
  'no TLS client certificate was presented; this port requires mutual TLS (spec 4.5)',
).toBody();

/**
 * Every path of the mutual-TLS port needs a client certificate (spec 4.5: signDoc is called over mTLS).
 * Refused before anything reads the body, with `connection: close` so an unread body is never parsed as a next
 * request. Not at the handshake: Node offers no hook to require a certificate without also chain-validating it,
 * and RPs' certificates are self-signed; a 401 also tells the RP what is missing. A validator without one
 * fetches OCSP, CRLs, CA certificates and time-stamps from the plain-HTTP publication server.
 */
export function refuseWithoutCertificate(res: http.ServerResponse): void {
  sendJson(
    res,
    401,
    { 'cache-control': 'no-store', connection: 'close', 'www-authenticate': 'mutual-tls' },
    NO_CERTIFICATE,
  );
}

/**
 * A client that went away mid-request (disconnect during the body, or cut by server.requestTimeoutMs): not our
 * error and nobody to answer. A body reader reports it as `request.aborted`; a socket error can surface too.
 */
export function isClientAbort(err: unknown, req: http.IncomingMessage): boolean {
  const { type, code } = err as { type?: string; code?: string };
  return (
    type === 'request.aborted' ||
    code === 'ECONNRESET' ||
    code === 'ECONNABORTED' ||
    code === 'ERR_STREAM_PREMATURE_CLOSE' ||
    req.socket.destroyed
  );
}

/** How a domain error is answered; without `description`, the error's own message is the description. */
export interface DomainAnswer {
  readonly status: number;
  readonly error: SignDocErrorCode;
  readonly description?: string;
}

/**
 * The one table from what went wrong inside (domain-error.ts) to what the relying party is told (spec 7.5).
 * Our own stores failing is 503 (nothing is returned, a retry may succeed); an upstream (the TSA, the revocation
 * data a signature needs, a TSA certificate whose issuer we lack) is 502 or 504; what we do not offer is 400; a
 * service we lack is our fault, 500.
 */
export const DOMAIN_ANSWERS: { readonly [K in DomainErrorKind]: DomainAnswer } = {
  not_offered: { status: 400, error: 'invalid_request' },
  not_configured: { status: 500, error: 'server_error' },
  incomplete_chain: { status: 502, error: 'bad_gateway' },
  tsa_unavailable: { status: 502, error: 'bad_gateway' },
  tsa_timeout: { status: 504, error: 'gateway_timeout' },
  tsa_refused: { status: 502, error: 'bad_gateway' },
  tsa_bad_token: { status: 502, error: 'bad_gateway' },
  revocation_unavailable: { status: 502, error: 'bad_gateway' },
  timestamp_ahead: { status: 502, error: 'bad_gateway' },
  certificate_store_unavailable: {
    status: 503,
    error: 'temporarily_unavailable',
    description: 'the certificate store is unavailable; the signatures were not returned',
  },
  evidence_store_unavailable: {
    status: 503,
    error: 'temporarily_unavailable',
    description:
      'the evidence store is unavailable; the signatures were not returned: retry with the same SAD ' +
      '(signatures kept before the failure are returned, not made or billed again)',
  },
};

function domainAnswer(err: DomainError): SignDocError | undefined {
  if (!Object.hasOwn(DOMAIN_ANSWERS, err.kind)) return undefined;
  const answer = DOMAIN_ANSWERS[err.kind];
  return new SignDocError(answer.error, answer.description ?? err.message, {
    status: answer.status,
    ...(err.detail === undefined ? {} : { detail: err.detail }),
  });
}

/**
 * A failure as the error body says it: a domain error by DOMAIN_ANSWERS; anything else unknown is a 500 with a
 * generic description (logged with its stack, never sent).
 * Failures to read a body carry a `type` (body-parser's names, which json-body.ts uses too) and a 4xx `status`;
 * each becomes a 4xx with a clear description. Compressed bodies are refused with 415 before anything is read: a
 * signDoc body is a small JSON text that no relying-party library compresses, and inflating what an
 * unauthenticated client sends would only add CPU cost and decompression bombs.
 */
export function toSignDocError(err: unknown, logger: Logger): SignDocError {
  if (err instanceof SignDocError) return err;
  const domain = err instanceof DomainError ? domainAnswer(err) : undefined;
  if (domain) return domain;
  const { type, status } = err as { type?: string; status?: unknown };
  if (type === 'entity.parse.failed') return badRequest('the request body is not valid JSON');
  if (type === 'entity.too.large') return badRequest('the request body is too large');
  if (type === 'encoding.unsupported')
    return new SignDocError(
      'invalid_request',
      'the request body must not be compressed (Content-Encoding: identity only)',
      { status: 415 },
    );
  if (type === 'charset.unsupported') return badRequest('the request body must be UTF-8 JSON');
  // any other failure to read the body (a size that does not match Content-Length, ...): the client's fault
  if (typeof status === 'number' && status >= 400 && status < 500)
    return badRequest('the request body could not be read');
  logger.error({ event: 'http.unexpected', err }, 'unexpected error');
  return new SignDocError('server_error', 'internal error; the request was not signed');
}

/**
 * A 503 (our store failing, e.g. its primary failing over) asks the relying party to retry after this long: a
 * promotion under Patroni's defaults takes about one leader-key lifetime (docs/operations.md).
 */
export const RETRY_AFTER_SECONDS = 5;

/**
 * The one answer to a failure on the mutual-TLS port: a client abort is one line at info without a stack (an
 * unauthenticated client can cause any number of them) and no answer; upstream failures are logged with their
 * detail, which the answer never carries.
 */
export function answerFailure(err: unknown, req: http.IncomingMessage, res: http.ServerResponse, logger: Logger): void {
  if (isClientAbort(err, req)) {
    const { type, code } = err as { type?: string; code?: string };
    // express sets req.path; a request served without express has no query (its URL is the signDoc path)
    const path = (req as { path?: string }).path ?? req.url;
    logger.info(
      { event: 'http.client_aborted', method: req.method, path, reason: type ?? code },
      'client went away before its request was read',
    );
    return;
  }
  const mapped = toSignDocError(err, logger);
  if (mapped.status >= 502 && mapped.status <= 504) {
    logger.warn(
      {
        event: 'signdoc.upstream_failed',
        status: mapped.status,
        error: mapped.code,
        description: mapped.description,
        detail: mapped.detail,
      },
      'signDoc refused: a service we depend on failed',
    );
  }
  if (res.headersSent) return;
  const headers: Record<string, string> = { 'cache-control': 'no-store' };
  if (mapped.status === 415) headers['accept-encoding'] = 'identity'; // RFC 7694 section 3
  if (mapped.status === 503) headers['retry-after'] = String(RETRY_AFTER_SECONDS); // RFC 9110 section 10.2.3
  sendJson(res, mapped.status, headers, mapped.toBody());
}
