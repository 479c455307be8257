/**
 * IDP directory client (spec 4.6, 5.7 step 1): is this issuer an active IDP?
 *
 * Two ways in, one cache: the whole list (`GET <directory>` without iss) is pulled periodically, and a single
 * issuer (`GET <directory>?iss=`) is looked up when its cached answer is older than the TTL; concurrent
 * lookups of one issuer share a request. When the directory fails, the last good answer about an issuer keeps
 * serving until it is older than maxStaleMs; after that, SADs of that issuer fail closed
 * (IdpDirectoryUnavailable, which names the issuer, the age of the answer and the limit).
 */
import { httpRequest, jsonBody, type HttpAgent as Agent } from '../util/http-client.ts';
import type { Logger } from '../util/logger.ts';

export type IdpStatus = 'active' | 'inactive' | 'unknown';

export interface IdpRecord {
  readonly iss: string;
  readonly status: string;
  readonly notification_email?: string;
  readonly [key: string]: unknown;
}

/** `message` in the relying party's terms (no address, no errno); `detail`: why the directory failed, for our log */
export class IdpDirectoryUnavailable extends Error {
  override name = 'IdpDirectoryUnavailable';
  constructor(
    message: string,
    readonly detail: string,
  ) {
    super(message);
  }
}

interface Entry {
  readonly status: IdpStatus;
  readonly record?: IdpRecord;
  readonly fetchedAt: number;
}

export interface IdpDirectoryOptions {
  /** the directory (trust.idpDirectoryUrl), e.g. https://<basepath>/idps/v1/ */
  readonly url: string;
  readonly agent: Agent;
  /** how long an answer is reused before the issuer is looked up again */
  readonly ttlMs: number;
  /** how long the last good answer serves while the directory fails */
  readonly maxStaleMs: number;
  readonly timeoutMs: number;
  /** interval of the periodic list pull; 0 = no periodic pull */
  readonly listIntervalMs?: number;
  readonly logger?: Logger;
  readonly now?: () => number;
}

function statusOf(record: IdpRecord): IdpStatus {
  return record.status === 'active' ? 'active' : 'inactive';
}

function isRecord(value: unknown): value is IdpRecord {
  return (
    !!value &&
    typeof value === 'object' &&
    typeof (value as IdpRecord).iss === 'string' &&
    typeof (value as IdpRecord).status === 'string'
  );
}

function describe(err: unknown): string {
  return (err as Error)?.message ?? String(err);
}

export class IdpDirectory {
  private readonly cache = new Map<string, Entry>();
  private readonly inFlight = new Map<string, Promise<Entry>>();
  private listPending: Promise<number> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private lastFailure: { at: number; reason: string } | undefined;
  /** when the directory last gave a good answer (a record, a 404, or the list) */
  private lastAnswerAt: number | undefined;
  /** when the whole list was last pulled successfully */
  private lastListAt: number | undefined;
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

  /**
   * Pulls the whole list and replaces the cached answers with it (an issuer missing from a good list is
   * unknown). Resolves to the number of IDPs listed; rejects when the directory fails (the cache stays).
   */
  refreshList(): Promise<number> {
    this.listPending ??= this.pullList().finally(() => {
      this.listPending = undefined;
    });
    return this.listPending;
  }

