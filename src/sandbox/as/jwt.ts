/**
 * JWTs the AS produces: access tokens (spec 2.10) and introspection responses (spec 2.11), RS256 with a
 * kid header; plus the deliberately broken variants tests ask for (foreign key, alg none).
 */
import { CompactSign } from 'jose';
import type { AsKey, AsKeyStore } from './keys.ts';

export interface JwtSignOptions {
  /** header kid; default: the kid of the current signing key */
  readonly kid?: string;
  readonly key?: 'as' | 'foreign';
  /** default RS256; 'none' gives an unsigned JWT */
  readonly alg?: string;
  readonly typ?: string;
}

function encodeJson(value: unknown): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(value));
}

/** An unsecured JWT (RFC 7519 section 6): header alg none, empty signature. */
function unsignedJwt(payload: Record<string, unknown>, typ: string | undefined): string {
  const part = (v: unknown): string => Buffer.from(encodeJson(v)).toString('base64url');
  return `${part({ alg: 'none', ...(typ ? { typ } : {}) })}.${part(payload)}.`;
}

export async function signJwt(
  keys: AsKeyStore,
  payload: Record<string, unknown>,
  options: JwtSignOptions = {},
): Promise<string> {
  const alg = options.alg ?? 'RS256';
  if (alg === 'none') return unsignedJwt(payload, options.typ);
  const key: AsKey = options.key === 'foreign' ? await keys.foreignKey() : keys.signingKey();
  const kid = options.kid ?? keys.signingKey().kid;
  return new CompactSign(encodeJson(payload))
    .setProtectedHeader({ alg, kid, ...(options.typ ? { typ: options.typ } : {}) })
    .sign(key.privateKey);
}
