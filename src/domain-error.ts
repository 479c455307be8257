/**
 * What went wrong inside the QTSP, in its own terms: thrown by the modules that build signatures, time-stamps and
 * revocation data and that keep billing records. They do not know how they are called; the HTTP layer alone
 * turns a kind into an answer (`http/answers.ts`, one table), as it turns everything else.
 */
export const DOMAIN_ERROR_KINDS = [
  /** the request asks for a format, level, hash or signature algorithm we do not offer, or spells one wrongly */
  'not_offered',
  /** a service the signature needs (time-stamping, revocation) is not configured */
  'not_configured',
  /**
   * a certificate of the signature has no issuer among the ones we know: an external TSA's token names a
   * certificate that tsa.chainFile (checked at start) does not lead to, e.g. after that TSA changed its CA
   */
  'incomplete_chain',
  /** the time-stamping authority could not be reached or answered with an HTTP error */
  'tsa_unavailable',
  /** the time-stamping authority did not answer in time */
  'tsa_timeout',
  /** the time-stamping authority answered and granted no token (RFC 3161 PKIStatus) */
  'tsa_refused',
  /** the time-stamping authority's answer is malformed, or stamps another imprint or nonce than ours */
  'tsa_bad_token',
  /** no OCSP response or CRL issued after the signature's time-stamp can be given */
  'revocation_unavailable',
  /** the time-stamp is dated ahead of our clock: no revocation data issued after it exists yet */
  'timestamp_ahead',
  /** our store of issued certificates failed (OCSP status, CRL entries) */
  'certificate_store_unavailable',
  /** our store of evidence and billing records failed */
  'evidence_store_unavailable',
] as const;

export type DomainErrorKind = (typeof DOMAIN_ERROR_KINDS)[number];

export class DomainError extends Error {
  override name = 'DomainError';
  constructor(
    readonly kind: DomainErrorKind,
    message: string,
    /** what went wrong in our terms (addresses, errno): for the log only */
    readonly detail?: string,
  ) {
    super(message);
  }
}
