/**
 * In-memory, expiring, single-use state of the AS: pushed requests (request_uri), pending consents (the bank's
 * page), authorization codes and access-token transactions.
 */
import { randomBytes } from 'node:crypto';
import type { AuthorizationCode, PendingConsent, PushedRequest, Transaction } from './model.ts';

export class ExpiringMap<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();

  set(key: string, value: V, ttlMs: number): void {
    this.sweep();
    this.entries.set(key, { value, expiresAt: Date.now() + ttlMs });
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

  private sweep(): void {
    const now = Date.now();
    for (const [key, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(key);
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

export function createStore(): AsStore {
  return {
    pushed: new ExpiringMap(),
    consents: new ExpiringMap(),
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
/** How long after its page expired a pending consent is kept, so that a late post can still reach the RP (7.3). */
export const CONSENT_KEPT_EXPIRED_SECONDS = 3600;
