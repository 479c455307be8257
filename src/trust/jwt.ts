/**
 * The one check of the RS256 JWTs the QTSP relies on: the SAD (spec 5.7) and the AS's signed introspection
 * response (spec 2.11, 5.9). It reads the protected header (alg pinned to RS256, so no `none` and no HS*; no
 * `crit`; a `kid`), takes the key by kid from the caller's resolver (`jku`, `x5u` and `jwk` are never followed),
 * checks the signature (RFC 7515 5.2, jws.ts) and exp/iat with the clock skew (RFC 7519 4.1.4, 4.1.6).
 * Stored evidence (evidence-verify.ts) takes the header and signature steps alone (rs256Header, signedWith): its
 * key comes from the archive's history and its times are long past.
 *
 * The order of the checks is the caller's: spec 5.7 checks the SAD's claims before its signature, spec 5.9 the
 * introspection response's after it. Claims are decoded before the signature only when a step there needs
 * them; nothing they say is trusted until the signature passes. Every failure is thrown as the caller's error.
 */
import type { KeyObject } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, type JWTPayload, type ProtectedHeaderParameters } from 'jose';
import { verifyRs256 } from './jws.ts';

/** What can be wrong with the protected header. */
export type HeaderFailure =
  | 'header' // not decodable
  | 'alg' // alg is not RS256
  | 'crit' // critical header parameters: we support none (RFC 7515 4.1.11)
  | 'kid'; // no kid

/** What can be wrong with a JWT. */
export type JwtFailure =
  | 'not-compact' // not three dot-separated segments
  | 'claims' // the payload is not a JSON object
  | HeaderFailure
  | 'unknown-kid' // the resolver has no key with this kid
  | 'signature' // the signature does not verify with that key
  | 'no-exp'
  | 'no-iat'
  | 'expired' // exp is not after now - skew
  | 'iat-in-future'; // iat is after now + skew

/** The error to throw for a failure, in the caller's words (`header` when it was decoded). */
export type JwtRejection<F extends JwtFailure = JwtFailure> = (failure: F, header?: ProtectedHeaderParameters) => Error;

/** A header that passed: RS256 with a kid. */
export type Rs256Header = ProtectedHeaderParameters & { readonly alg: 'RS256'; readonly kid: string };

/** A claim check of the caller, or 'time': where exp and iat are checked in the caller's order. */
export type ClaimStep = 'time' | ((claims: JWTPayload) => void | Promise<void>);

/** What a key resolver returns: the key and whatever the caller wants to know about it (its source, say). */
export interface SigningKey {
  readonly key: KeyObject;
}

export interface JwtRules<K extends SigningKey> {
  /** claim checks on the claims as decoded, before the signature is checked (the SAD, spec 5.7) */
  readonly beforeSignature?: readonly ClaimStep[];
  /** claim checks on the signed claims (the introspection response, spec 5.9) */
  readonly afterSignature?: readonly ClaimStep[];
  /** the key with this kid, or undefined; `claims` as decoded when steps before the signature read them */
  readonly resolveKey: (kid: string, claims: JWTPayload | undefined) => Promise<K | undefined>;
  readonly skewSeconds: number;
  readonly now?: () => number;
  readonly reject: JwtRejection;
}

export interface VerifiedJwt<K extends SigningKey> {
  readonly header: Rs256Header;
  readonly claims: JWTPayload;
  /** the resolver's answer for the key that verified the signature */
  readonly key: K;
}

/** Verifies `token` by `rules`: every check passes in the caller's order, or the caller's error is thrown. */
export async function verifyJwt<K extends SigningKey>(token: unknown, rules: JwtRules<K>): Promise<VerifiedJwt<K>> {
  const before = rules.beforeSignature ?? [];
  const after = rules.afterSignature ?? [];
  if ([...before, ...after].filter((step) => step === 'time').length !== 1)
    throw new Error('JwtRules: the time claims must be checked exactly once');
  if (typeof token !== 'string' || token.split('.').length !== 3) throw rules.reject('not-compact');
  const early = before.length > 0 ? readClaims(token, rules.reject) : undefined;
  if (early) await runSteps(before, early, rules);
  const { header, key } = await checkSignature(token, early, rules);
  const claims = early ?? readClaims(token, rules.reject);
  await runSteps(after, claims, rules);
  return { header, claims, key };
}

/** The protected header, if it pins RS256, has no crit and names a kid (the checks of jwt.ts, for other users). */
export function rs256Header(token: string, reject: JwtRejection<HeaderFailure>): Rs256Header {
  let header;
  try {
    header = decodeProtectedHeader(token);
  } catch {
    throw reject('header');
  }
  if (header.alg !== 'RS256') throw reject('alg', header);
  if (header.crit !== undefined) throw reject('crit', header);
  if (typeof header.kid !== 'string') throw reject('kid', header);
  return header as Rs256Header;
}

/** Whether the RS256 signature of `token`, whose header passed rs256Header, verifies with `key` (jws.ts). */
export function signedWith(token: string, key: KeyObject): boolean {
  try {
    verifyRs256(token, key);
    return true;
  } catch {
    return false;
  }
}

function readClaims(token: string, reject: JwtRejection): JWTPayload {
  try {
    return decodeJwt(token);
  } catch {
    throw reject('claims');
  }
}

async function runSteps<K extends SigningKey>(
  steps: readonly ClaimStep[],
  claims: JWTPayload,
  rules: JwtRules<K>,
): Promise<void> {
  for (const step of steps) {
    if (step === 'time') checkTimes(claims, rules);
    else await step(claims);
  }
}

/** exp in the future and iat not, each within the clock skew; both must be numbers. */
function checkTimes<K extends SigningKey>(claims: JWTPayload, rules: JwtRules<K>): void {
  const now = Math.floor((rules.now ?? Date.now)() / 1000);
  if (typeof claims.exp !== 'number') throw rules.reject('no-exp');
  if (typeof claims.iat !== 'number') throw rules.reject('no-iat');
  if (claims.exp <= now - rules.skewSeconds) throw rules.reject('expired');
  if (claims.iat > now + rules.skewSeconds) throw rules.reject('iat-in-future');
}

async function checkSignature<K extends SigningKey>(
  token: string,
  claims: JWTPayload | undefined,
  rules: JwtRules<K>,
): Promise<{ header: Rs256Header; key: K }> {
  const header = rs256Header(token, rules.reject);
  const key = await rules.resolveKey(header.kid, claims);
  if (!key) throw rules.reject('unknown-kid', header);
  if (!signedWith(token, key.key)) throw rules.reject('signature', header);
  return { header, key };
}
