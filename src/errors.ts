/**
 * signDoc errors (spec 7.5; ETSI TS 119 432 clause 7.24.2 error body {error, error_description}).
 * One class, one stable code per kind; handlers never build error bodies by hand. Anything unexpected is
 * masked as 500 server_error by the HTTP layer, with details only in the log.
 */
export type SignDocErrorCode =
  | 'invalid_request' // 400: the request itself is wrong (spec 2.12, 7.5)
  | 'invalid_token' // 401: SAD or consent check failed (spec 5.7, 5.9)
  | 'bad_gateway' // 502: the AS or a trust source failed
  | 'gateway_timeout' // 504: the AS did not answer in time
  | 'temporarily_unavailable' // 503: a part we depend on (the evidence store) failed; nothing was signed
  | 'server_error'; // 500: our fault; never carries details

const STATUS: Record<SignDocErrorCode, number> = {
  invalid_request: 400,
  invalid_token: 401,
  bad_gateway: 502,
  gateway_timeout: 504,
  temporarily_unavailable: 503,
  server_error: 500,
};

export class SignDocError extends Error {
  override name = 'SignDocError';
  readonly status: number;
  /**
   * What went wrong in our terms (addresses, errno, the upstream's answer): logged by the HTTP layer, never
   * sent. The description is what the relying party reads, in its terms.
   */
  readonly detail: string | undefined;
  constructor(
    readonly code: SignDocErrorCode,
    readonly description: string,
    options: { status?: number; detail?: string } = {},
  ) {
    super(`${code}: ${description}`);
    this.status = options.status ?? STATUS[code];
    this.detail = options.detail;
  }

  toBody(): { error: string; error_description: string } {
    return { error: this.code, error_description: this.description };
  }
}

export const badRequest = (description: string) => new SignDocError('invalid_request', description);
export const unauthorized = (description: string) => new SignDocError('invalid_token', description);
/** `detail`: for our log only (upstream URLs, addresses, errno); the description goes to the relying party */
export const badGateway = (description: string, detail?: string) =>
  new SignDocError('bad_gateway', description, detail === undefined ? {} : { detail });
export const gatewayTimeout = (description: string, detail?: string) =>
  new SignDocError('gateway_timeout', description, detail === undefined ? {} : { detail });
export const temporarilyUnavailable = (description: string) => new SignDocError('temporarily_unavailable', description);
