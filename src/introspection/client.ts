/**
 * Token introspection at the SAD's AS (spec 2.11, 5.8, 5.9): POST client_id + token over mutual TLS with our
 * own client certificate, Accept application/jwt; the answer is a signed JWT, which we verify (trust/jwt.ts:
 * RS256 with the AS's key by kid, then active, iss, aud == our qtsp_id, exp/iat, client_id) and keep verbatim
 * as evidence with the source that vouched for the key.
 */
import { badGateway, gatewayTimeout, unauthorized, type SignDocError } from '../errors.ts';
import { TrustSourceError, type AuthorizationServers, type ResolvedKey } from '../trust/authorization-servers.ts';
import { verifyJwt, type JwtFailure } from '../trust/jwt.ts';
import type { ValidatedSad } from '../trust/sad.ts';
import { httpRequest, HttpTimeoutError, type HttpAgent as Agent, type HttpResponse } from '../util/http-client.ts';

export interface IntrospectionContext {
  readonly qtspId: string;
  readonly servers: AuthorizationServers;
  readonly agent: Agent;
  readonly timeoutMs: number;
  readonly clockSkewSeconds: number;
  readonly now?: () => number;
}

/** The flat payload of spec 2.11 (claims we rely on; the AS may send more). */
export interface IntrospectionPayload {
  readonly active: true;
  readonly iss: string;
  readonly aud: string | string[];
  readonly iat: number;
  readonly exp: number;
  readonly sub?: string;
  readonly client_id: string;
  readonly client_state?: string;
  readonly cnf?: { 'x5t#S256'?: string };
  readonly txn?: string;
  readonly acr?: string;
  readonly verified_claims?: { claims?: Record<string, unknown>; verification?: unknown };
  readonly authorization_details?: unknown;
  readonly [claim: string]: unknown;
}

export interface Introspection {
  /** the signed response exactly as received (evidence, spec 5.13) */
  readonly jwt: string;
  readonly payload: IntrospectionPayload;
  /** which source vouched for the AS key that signed it: "archive <commit>" or "jwks_uri" */
  readonly keySource: string;
}

/** The AS's introspection_endpoint from its metadata (RFC 8414). */
async function endpointOf(issuer: string, ctx: IntrospectionContext): Promise<string> {
  try {
    return (await ctx.servers.getMetadata(issuer)).introspection_endpoint;
  } catch (err) {
    if (err instanceof TrustSourceError)
      throw badGateway(
        'the authorization server could not be reached (its metadata is unavailable)',
        `AS metadata of ${issuer}: ${err.message}`,
      );
    throw err;
  }
}

/** spec 5.8: POST client_id and token, asking for the signed form of the answer. */
async function post(endpoint: string, sad: ValidatedSad, ctx: IntrospectionContext): Promise<HttpResponse> {
  try {
    return await httpRequest(endpoint, {
      method: 'POST',
      agent: ctx.agent,
      timeoutMs: ctx.timeoutMs,
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/jwt' },
      body: new URLSearchParams({ client_id: ctx.qtspId, token: sad.token }).toString(),
      maxResponseBytes: 256 * 1024,
      repeatOnStaleSocket: true, // introspection is a read: safe to send again
    });
  } catch (err) {
    if (err instanceof HttpTimeoutError)
      throw gatewayTimeout(`token introspection at the AS did not answer within ${ctx.timeoutMs} ms`);
    throw badGateway(
      'the authorization server could not be reached for token introspection',
      `introspection at ${endpoint}: ${(err as Error).message}`,
    );
  }
}

/** The body of a 200 answer typed as a JWT (spec 2.11); anything else is the AS's failure, a 502. */
function signedAnswer(res: HttpResponse): string {
  if (res.status === 401) throw badGateway('the AS refused our client authentication at token introspection');
  if (res.status !== 200) throw badGateway(`token introspection at the AS answered HTTP ${res.status}`);
  const type = String(res.headers['content-type'] ?? '')
    .split(';')[0]!
    .trim()
    .toLowerCase();
  if (type !== 'application/jwt' && type !== 'application/token-introspection+jwt') {
    throw badGateway(`token introspection answered ${type || 'no content type'}, not a signed JWT`);
  }
  return res.body.toString('utf8').trim();
}

