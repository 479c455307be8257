/**
 * What the AS remembers between its steps: pushed requests, pending consents (the bank's page), authorization
 * codes, transactions.
 */
import type { ClaimRequest } from '../platform/sp-record.ts';

/** One entry of identity_assurance_claims (spec 2.7). */
export interface RequestedClaim {
  readonly name: string;
  readonly essential: boolean;
}

/** A validated sign request (spec 2.7). */
export interface SignAuthorization {
  /** every entry as sent: introspection returns "the entries from the PAR" (spec 2.11) */
  readonly details: readonly Record<string, unknown>[];
  readonly qtspId: string;
  /** identity_assurance_claims as sent (QESID / QID), undefined for standard QES */
  readonly requestedClaims?: Readonly<Record<string, ClaimRequest>>;
  /** the claims left after the PAR-time checks of spec 7.4 (claims to omit are dropped) */
  readonly identityClaims?: readonly RequestedClaim[];
}

/** Bindings shared by the pushed request and the code (spec 2.10, 3). */
export interface RequestBindings {
  readonly clientId: string;
  readonly redirectUri: string;
  readonly codeChallenge?: string;
  readonly nonce?: string;
  readonly sign: SignAuthorization;
}

export interface PushedRequest extends RequestBindings {
  readonly state?: string;
  readonly loginHint?: string;
  /** spec 2.4: shown to the user */
  readonly purpose?: string;
  /** sandbox_consent=auto: consent at once for the login_hint (or default) user, no page */
  readonly autoConsent: boolean;
}

/** The chosen identity lacks data the signature needs (spec 7.3): only the acknowledgement is left. */
export interface InsufficientData {
  readonly sub: string;
  /** the essential claims the identity lacks */
  readonly missing: readonly string[];
  readonly description: string;
}

/**
 * A consent page in progress, keyed by an unguessable id. Mutated in place, so its expiry stays the one set
 * when the page was first shown.
 */
export interface PendingConsent {
  readonly pushed: PushedRequest;
  /** the browser that loaded the page: the value of its binding cookie, sent back with every post */
  readonly browser: string;
  /** when the page's life ends (ms since the epoch); a later post sends the user back with access_denied */
  readonly expiresAt: number;
  /** the token the next form post must carry; replaced whenever a page is shown (single use) */
  csrfToken: string;
  /** wrong second factors so far */
  failedFactors: number;
  insufficient?: InsufficientData;
}

/**
 * A code and what it grants. Redeeming it marks it in place instead of removing it: it stays until it expires,
 * so a replay is recognised and the access token issued with it can be revoked (RFC 6749 section 4.1.2).
 */
export interface AuthorizationCode extends RequestBindings {
  readonly sub: string;
  /** claim names consented for delivery to the QTSP */
  readonly claimNames: readonly string[];
  /** once redeemed: the jti of the access token issued with it */
  redeemedAs?: string;
}

/** An issued access token, found again by its jti at introspection (spec 2.10). */
export interface Transaction {
  readonly txn: string;
  readonly clientId: string;
  readonly sub: string;
  readonly sign: SignAuthorization;
  readonly claimNames: readonly string[];
  readonly verifiedAt: number;
}
