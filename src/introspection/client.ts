/**
 * Token introspection at the SAD's AS (spec 2.11, 5.8, 5.9): POST client_id + token over mutual TLS with our
 * own client certificate, Accept application/jwt; the answer is a signed JWT, which we verify (RS256, the
 * AS's key by kid, iss, aud == our qtsp_id, active, iat, exp) and keep verbatim as evidence.
 */
import { decodeProtectedHeader } from 'jose';
import { badGateway, gatewayTimeout, unauthorized } from '../errors.ts';
import { TrustSourceError, type AuthorizationServers } from '../trust/authorization-servers.ts';
import { verifyRs256 } from '../trust/jws.ts';
import type { ValidatedSad } from '../trust/sad.ts';
import { httpRequest, HttpTimeoutError, type HttpAgent as Agent } from '../util/http-client.ts';

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

async function call(sad: ValidatedSad, ctx: IntrospectionContext): Promise<string> {
  let endpoint;
  try {
    endpoint = (await ctx.servers.getMetadata(sad.issuer)).introspection_endpoint;
  } catch (err) {
    if (err instanceof TrustSourceError)
      throw badGateway(
        'the authorization server could not be reached (its metadata is unavailable)',
        `AS metadata of ${sad.issuer}: ${err.message}`,
      );
    throw err;
  }
  const body = new URLSearchParams({ client_id: ctx.qtspId, token: sad.token }).toString();
  let res;
  try {
    res = await httpRequest(endpoint, {
      method: 'POST',
      agent: ctx.agent,
      timeoutMs: ctx.timeoutMs,
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/jwt' },
      body,
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

async function verifySignature(
  jwt: string,
  issuer: string,
  ctx: IntrospectionContext,
): Promise<{ payload: Record<string, unknown>; keySource: string }> {
  let header;
  try {
    header = decodeProtectedHeader(jwt);
  } catch {
    throw badGateway('token introspection answered something that is not a JWT');
  }
  if (header.alg !== 'RS256' || typeof header.kid !== 'string' || header.crit !== undefined) {
    throw unauthorized('introspection response is not an RS256 JWT with a kid');
  }
  let resolved;
  try {
    resolved = await ctx.servers.resolveKey(issuer, header.kid);
  } catch (err) {
    if (err instanceof TrustSourceError)
      throw badGateway(
        'the signing keys of the authorization server could not be obtained',
        `keys of ${issuer}: ${err.message}`,
      );
    throw err;
  }
  if (!resolved) throw unauthorized('introspection response is signed with a key the AS does not publish');
  const key = resolved.key;
  let payload: unknown;
  try {
    payload = JSON.parse(verifyRs256(jwt, key).toString('utf8'));
  } catch {
    throw unauthorized('introspection response signature does not verify');
  }
  if (!payload || typeof payload !== 'object' || Array.isArray(payload))
    throw unauthorized('introspection response payload is not a JSON object');
  const keySource = resolved.source === 'archive' ? `archive ${resolved.commit ?? ''}`.trim() : resolved.source;
  return { payload: payload as Record<string, unknown>, keySource };
}

/** spec 5.9: iss and aud; active; iat not in the future; exp not in the past. */
function checkClaims(p: Record<string, unknown>, issuer: string, ctx: IntrospectionContext): IntrospectionPayload {
  if (p.active !== true) throw unauthorized('the AS reports the SAD as not active');
  if (p.iss !== issuer) throw unauthorized('introspection response iss is not the SAD issuer');
  const aud = p.aud;
  if (!(aud === ctx.qtspId || (Array.isArray(aud) && aud.includes(ctx.qtspId)))) {
    throw unauthorized('introspection response is not addressed to this QTSP (aud)');
  }
  const now = Math.floor((ctx.now ?? Date.now)() / 1000);
  if (typeof p.iat !== 'number' || p.iat > now + ctx.clockSkewSeconds)
    throw unauthorized('introspection response iat is missing or in the future');
  if (typeof p.exp !== 'number' || p.exp <= now - ctx.clockSkewSeconds)
    throw unauthorized('introspection response exp is missing or in the past');
  if (typeof p.client_id !== 'string' || p.client_id === '')
    throw unauthorized('introspection response names no client_id');
  return p as IntrospectionPayload;
}

/** Verifies a signed introspection response of `issuer` (also used to re-check stored evidence). */
export async function verifyIntrospectionResponse(
  jwt: string,
  issuer: string,
  ctx: IntrospectionContext,
): Promise<Introspection> {
  const { payload, keySource } = await verifySignature(jwt, issuer, ctx);
  return { jwt, payload: checkClaims(payload, issuer, ctx), keySource };
}

export async function introspect(sad: ValidatedSad, ctx: IntrospectionContext): Promise<Introspection> {
  return verifyIntrospectionResponse(await call(sad, ctx), sad.issuer, ctx);
}
