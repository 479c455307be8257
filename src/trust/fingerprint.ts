/** Certificate fingerprints as used in cnf.x5t#S256 (RFC 8705 section 3.1): base64url(SHA-256(DER)). */
import { createHash, timingSafeEqual } from 'node:crypto';

export function x5tS256(certDer: Uint8Array): string {
  return createHash('sha256').update(certDer).digest('base64url');
}

/** Constant-time comparison of two fingerprints (their length is public: always 43 characters). */
export function fingerprintsEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}
