/**
 * AS metadata (RFC 8414, spec 2.3) and the signing keys of the IDPs we trust (spec 4.7, 5.7 step 4, 5.8).
 *
 * A key is resolved by kid from two sources, in this order:
 *   1. the long-term public key archive at our verified HEAD (key-archive.ts: signed git history);
 *   2. the AS's jwks_uri, cached; an unknown kid causes at most one refetch per cool-down, so a flood of
 *      forged kids cannot turn us into a request amplifier.
 * The source that vouched is returned, logged and remembered per (issuer, kid) for the evidence record.
 * When the archive changes an issuer's key set, that issuer's cached JWKS is dropped, so a key removed from
 * both sources stops being accepted at the next pull instead of lingering for the metadata TTL.
 * Only RSA keys usable for RS256 are taken; `jku`, `x5u` and `jwk` headers are never followed.
 */
import type { KeyObject } from 'node:crypto';
import { httpRequest, jsonBody, type HttpAgent as Agent } from '../util/http-client.ts';
import type { Logger } from '../util/logger.ts';
import { rs256Keys, type ArchiveKey } from './key-archive.ts';

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

/** What the key archive offers key resolution (KeyArchive implements it). */
export interface ArchiveKeySource {
  key(issuer: string, kid: string): ArchiveKey | undefined;
  onChange(listener: (issuers: readonly string[]) => void): void;
}

export type KeySource = 'archive' | 'jwks_uri';

export interface ResolvedKey {
  readonly key: KeyObject;
  readonly source: KeySource;
  /** the verified archive commit that holds the key (source archive) */
  readonly commit?: string;
}

export interface AuthorizationServersOptions {
  readonly agent: Agent;
  readonly metadataTtlMs: number;
  readonly jwksCooldownMs: number;
  readonly timeoutMs: number;
  /** the long-term public key archive, consulted first */
  readonly archive?: ArchiveKeySource;
  readonly logger?: Logger;
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
  private readonly vouched = new Map<string, Omit<ResolvedKey, 'key'>>();
  private readonly now: () => number;

  constructor(private readonly options: AuthorizationServersOptions) {
    this.now = options.now ?? Date.now;
    options.archive?.onChange((issuers) => {
      for (const issuer of issuers) this.keySets.delete(issuer);
    });
  }

  async getMetadata(issuer: string): Promise<AsMetadata> {
    const cached = this.metadata.get(issuer);
    if (cached && this.now() - cached.fetchedAt < this.options.metadataTtlMs) return cached.value;
    const value = await this.once(`md:${issuer}`, () => this.fetchMetadata(issuer));
    this.metadata.set(issuer, { value, fetchedAt: this.now() });
    return value;
  }

  /**
   * The RS256 key with this kid and the source that vouched for it (archive first, then jwks_uri), or undefined
   * when neither the archive nor the AS has it.
   */
  async resolveKey(issuer: string, kid: string): Promise<ResolvedKey | undefined> {
    const archived = this.options.archive?.key(issuer, kid);
    const resolved: ResolvedKey | undefined = archived
      ? { key: archived.key, source: 'archive', commit: archived.commit }
      : await this.jwksKey(issuer, kid).then((key) => (key ? { key, source: 'jwks_uri' as const } : undefined));
    if (resolved) this.remember(issuer, kid, resolved);
    return resolved;
  }

  /**
   * Readiness when the key archive has no verified state: can every issuer given fetch its JWK Set from its
   * jwks_uri now (a set fetched within the metadata TTL counts)? An issuer without RS256 keys fails too.
   */
  async probeKeySources(issuers: readonly string[]): Promise<{ usable: boolean; reasons: string[] }> {
    if (issuers.length === 0) return { usable: false, reasons: ['AS key sources: no active IDP known to probe'] };
    const reasons: string[] = [];
    await Promise.all(
      issuers.map(async (issuer) => {
        try {
          let set = this.keySets.get(issuer);
          if (!set || this.now() - set.fetchedAt >= this.options.metadataTtlMs) {
            set = await this.once(`jwks:${issuer}`, () => this.fetchKeys(issuer));
            this.keySets.set(issuer, set);
          }
          if (set.keys.size === 0) reasons.push(`AS key sources: ${issuer}: its JWK Set has no RS256 key`);
        } catch (err) {
          reasons.push(`AS key sources: ${issuer}: ${(err as Error).message}`);
        }
      }),
    );
    return { usable: reasons.length === 0, reasons };
  }

  /** Which source last vouched for this key (for the evidence record); undefined if never resolved. */
  keySource(issuer: string, kid: string): Omit<ResolvedKey, 'key'> | undefined {
    return this.vouched.get(`${issuer} ${kid}`);
  }

  private remember(issuer: string, kid: string, resolved: ResolvedKey): void {
    const id = `${issuer} ${kid}`;
    const previous = this.vouched.get(id);
    const { source, commit } = resolved;
    const entry = { source, ...(commit ? { commit } : {}) };
    const changed = previous?.source !== source || previous?.commit !== commit;
    if (changed) this.vouched.set(id, entry);
    const fields = {
      event: 'trust.key_resolved',
      iss: issuer,
      kid,
      source,
      ...(commit ? { archive_commit: commit } : {}),
    };
    if (changed)
      this.options.logger?.info(
        fields,
        `signing key vouched for by ${source === 'archive' ? 'the key archive' : 'the AS jwks_uri'}`,
      );
    else this.options.logger?.debug(fields, 'signing key resolved');
  }

  /** The jwks_uri path: cached, refetched once per unknown kid after the cool-down. */
  private async jwksKey(issuer: string, kid: string): Promise<KeyObject | undefined> {
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
      res = await httpRequest(url, {
        agent: this.options.agent,
        timeoutMs: this.options.timeoutMs,
        headers: { accept: 'application/json' },
      });
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
      if (typeof md[key] !== 'string' || !md[key].startsWith('https://'))
        throw new TrustSourceError(`AS metadata lacks an https ${key}`);
    }
    return md as AsMetadata;
  }

  private async fetchKeys(issuer: string): Promise<KeySet> {
    const md = await this.getMetadata(issuer);
    const jwks = (await this.getJson(md.jwks_uri, 'AS JWKS')) as { keys?: unknown };
    if (!Array.isArray(jwks.keys)) throw new TrustSourceError('AS JWKS has no keys array');
    return { keys: rs256Keys(jwks), fetchedAt: this.now() };
  }
}
