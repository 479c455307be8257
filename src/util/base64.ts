/**
 * Strict standard Base64 (RFC 4648 section 4) of raw digest bytes, as spec 2.7 demands.
 * Buffer.from(s, 'base64') silently accepts URL-safe characters, whitespace and missing padding,
 * so we check the alphabet and the round trip ourselves.
 */
const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const HEX = /^[0-9a-fA-F]+$/;

export type DigestDecodeResult = { ok: true; bytes: Buffer } | { ok: false; reason: string };

/** Decodes a Base64 digest and checks that it is the raw digest of the expected length. */
export function decodeDigest(value: string, expectedLength: number): DigestDecodeResult {
  if (value.length === 0) return { ok: false, reason: 'is empty' };
  if (!STANDARD_BASE64.test(value)) {
    return {
      ok: false,
      reason: 'is not standard Base64 (RFC 4648 section 4); URL-safe Base64 and hex are not accepted',
    };
  }
  if (HEX.test(value)) {
    return { ok: false, reason: 'looks like a hex string; send Base64 of the raw digest bytes' };
  }
  const bytes = Buffer.from(value, 'base64');
  if (bytes.toString('base64') !== value) return { ok: false, reason: 'is not canonical Base64' };
  // A real digest of 32+ bytes that happens to be all ASCII hex digits has probability below 1e-33.
  if (HEX.test(bytes.toString('latin1')))
    return { ok: false, reason: 'is Base64 of a hex string; send Base64 of the raw digest bytes' };
  if (bytes.length !== expectedLength) {
    return { ok: false, reason: `decodes to ${bytes.length} bytes, the algorithm's digest has ${expectedLength}` };
  }
  return { ok: true, bytes };
}

/**
 * Text that is standard Base64 (RFC 4648 section 4) by construction: JSON carries it as it is, since none of
 * its characters needs escaping (base64JsonArray).
 */
export type Base64Text = string & { readonly __base64Text: unique symbol };

/** Base64 of bytes: always Base64Text. */
export function base64Text(bytes: Buffer): Base64Text {
  return bytes.toString('base64') as Base64Text;
}

const NOT_BASE64_CHARACTER = /[^A-Za-z0-9+/=]/;

/** Text we did not encode here (read back from the store): Base64Text once its characters are checked. */
export function checkedBase64Text(text: string): Base64Text {
  if (NOT_BASE64_CHARACTER.test(text)) throw new TypeError('not Base64 text');
  return text as Base64Text;
}

/**
 * The JSON array of Base64 texts, exactly as JSON.stringify writes it, without its per-character escape scan,
 * which costs far more than the join on answers of many signatures (docs/performance.md).
 */
export function base64JsonArray(items: readonly Base64Text[]): string {
  return items.length === 0 ? '[]' : `["${items.join('","')}"]`;
}

export function toPem(der: Uint8Array, label: string): string {
  const b64 = Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '');
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

/** All DER blocks of one label in a PEM text, in order. */
export function fromPem(pem: string, label = 'CERTIFICATE'): Buffer[] {
  const re = new RegExp(`-----BEGIN ${label}-----([\\s\\S]*?)-----END ${label}-----`, 'g');
  return [...pem.matchAll(re)].map((m) => Buffer.from(m[1]!.replace(/\s+/g, ''), 'base64'));
}