async function call(sad: ValidatedSad, ctx: IntrospectionContext): Promise<string> {
  const endpoint = await endpointOf(sad.issuer, ctx);
  return signedAnswer(await post(endpoint, sad, ctx));
}

const NOT_A_JWT = 'token introspection answered something that is not a JWT';
const NOT_RS256 = 'introspection response is not an RS256 JWT with a kid';
const IAT = 'introspection response iat is missing or in the future';
const EXP = 'introspection response exp is missing or in the past';

/** The error of each JWT check: 502 when the AS answered no JWT at all, else 401. */
const REFUSED: Record<JwtFailure, () => SignDocError> = {
  'not-compact': () => badGateway(NOT_A_JWT),
  header: () => badGateway(NOT_A_JWT),
  alg: () => unauthorized(NOT_RS256),
  crit: () => unauthorized(NOT_RS256),
  kid: () => unauthorized(NOT_RS256),
  'unknown-kid': () => unauthorized('introspection response is signed with a key the AS does not publish'),
  signature: () => unauthorized('introspection response signature does not verify'),
  claims: () => unauthorized('introspection response payload is not a JSON object'),
  'no-iat': () => unauthorized(IAT),
  'iat-in-future': () => unauthorized(IAT),
  'no-exp': () => unauthorized(EXP),
  expired: () => unauthorized(EXP),
};

/** The key of the SAD's issuer with this kid; an unreachable key source is a 502. */
async function asKey(issuer: string, kid: string, ctx: IntrospectionContext): Promise<ResolvedKey | undefined> {
  try {
    return await ctx.servers.resolveKey(issuer, kid);
  } catch (err) {
    if (err instanceof TrustSourceError)
      throw badGateway(
        'the signing keys of the authorization server could not be obtained',
        `keys of ${issuer}: ${err.message}`,
      );
    throw err;
  }
}

/** spec 5.9: the AS says the SAD is active, the answer is the SAD issuer's, and it is addressed to us (aud). */
function checkAddressing(p: Record<string, unknown>, issuer: string, qtspId: string): void {
  if (p.active !== true) throw unauthorized('the AS reports the SAD as not active');
  if (p.iss !== issuer) throw unauthorized('introspection response iss is not the SAD issuer');
  const aud = p.aud;
  if (!(aud === qtspId || (Array.isArray(aud) && aud.includes(qtspId)))) {
    throw unauthorized('introspection response is not addressed to this QTSP (aud)');
  }
}

function checkClient(p: Record<string, unknown>): void {
  if (typeof p.client_id !== 'string' || p.client_id === '')
    throw unauthorized('introspection response names no client_id');
}

/** Which source vouched for the key: "archive <commit>" or "jwks_uri". */
function keySourceOf(resolved: ResolvedKey): string {
  return resolved.source === 'archive' ? `archive ${resolved.commit ?? ''}`.trim() : resolved.source;
}

/** Verifies a signed introspection response of `issuer` (also used to re-check stored evidence). */
export async function verifyIntrospectionResponse(
  jwt: string,
  issuer: string,
  ctx: IntrospectionContext,
): Promise<Introspection> {
  const { claims, key } = await verifyJwt(jwt, {
    afterSignature: [(p) => checkAddressing(p, issuer, ctx.qtspId), 'time', checkClient], // spec 5.9
    resolveKey: (kid) => asKey(issuer, kid, ctx),
    skewSeconds: ctx.clockSkewSeconds,
    now: ctx.now,
    reject: (failure) => REFUSED[failure](),
  });
  return { jwt, payload: claims as IntrospectionPayload, keySource: keySourceOf(key) };
}

export async function introspect(sad: ValidatedSad, ctx: IntrospectionContext): Promise<Introspection> {
  return verifyIntrospectionResponse(await call(sad, ctx), sad.issuer, ctx);
}
