/**
 * AS metadata (RFC 8414, spec 2.3) and signing keys (jwks_uri) of the IDPs we trust. Metadata is cached for a
 * TTL; JWKS are cached and refetched at most once per cool-down when a token names an unknown kid, so a
 * flood of forged kids cannot turn us into a request amplifier. Only RSA keys usable for RS256 are taken;
 * `jku`, `x5u` and `jwk` headers are never followed.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import type { Agent } from 'node:https';
import type { JWK } from 'jose';
import { httpRequest, jsonBody } from '../util/http-client.ts';

export interface AsMetadata {
  readonly issuer: string;
  readonly introspection_endpoint: string;
  readonly jwks_uri: string;
  readonly [key: string]: unknown;
}

export class TrustSourceError extends Error {
  override name = 'TrustSourceError';
}

interface KeySet {
  readonly keys: ReadonlyMap<string, KeyObject>;
  readonly fetchedAt: number;
}

export interface AuthorizationServersOptions {
  readonly agent: Agent;
  readonly metadataTtlMs: number;
  readonly jwksCooldownMs: number;
  readonly timeoutMs: number;
  readonly now?: () => number;
}

/** RFC 8414 section 3: the well-known suffix goes between host and path. */
export function metadataUrl(issuer: string): URL {
  const u = new URL(issuer);
  const path = u.pathname === '/' ? '' : u.pathname.replace(/\/$/, '');
  return new URL(`/.well-known/oauth-authorization-server${path}`, u.origin);
}

export class AuthorizationServers {
  private readonly metadata = new Map<string, { value: AsMetadata; fetchedAt: number }>();
  private readonly keySets = new Map<string, KeySet>();
  private readonly pending = new Map<string, Promise<unknown>>();
  private readonly now: () => number;

  constructor(private readonly options: AuthorizationServersOptions) {
    this.now = options.now ?? Date.now;
  }

  async getMetadata(issuer: string): Promise<AsMetadata> {
    const cached = this.metadata.get(issuer);
    if (cached && this.now() - cached.fetchedAt < this.options.metadataTtlMs) return cached.value;
    const value = await this.once(`md:${issuer}`, () => this.fetchMetadata(issuer));
    this.metadata.set(issuer, { value, fetchedAt: this.now() });
    return value;
  }

  /** The RS256 key with this kid, or undefined when the AS does not publish it (after one refetch). */
  async getKey(issuer: string, kid: string): Promise<KeyObject | undefined> {
    const set = this.keySets.get(issuer);
    const known = set?.keys.get(kid);
    const age = set ? this.now() - set.fetchedAt : Infinity;
    if (known && age < this.options.metadataTtlMs) return known;
    if (!known && age < this.options.jwksCooldownMs) return undefined;
    try {
      const fresh = await this.once(`jwks:${issuer}`, () => this.fetchKeys(issuer));
      this.keySets.set(issuer, fresh);
      return fresh.keys.get(kid);
    } catch (err) {
      if (known) return known; // JWKS unreachable: a key we already hold keeps working
      throw err;
    }
  }

  private async once<T>(key: string, fn: () => Promise<T>): Promise<T> {
    let p = this.pending.get(key) as Promise<T> | undefined;
    if (!p) {
      p = fn().finally(() => this.pending.delete(key));
      this.pending.set(key, p);
    }
    return p;
  }

  private async getJson(url: URL | string, what: string): Promise<unknown> {
    let res;
    try {
      res = await httpRequest(url, { agent: this.options.agent, timeoutMs: this.options.timeoutMs, headers: { accept: 'application/json' } });
    } catch (err) {
      throw new TrustSourceError(`${what} unreachable: ${(err as Error).message}`);
    }
    if (res.status !== 200) throw new TrustSourceError(`${what} answered HTTP ${res.status}`);
    const body = jsonBody(res);
    if (!body || typeof body !== 'object') throw new TrustSourceError(`${what} is not a JSON object`);
    return body;
  }

  private async fetchMetadata(issuer: string): Promise<AsMetadata> {
    const md = (await this.getJson(metadataUrl(issuer), 'AS metadata')) as Partial<AsMetadata>;
    if (md.issuer !== issuer) throw new TrustSourceError('AS metadata names another issuer');
    for (const key of ['introspection_endpoint', 'jwks_uri'] as const) {
      if (typeof md[key] !== 'string' || !md[key].startsWith('https://')) throw new TrustSourceError(`AS metadata lacks an https ${key}`);
    }
    return md as AsMetadata;
  }

  private async fetchKeys(issuer: string): Promise<KeySet> {
    const md = await this.getMetadata(issuer);
    const jwks = (await this.getJson(md.jwks_uri, 'AS JWKS')) as { keys?: unknown };
    if (!Array.isArray(jwks.keys)) throw new TrustSourceError('AS JWKS has no keys array');
    const keys = new Map<string, KeyObject>();
    for (const jwk of jwks.keys as JWK[]) {
      if (jwk.kty !== 'RSA' || typeof jwk.kid !== 'string') continue;
      if (jwk.alg !== undefined && jwk.alg !== 'RS256') continue;
      if (jwk.use !== undefined && jwk.use !== 'sig') continue;
      try {
        const key = createPublicKey({ key: { kty: 'RSA', n: jwk.n!, e: jwk.e! }, format: 'jwk' });
        if ((key.asymmetricKeyDetails?.modulusLength ?? 0) >= 2048) keys.set(jwk.kid, key);
      } catch {
        // a malformed key in the set is skipped, never fatal for the others
      }
    }
    return { keys, fetchedAt: this.now() };
  }
}
