/**
 * Canonical JSON (RFC 8785, JCS) for the values a journal entry holds: strings, safe integers, booleans, null,
 * arrays and objects. Keys are sorted by UTF-16 code units (JavaScript's default string order, RFC 8785 3.2.3)
 * and strings are escaped as ECMAScript's JSON.stringify does (RFC 8785 3.2.2.2), so any JCS implementation
 * reproduces the bytes. Non-integer numbers are refused rather than serialised: their JCS form needs the
 * ECMAScript number printer, and no entry needs one.
 */
export type CanonicalValue =
  | string
  | number
  | boolean
  | null
  | readonly CanonicalValue[]
  | { readonly [key: string]: CanonicalValue };

/**
 * Characters JSON.stringify writes as they are: printable ASCII but `"` and `\`. A string of only these (Base64,
 * a JWT, a URL, most identifiers) is quoted as it is, without JSON.stringify's escape scan of each character.
 */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** the text of `value`, built by concatenation (V8 joins the parts without copying them until it is read) */
function text(value: CanonicalValue): string {
  if (typeof value === 'string') return PLAIN.test(value) ? `"${value}"` : JSON.stringify(value);
  if (value === null || typeof value === 'boolean') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new TypeError(`canonical JSON: ${value} is not a safe integer`);
    return String(value);
  }
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i > 0 ? ',' : '') + text(value[i]);
    return `${out}]`;
  }
  if (typeof value === 'object') {
    const object = value as { readonly [key: string]: CanonicalValue };
    const keys = Object.keys(object).sort();
    let out = '{';
    for (const key of keys) {
      const member = object[key];
      if (member === undefined) continue;
      out += `${out.length > 1 ? ',' : ''}${JSON.stringify(key)}:${text(member)}`;
    }
    return `${out}}`;
  }
  throw new TypeError(`canonical JSON: ${typeof value} cannot be encoded`);
}

/** The RFC 8785 text of `value` (throws TypeError on a value outside CanonicalValue). */
export function canonicalJson(value: CanonicalValue): string {
  return text(value);
}
