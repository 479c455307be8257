/** PKCE S256 (RFC 7636) and the other random values of the flow (state, nonce). */
import { createHash, randomBytes } from 'node:crypto';

export interface Pkce {
  readonly verifier: string;
  readonly challenge: string;
}

/** A 43-character verifier from 32 random bytes and its S256 challenge. */
export function createPkce(): Pkce {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier, 'ascii').digest('base64url') };
}

/** An unguessable value for state or nonce. */
export function randomValue(): string {
  return randomBytes(24).toString('base64url');
}
