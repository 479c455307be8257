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

function write(value: CanonicalValue, out: string[]): void {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') {
    out.push(JSON.stringify(value));
  } else if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new TypeError(`canonical JSON: ${value} is not a safe integer`);
    out.push(String(value));
  } else if (Array.isArray(value)) {
    out.push('[');
    value.forEach((item, i) => {
      if (i > 0) out.push(',');
      write(item, out);
    });
    out.push(']');
  } else if (typeof value === 'object') {
    const object = value as { readonly [key: string]: CanonicalValue };
    const keys = Object.keys(object)
      .filter((k) => object[k] !== undefined)
      .sort();
    out.push('{');
    keys.forEach((key, i) => {
      if (i > 0) out.push(',');
      out.push(JSON.stringify(key), ':');
      write(object[key]!, out);
    });
    out.push('}');
  } else {
    throw new TypeError(`canonical JSON: ${typeof value} cannot be encoded`);
  }
}

/** The RFC 8785 text of `value` (throws TypeError on a value outside CanonicalValue). */
export function canonicalJson(value: CanonicalValue): string {
  const out: string[] = [];
  write(value, out);
  return out.join('');
}
