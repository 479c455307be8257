/**
 * SAD validation, in exactly the order of spec 5.7; every failure is a 401 naming the check that failed:
 *   1. iss identifies an active IDP (IDP directory, cached)
 *   2. exp is in the future and iat in the past
 *   3. cnf.x5t#S256 equals the fingerprint of the TLS client certificate of this connection
 *   4. the RS256 signature verifies with a key of the AS (jwks_uri of its metadata)
 * Decoding the claims before the signature is checked is what the spec's order requires; nothing decoded is
 * trusted or used before step 4 passes, except to decide which check fails.
 */
import { decodeJwt, decodeProtectedHeader, type JWTPayload } from 'jose';
import { unauthorized, badGateway } from '../errors.ts';
import { IdpDirectoryUnavailable, type IdpDirectory } from './idp-directory.ts';
import { TrustSourceError, type AuthorizationServers } from './authorization-servers.ts';
import { fingerprintsEqual } from './fingerprint.ts';
import { verifyRs256 } from './jws.ts';

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

function decode(token: string): JWTPayload {
  if (typeof token !== 'string' || token.split('.').length !== 3)
    throw unauthorized('SAD is not a signed JWT (compact JWS)');
  try {
    return decodeJwt(token);
  } catch {
    throw unauthorized('SAD is not a decodable JWT');
  }
}

async function checkIssuer(claims: JWTPayload, ctx: SadContext): Promise<string> {
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
  return iss;
}

function checkTimes(claims: JWTPayload, ctx: SadContext): void {
  const now = Math.floor((ctx.now ?? Date.now)() / 1000);
  if (typeof claims.exp !== 'number') throw unauthorized('SAD has no numeric exp claim');
  if (typeof claims.iat !== 'number') throw unauthorized('SAD has no numeric iat claim');
  if (claims.exp <= now - ctx.clockSkewSeconds) throw unauthorized('SAD has expired (exp is not in the future)');
  if (claims.iat > now + ctx.clockSkewSeconds) throw unauthorized('SAD iat is in the future');
}

function checkBinding(claims: JWTPayload, clientFingerprint: string): void {
  const cnf = claims.cnf as { 'x5t#S256'?: unknown } | undefined;
  const bound = cnf?.['x5t#S256'];
  if (typeof bound !== 'string') throw unauthorized('SAD has no cnf.x5t#S256 certificate binding');
  if (!fingerprintsEqual(bound, clientFingerprint)) {
    throw unauthorized('SAD is bound to another TLS client certificate (cnf.x5t#S256 does not match this connection)');
  }
}

async function checkSignature(token: string, issuer: string, ctx: SadContext): Promise<void> {
  let header;
  try {
    header = decodeProtectedHeader(token);
  } catch {
    throw unauthorized('SAD header is not decodable');
  }
  if (header.alg !== 'RS256') throw unauthorized(`SAD must be signed RS256, not ${String(header.alg)}`);
  if (header.crit !== undefined) throw unauthorized('SAD carries critical header parameters we do not support');
  if (typeof header.kid !== 'string') throw unauthorized('SAD header has no kid');
  let key;
  try {
    key = await ctx.servers.getKey(issuer, header.kid);
  } catch (err) {
    if (err instanceof TrustSourceError)
      throw badGateway('the signing keys of the SAD issuer could not be obtained', `keys of ${issuer}: ${err.message}`);
    throw err;
  }
  if (!key) throw unauthorized('SAD is signed with a key the issuer does not publish (unknown kid)');
  try {
    verifyRs256(token, key);
  } catch {
    throw unauthorized('SAD signature does not verify');
  }
}

export async function validateSad(token: string, clientFingerprint: string, ctx: SadContext): Promise<ValidatedSad> {
  const claims = decode(token);
  const issuer = await checkIssuer(claims, ctx); // 5.7 step 1
  checkTimes(claims, ctx); // step 2
  checkBinding(claims, clientFingerprint); // step 3
  await checkSignature(token, issuer, ctx); // step 4
  return { token, issuer, claims };
}
