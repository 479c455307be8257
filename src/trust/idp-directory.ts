/**
 * IDP directory client (spec 4.6, 5.7 step 1): is this issuer an active IDP? Answers are cached for a TTL;
 * concurrent lookups of one issuer share a request. When the directory fails, the last good answer keeps
 * serving until it is older than maxStaleMs; after that we fail closed.
 */
import type { Agent } from 'node:https';
import { httpRequest, jsonBody } from '../util/http-client.ts';

export type IdpStatus = 'active' | 'inactive' | 'unknown';

export interface IdpRecord {
  readonly iss: string;
  readonly status: string;
  readonly notification_email?: string;
  readonly [key: string]: unknown;
}

export class IdpDirectoryUnavailable extends Error {
  override name = 'IdpDirectoryUnavailable';
}

interface Entry {
  readonly status: IdpStatus;
  readonly record?: IdpRecord;
  readonly fetchedAt: number;
}

export interface IdpDirectoryOptions {
  readonly url: string;
  readonly agent: Agent;
  readonly ttlMs: number;
  readonly maxStaleMs: number;
  readonly timeoutMs: number;
  readonly now?: () => number;
}

export class IdpDirectory {
  private readonly cache = new Map<string, Entry>();
  private readonly inFlight = new Map<string, Promise<Entry>>();
  private readonly now: () => number;

  constructor(private readonly options: IdpDirectoryOptions) {
    this.now = options.now ?? Date.now;
  }

  async status(iss: string): Promise<IdpStatus> {
    return (await this.lookup(iss)).status;
  }

  async record(iss: string): Promise<IdpRecord | undefined> {
    return (await this.lookup(iss)).record;
  }

  private async lookup(iss: string): Promise<Entry> {
    const cached = this.cache.get(iss);
    if (cached && this.now() - cached.fetchedAt < this.options.ttlMs) return cached;
    let pending = this.inFlight.get(iss);
    if (!pending) {
      pending = this.fetch(iss).finally(() => this.inFlight.delete(iss));
      this.inFlight.set(iss, pending);
    }
    try {
      const fresh = await pending;
      this.cache.set(iss, fresh);
      return fresh;
    } catch (err) {
      if (cached && this.now() - cached.fetchedAt < this.options.maxStaleMs) return cached;
      throw new IdpDirectoryUnavailable(`the IDP directory is unavailable (${(err as Error).message}) and no recent answer for this issuer is cached`);
    }
  }

  private async fetch(iss: string): Promise<Entry> {
    const url = new URL(this.options.url);
    url.searchParams.set('iss', iss);
    const res = await httpRequest(url, { agent: this.options.agent, timeoutMs: this.options.timeoutMs, headers: { accept: 'application/json' } });
    const fetchedAt = this.now();
    if (res.status === 404) return { status: 'unknown', fetchedAt };
    if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
    const body = jsonBody(res) as IdpRecord | undefined;
    if (!body || typeof body !== 'object' || body.iss !== iss) throw new Error('malformed IDP record');
    return { status: body.status === 'active' ? 'active' : 'inactive', record: body, fetchedAt };
  }
}
