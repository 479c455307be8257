/**
 * RS256 signature check of a compact JWS (RFC 7515 5.2, RFC 7518 3.3) with node:crypto, for the JWTs jwt.ts
 * verifies (the SAD and the signed introspection response of every signDoc, and that response as evidence).
 *
 * Why not jose's compactVerify: jose 6 verifies through WebCrypto, so each call re-imports our KeyObject as a
 * CryptoKey and awaits subtle.verify, several times the CPU of node:crypto.verify with the KeyObject we already
 * hold, which is the same RSASSA-PKCS1-v1_5 SHA-256 check. What compactVerify checked beyond the signature is
 * checked here too: three segments of strict base64url, an RSA key (not RSA-PSS, not EC) of at least 2048 bits
 * (RFC 7518 3.3). The header checks (alg pinned to RS256, no crit, kid) are jwt.ts's.
 */
import { verify, type KeyObject } from 'node:crypto';

const BASE64URL = /^[A-Za-z0-9_-]*$/;

export class JwsVerificationFailed extends Error {
  override name = 'JwsVerificationFailed';
}

/** Verifies the RS256 signature of `token` with `key`; the decoded payload bytes, or JwsVerificationFailed. */
export function verifyRs256(token: string, key: KeyObject): Buffer {
  if (
    key.type !== 'public' ||
    key.asymmetricKeyType !== 'rsa' ||
    (key.asymmetricKeyDetails?.modulusLength ?? 0) < 2048
  ) {
    throw new JwsVerificationFailed('RS256 needs an RSA public key of at least 2048 bits');
  }
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  if (first <= 0 || second < 0 || token.indexOf('.', second + 1) !== -1)
    throw new JwsVerificationFailed('not a compact JWS');
  const header = token.slice(0, first);
  const payload = token.slice(first + 1, second);
  const signature = token.slice(second + 1);
  if (!BASE64URL.test(header) || !BASE64URL.test(payload) || !BASE64URL.test(signature) || signature === '')
    throw new JwsVerificationFailed('a segment is not base64url');
  const signingInput = Buffer.from(token.slice(0, second), 'ascii');
  if (!verify('sha256', signingInput, key, Buffer.from(signature, 'base64url')))
    throw new JwsVerificationFailed('signature does not verify');
  return Buffer.from(payload, 'base64url');
}
