/**
 * In-memory, expiring, single-use state of the AS: pushed requests (request_uri), pending consents (the bank's
 * page), authorization codes and access-token transactions.
 */
import { randomBytes } from 'node:crypto';
import type { AuthorizationCode, PendingConsent, PushedRequest, Transaction } from './model.ts';

/**
 * Entries that expire. Expired entries at the head (the oldest insertions) are dropped on each insert, so an
 * insert costs O(1) amortized where every entry of a map lives equally long; the whole map is swept only when
 * it is full. get() never hands out an expired entry.
 */
export class ExpiringMap<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();

  /** maxEntries: set() refuses a new key beyond it (after dropping what has expired) */
  constructor(private readonly maxEntries = Number.POSITIVE_INFINITY) {}

  /** false when the map is full of live entries: nothing was stored */
  set(key: string, value: V, ttlMs: number): boolean {
    const now = Date.now();
    this.dropExpiredHead(now);
    if (this.entries.size >= this.maxEntries && !this.entries.has(key)) {
      for (const [k, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(k);
      if (this.entries.size >= this.maxEntries) return false;
    }
    this.entries.set(key, { value, expiresAt: now + ttlMs });
    return true;
  }

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  get size(): number {
    return this.entries.size;
  }

  private dropExpiredHead(now: number): void {
    for (const [key, entry] of this.entries) {
      if (entry.expiresAt > now) return;
      this.entries.delete(key);
    }
  }
}

export interface AsStore {
  readonly pushed: ExpiringMap<PushedRequest>;
  /** by consent id */
  readonly consents: ExpiringMap<PendingConsent>;
  /** by code; a redeemed code stays, marked, until it expires */
  readonly codes: ExpiringMap<AuthorizationCode>;
  /** by jti */
  readonly transactions: ExpiringMap<Transaction>;
}

/** Pending consents one bank keeps by default: each holds its pushed request, up to a PAR body's size. */
export const MAX_PENDING_CONSENTS = 1000;

export function createStore(o: { maxPendingConsents?: number } = {}): AsStore {
  return {
    pushed: new ExpiringMap(),
    consents: new ExpiringMap(o.maxPendingConsents ?? MAX_PENDING_CONSENTS),
    codes: new ExpiringMap(),
    transactions: new ExpiringMap(),
  };
}

/** An unguessable value (256 bits), base64url. */
export function randomId(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

/** Lifetime of request_uri (spec 2.8) and of authorization codes. */
export const REQUEST_URI_TTL_SECONDS = 60;
export const CODE_TTL_SECONDS = 60;
/** Lifetime of the bank's consent page: minutes (spec 5.10: a short session); the default of the sandbox option. */
export const CONSENT_TTL_SECONDS = 300;
/**
 * How long after its page expired a pending consent is kept, so that a late post can still send the user back
 * to the RP (7.3); short, since every pending consent holds its pushed request.
 */
export const CONSENT_KEPT_EXPIRED_SECONDS = 600;
