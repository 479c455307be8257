/**
 * SAD validation, in exactly the order of spec 5.7; every failure is a 401 naming the check that failed:
 *   1. iss identifies an active IDP (IDP directory, cached)
 *   2. exp is in the future and iat in the past
 *   3. cnf.x5t#S256 equals the fingerprint of the TLS client certificate of this connection
 *   4. the RS256 signature verifies with a key of the AS (archive or jwks_uri, authorization-servers.ts)
 * Decoding the claims before the signature is checked is what the spec's order requires; nothing decoded is
 * trusted or used before step 4 passes, except to decide which check fails. The JWT checks are jwt.ts's.
 */
import type { JWTPayload } from 'jose';
import { unauthorized, badGateway } from '../errors.ts';
import { IdpDirectoryUnavailable, type IdpDirectory } from './idp-directory.ts';
import { TrustSourceError, type AuthorizationServers, type ResolvedKey } from './authorization-servers.ts';
import { fingerprintsEqual } from './fingerprint.ts';
import { verifyJwt, type JwtFailure } from './jwt.ts';

export interface SadContext {
  readonly idps: IdpDirectory;
  readonly servers: AuthorizationServers;
  readonly clockSkewSeconds: number;
  readonly now?: () => number;
}

export interface ValidatedSad {
  readonly token: string;
  readonly issuer: string;
  readonly claims: JWTPayload;
}

/** The 401 descriptions of the JWT checks; alg names the algorithm found. */
const REFUSED: Record<Exclude<JwtFailure, 'alg'>, string> = {
  'not-compact': 'SAD is not a signed JWT (compact JWS)',
  claims: 'SAD is not a decodable JWT',
  'no-exp': 'SAD has no numeric exp claim',
  'no-iat': 'SAD has no numeric iat claim',
  expired: 'SAD has expired (exp is not in the future)',
  'iat-in-future': 'SAD iat is in the future',
  header: 'SAD header is not decodable',
  crit: 'SAD carries critical header parameters we do not support',
  kid: 'SAD header has no kid',
  'unknown-kid': 'SAD is signed with a key the issuer does not publish (unknown kid)',
  signature: 'SAD signature does not verify',
};

function refuse(failure: JwtFailure, header?: { alg?: unknown }): Error {
  if (failure === 'alg') return unauthorized(`SAD must be signed RS256, not ${String(header?.alg)}`);
  return unauthorized(REFUSED[failure]);
}

/** step 1 */
async function checkIssuer(claims: JWTPayload, ctx: SadContext): Promise<void> {
  const iss = claims.iss;
  if (typeof iss !== 'string' || iss === '') throw unauthorized('SAD has no iss claim');
  let status;
  try {
    status = await ctx.idps.status(iss);
  } catch (err) {
    if (err instanceof IdpDirectoryUnavailable) throw badGateway(err.message, err.detail);
    throw err;
  }
  if (status === 'unknown') throw unauthorized('SAD issuer is not an IDP of the IDP directory');
  if (status !== 'active') throw unauthorized('SAD issuer is not an active IDP');
}

/** step 3 */
function checkBinding(claims: JWTPayload, clientFingerprint: string): void {
  const cnf = claims.cnf as { 'x5t#S256'?: unknown } | undefined;
  const bound = cnf?.['x5t#S256'];
  if (typeof bound !== 'string') throw unauthorized('SAD has no cnf.x5t#S256 certificate binding');
  if (!fingerprintsEqual(bound, clientFingerprint)) {
    throw unauthorized('SAD is bound to another TLS client certificate (cnf.x5t#S256 does not match this connection)');
  }
}

/** step 4: the key of the issuer step 1 accepted; an unreachable key source is a 502 */
async function issuerKey(issuer: string, kid: string, ctx: SadContext): Promise<ResolvedKey | undefined> {
  try {
    return await ctx.servers.resolveKey(issuer, kid);
  } catch (err) {
    if (err instanceof TrustSourceError)
      throw badGateway('the signing keys of the SAD issuer could not be obtained', `keys of ${issuer}: ${err.message}`);
    throw err;
  }
}

export async function validateSad(token: string, clientFingerprint: string, ctx: SadContext): Promise<ValidatedSad> {
  const { claims } = await verifyJwt(token, {
    beforeSignature: [
      (c) => checkIssuer(c, ctx), // step 1
      'time', // step 2
      (c) => checkBinding(c, clientFingerprint), // step 3
    ],
    resolveKey: (kid, c) => issuerKey(String(c?.iss), kid, ctx), // step 4, c.iss checked by step 1
    skewSeconds: ctx.clockSkewSeconds,
    now: ctx.now,
    reject: refuse,
  });
  return { token, issuer: claims.iss as string, claims };
}