  /** Starts the periodic list pull (timer unref'd) and resolves after the first one, failed or not. */
  async start(): Promise<void> {
    const interval = this.options.listIntervalMs ?? 0;
    if (interval <= 0 || this.timer) return;
    const pull = () =>
      this.refreshList().catch((err: unknown) => {
        this.options.logger?.warn(
          { event: 'idp_directory.list_failed', reason: describe(err) },
          'IDP directory list pull failed; cached answers keep serving up to their maximum age',
        );
      });
    this.timer = setInterval(() => void pull(), interval);
    this.timer.unref();
    await pull();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Readiness: not ready until the directory has answered once (before that every SAD is refused, spec 4.6
   * fail closed), nor once its last answer is older than maxStaleMs (cached answers no longer serve). While
   * it fails within that bound the service stays ready and the reason says so.
   */
  readiness(): { ready: boolean; reasons: string[] } {
    const failing = this.lastFailure
      ? ` (${this.lastFailure.reason}, ${Math.round((this.now() - this.lastFailure.at) / 1000)} s ago)`
      : '';
    if (this.lastAnswerAt === undefined)
      return {
        ready: false,
        reasons: [`IDP directory has never answered${failing}: every SAD is refused until it does`],
      };
    const age = this.now() - this.lastAnswerAt;
    const maxStale = Math.round(this.options.maxStaleMs / 1000);
    if (age >= this.options.maxStaleMs)
      return {
        ready: false,
        reasons: [
          `IDP directory last answered ${Math.round(age / 1000)} s ago${failing}, ` +
            `beyond trust.idpMaxStaleSeconds (${maxStale} s): SADs are refused until it answers`,
        ],
      };
    if (!this.lastFailure) return { ready: true, reasons: [] };
    return {
      ready: true,
      reasons: [`IDP directory failing${failing}; cached answers serve for at most ${maxStale} s`],
    };
  }

  /** Whether the directory has given a good answer since start. */
  hasAnswered(): boolean {
    return this.lastAnswerAt !== undefined;
  }

  /** Seconds since the last good pull of the whole list (metrics); undefined before the first one. */
  listAgeSeconds(): number | undefined {
    return this.lastListAt === undefined ? undefined : (this.now() - this.lastListAt) / 1000;
  }

  /** Issuers the cached answers list as active (readiness probes their key sources). */
  activeIssuers(): string[] {
    return [...this.cache].filter(([, entry]) => entry.status === 'active').map(([iss]) => iss);
  }

  private async lookup(iss: string): Promise<Entry> {
    const cached = this.cache.get(iss);
    if (cached && this.now() - cached.fetchedAt < this.options.ttlMs) return cached;
    let pending = this.inFlight.get(iss);
    if (!pending) {
      pending = this.fetchOne(iss).finally(() => this.inFlight.delete(iss));
      this.inFlight.set(iss, pending);
    }
    try {
      const fresh = await pending;
      this.cache.set(iss, fresh);
      return fresh;
    } catch (err) {
      return this.stale(iss, cached, err);
    }
  }

  /** The directory failed: the last good answer if it is recent enough, else fail closed. */
  private stale(iss: string, cached: Entry | undefined, err: unknown): Entry {
    const maxStale = Math.round(this.options.maxStaleMs / 1000);
    if (cached) {
      const age = this.now() - cached.fetchedAt;
      if (age < this.options.maxStaleMs) {
        this.options.logger?.warn(
          { event: 'idp_directory.stale_answer', iss, age_seconds: Math.round(age / 1000), reason: describe(err) },
          'IDP directory failing; serving the cached answer',
        );
        return cached;
      }
      throw new IdpDirectoryUnavailable(
        `the IDP directory could not be reached and its last answer about issuer ${iss} ` +
          `is ${Math.round(age / 1000)} s old, beyond the maximum of ${maxStale} s (trust.idpMaxStaleSeconds): ` +
          'SADs of this issuer are refused until the directory answers',
        `IDP directory ${this.options.url}: ${describe(err)}`,
      );
    }
    throw new IdpDirectoryUnavailable(
      `the IDP directory could not be reached and has never answered about issuer ${iss}: ` +
        'SADs of this issuer are refused until it answers',
      `IDP directory ${this.options.url}: ${describe(err)}`,
    );
  }

  private async get(url: URL): Promise<{ status: number; body: unknown }> {
    try {
      const res = await httpRequest(url, {
        agent: this.options.agent,
        timeoutMs: this.options.timeoutMs,
        headers: { accept: 'application/json' },
      });
      return { status: res.status, body: jsonBody(res) };
    } catch (err) {
      this.failure(describe(err));
      throw err;
    }
  }

  private failure(reason: string): void {
    this.lastFailure = { at: this.now(), reason };
  }

  private answered(): void {
    this.lastFailure = undefined;
    this.lastAnswerAt = this.now();
  }

  private async fetchOne(iss: string): Promise<Entry> {
    const url = new URL(this.options.url);
    url.searchParams.set('iss', iss);
    const res = await this.get(url);
    const fetchedAt = this.now();
    if (res.status === 404) {
      this.answered();
      return { status: 'unknown', fetchedAt };
    }
    if (res.status !== 200) {
      this.failure(`HTTP ${res.status}`);
      throw new Error(`HTTP ${res.status}`);
    }
    if (!isRecord(res.body) || res.body.iss !== iss) {
      this.failure('malformed IDP record');
      throw new Error('malformed IDP record');
    }
    this.answered();
    return { status: statusOf(res.body), record: res.body, fetchedAt };
  }

  private async pullList(): Promise<number> {
    const res = await this.get(new URL(this.options.url));
    if (res.status !== 200) {
      this.failure(`list: HTTP ${res.status}`);
      throw new Error(`IDP directory list answered HTTP ${res.status}`);
    }
    if (!Array.isArray(res.body) || !res.body.every(isRecord)) {
      this.failure('list: not an array of IDP records');
      throw new Error('IDP directory list is not an array of IDP records');
    }
    const fetchedAt = this.now();
    const listed = new Map((res.body as IdpRecord[]).map((r) => [r.iss, r]));
    for (const iss of this.cache.keys()) if (!listed.has(iss)) this.cache.set(iss, { status: 'unknown', fetchedAt });
    for (const [iss, record] of listed) this.cache.set(iss, { status: statusOf(record), record, fetchedAt });
    this.answered();
    this.lastListAt = fetchedAt;
    return listed.size;
  }
}
