/**
 * A minimal DER (X.690) reader and writer for the structures we build byte by byte: CMS SignedData and
 * SignerInfos (crypto/cms.ts), time-stamp tokens, OCSP responses, CRLs.
 *
 * Written by hand rather than with asn1js because these structures embed DER we must keep byte-exact
 * (certificates, tokens from a TSA, signed attributes) and asn1js re-encodes what it parsed (times, for one,
 * are rebuilt from the parsed date) and silently drops RawData inside constructed values; and because building
 * asn1js objects costs much more CPU per SignerInfo (docs/performance.md). Reading only walks definite-length
 * DER; requests from clients are parsed with pkijs.
 */

export const TAG = {
  boolean: 0x01,
  integer: 0x02,
  bitString: 0x03,
  octetString: 0x04,
  null: 0x05,
  oid: 0x06,
  enumerated: 0x0a,
  utf8String: 0x0c,
  printableString: 0x13,
  utcTime: 0x17,
  generalizedTime: 0x18,
  sequence: 0x30,
  set: 0x31,
} as const;

// ---------------------------------------------------------------------------------------------------------
// Writing

/**
 * One TLV with a single-octet tag (all tags we write are below 31), written into one allocation: signDoc
 * writes a few hundred TLVs per certificate and signature, and concatenating tag, length and content
 * separately was most of node:buffer's share of its profile.
 */
export function tlv(tag: number, ...contents: readonly Uint8Array[]): Buffer {
  let length = 0;
  for (const c of contents) length += c.length;
  const head = 1 + (length < 0x80 ? 1 : 1 + lengthOctetCount(length));
  const out = Buffer.allocUnsafe(head + length);
  out[0] = tag;
  if (length < 0x80) out[1] = length;
  else {
    const count = head - 2;
    out[1] = 0x80 | count;
    for (let i = 0, n = length; i < count; i++, n = Math.floor(n / 256)) out[head - 1 - i] = n & 0xff;
  }
  let at = head;
  for (const c of contents) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** octets of a long-form length's value */
function lengthOctetCount(length: number): number {
  let count = 0;
  for (let n = length; n > 0; n = Math.floor(n / 256)) count++;
  return count;
}

export const sequence = (...items: readonly Uint8Array[]) => tlv(TAG.sequence, ...items);

/** SET OF in DER order (X.690 11.6: elements sorted by their encodings). */
export function setOf(items: readonly Uint8Array[]): Buffer {
  return tlv(TAG.set, ...[...items].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))));
}

/** [n] EXPLICIT: constructed context-specific tag around one complete TLV */
export const explicit = (n: number, ...inner: readonly Uint8Array[]) => tlv(0xa0 | n, ...inner);

/** INTEGER from unsigned big-endian bytes: minimal, with a 0x00 in front when the high bit is set. */
export function integerFromBytes(bytes: Uint8Array): Buffer {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  const trimmed = Buffer.from(bytes.subarray(start));
  return tlv(TAG.integer, trimmed[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed);
}

export function integer(value: number): Buffer {
  const bytes: number[] = [];
  for (let n = value; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return integerFromBytes(Buffer.from(bytes.length ? bytes : [0]));
}

export function enumerated(value: number): Buffer {
  return tlv(TAG.enumerated, contentOf(integer(value)));
}

/**
 * The encodings of the OIDs we write, kept: a certificate and a CMS carry dozens, always from the same small
 * set (the registry's and the profile's), and BigInt arithmetic per arc showed in the signing profile. The
 * cache is bounded all the same. Callers never write into a returned Buffer (DER pieces are only concatenated).
 */
const OID_CACHE = new Map<string, Buffer>();
const OID_CACHE_MAX = 1024;

export function oid(dotted: string): Buffer {
  let der = OID_CACHE.get(dotted);
  if (!der) {
    der = encodeOid(dotted);
    if (OID_CACHE.size < OID_CACHE_MAX) OID_CACHE.set(dotted, der);
  }
  return der;
}

function encodeOid(dotted: string): Buffer {
  const arcs = dotted.split('.').map((a) => BigInt(a));
  if (arcs.length < 2) throw new TypeError(`not an OID: ${dotted}`);
  const out: number[] = [];
  for (const arc of [arcs[0]! * 40n + arcs[1]!, ...arcs.slice(2)]) {
    const chunk: number[] = [Number(arc & 0x7fn)];
    for (let n = arc >> 7n; n > 0n; n >>= 7n) chunk.unshift(Number((n & 0x7fn) | 0x80n));
    out.push(...chunk);
  }
  return tlv(TAG.oid, Buffer.from(out));
}

export const octetString = (bytes: Uint8Array) => tlv(TAG.octetString, bytes);
export const nullValue = () => tlv(TAG.null);
export const utf8String = (text: string) => tlv(TAG.utf8String, Buffer.from(text, 'utf8'));
export const booleanTrue = () => tlv(TAG.boolean, Buffer.from([0xff]));

/** BIT STRING of whole octets (signatures, keys) */
export const bitString = (bytes: Uint8Array) => tlv(TAG.bitString, Buffer.from([0]), bytes);

/** BIT STRING of a NamedBitList with one bit set: DER drops trailing zero bits (X.690 11.2.2). */
export function namedBit(bit: number): Buffer {
  const bytes = Buffer.alloc(Math.floor(bit / 8) + 1);
  bytes[bytes.length - 1] = 0x80 >> (bit % 8);
  return tlv(TAG.bitString, Buffer.from([7 - (bit % 8)]), bytes);
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

function timeDigits(date: Date): string {
  const day = `${pad(date.getUTCMonth() + 1)}${pad(date.getUTCDate())}`;
  return `${day}${pad(date.getUTCHours())}${pad(date.getUTCMinutes())}${pad(date.getUTCSeconds())}`;
}

/** GeneralizedTime in whole seconds, "YYYYMMDDHHMMSSZ" (RFC 5280 4.1.2.5.2: certificates, CRLs). */
export function generalizedTime(date: Date): Buffer {
  return tlv(TAG.generalizedTime, Buffer.from(`${pad(date.getUTCFullYear(), 4)}${timeDigits(date)}Z`, 'latin1'));
}

/**
 * GeneralizedTime to the millisecond where RFC 3161 2.4.2 (genTime) and RFC 6960 4.2.1 (producedAt, thisUpdate)
 * allow a fraction: DER (X.690 11.7) wants a "." fraction without trailing zeros, none when it is zero, and a
 * final "Z". Written here like every other TLV we sign, so the bytes hashed and signed are the ones we chose.
 */
export function generalizedTimeMillis(date: Date): Buffer {
  const fraction = pad(date.getUTCMilliseconds(), 3).replace(/0+$/, '');
  const digits = `${pad(date.getUTCFullYear(), 4)}${timeDigits(date)}${fraction ? `.${fraction}` : ''}Z`;
  return tlv(TAG.generalizedTime, Buffer.from(digits, 'latin1'));
}

/** RFC 5280 5.1.2.4: UTCTime through 2049, GeneralizedTime from 2050. */
export function x509Time(date: Date): Buffer {
  const year = date.getUTCFullYear();
  if (year >= 2050 || year < 1950) return generalizedTime(date);
  return tlv(TAG.utcTime, Buffer.from(`${pad(year % 100)}${timeDigits(date)}Z`, 'latin1'));
}

const ALGORITHM_IDENTIFIERS = new Map<string, Buffer>();

/**
 * AlgorithmIdentifier; RSA PKCS#1 v1.5 signatures carry an explicit NULL (RFC 4055), hashes and ECDSA none.
 * Kept per algorithm, as OIDs are: every certificate and signature repeats one of a handful.
 */
export function algorithmIdentifier(algorithm: string, nullParams = false): Buffer {
  const key = nullParams ? `${algorithm} NULL` : algorithm;
  let der = ALGORITHM_IDENTIFIERS.get(key);
  if (!der) {
    der = nullParams ? sequence(oid(algorithm), nullValue()) : sequence(oid(algorithm));
    if (ALGORITHM_IDENTIFIERS.size < OID_CACHE_MAX) ALGORITHM_IDENTIFIERS.set(key, der);
  }
  return der;
}

// ---------------------------------------------------------------------------------------------------------
// Reading

export interface Tlv {
  readonly tag: number;
  /** offset of the tag octet */
  readonly start: number;
  /** offset of the first content octet */
  readonly contentStart: number;
  /** offset just past the last content octet */
  readonly end: number;
}

export class DerError extends Error {
  override name = 'DerError';
}

/** Reads the TLV at `offset`; definite lengths only (DER), single-octet tags only. */
export function readTlv(buf: Uint8Array, offset = 0, limit = buf.length): Tlv {
  if (offset + 2 > limit) throw new DerError('truncated');
  const tag = buf[offset]!;
  if ((tag & 0x1f) === 0x1f) throw new DerError('multi-octet tags are not supported');
  let length = buf[offset + 1]!;
  let contentStart = offset + 2;
  if (length & 0x80) {
    const count = length & 0x7f;
    if (count === 0 || count > 4) throw new DerError('indefinite or oversized length');
    if (contentStart + count > limit) throw new DerError('truncated length');
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + buf[contentStart + i]!;
    contentStart += count;
  }
  const end = contentStart + length;
  if (end > limit) throw new DerError('content runs past its container');
  return { tag, start: offset, contentStart, end };
}

/** The TLVs directly inside a constructed TLV. */
export function children(buf: Uint8Array, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let offset = parent.contentStart; offset < parent.end; ) {
    const child = readTlv(buf, offset, parent.end);
    out.push(child);
    offset = child.end;
  }
  return out;
}

/** The whole DER of one TLV. */
export const raw = (buf: Uint8Array, t: Tlv): Buffer => Buffer.from(buf.subarray(t.start, t.end));
/** The content octets of one TLV. */
export const content = (buf: Uint8Array, t: Tlv): Buffer => Buffer.from(buf.subarray(t.contentStart, t.end));

export function contentOf(der: Uint8Array): Buffer {
  return content(der, readTlv(der));
}

/** Reads exactly one TLV spanning all of `der` (no trailing bytes). */
export function readWhole(der: Uint8Array): Tlv {
  const t = readTlv(der);
  if (t.end !== der.length) throw new DerError('trailing bytes after the structure');
  return t;
}

export function decodeOid(contentBytes: Uint8Array): string {
  const arcs: bigint[] = [];
  let value = 0n;
  for (const byte of contentBytes) {
    value = (value << 7n) | BigInt(byte & 0x7f);
    if (!(byte & 0x80)) {
      arcs.push(value);
      value = 0n;
    }
  }
  const first = arcs.shift() ?? 0n;
  const head = first < 80n ? [first / 40n, first % 40n] : [2n, first - 80n];
  return [...head, ...arcs].join('.');
}

// ---------------------------------------------------------------------------------------------------------
// X.509 (RFC 5280 4.1): the parts we need, read without parsing the whole certificate (a walk over a few TLVs,
// not a full decode)

export interface CertificateParts {
  readonly der: Buffer;
  readonly tbs: Buffer;
  /** serialNumber INTEGER, whole TLV */
  readonly serial: Buffer;
  /** lowercase hex of the serial's content octets (the store's serialHex) */
  readonly serialHex: string;
  /** issuer and subject Name, DER */
  readonly issuer: Buffer;
  readonly subject: Buffer;
  readonly spki: Buffer;
  /** the subjectPublicKey BIT STRING content without the unused-bits octet (RFC 6960 issuerKeyHash input) */
  readonly publicKeyBits: Buffer;
  readonly signatureAlgorithm: string;
  readonly signature: Buffer;
}

export function certificateParts(der: Buffer): CertificateParts {
  const cert = readWhole(der);
  const [tbsT, algT, sigT] = children(der, cert);
  if (!tbsT || !algT || !sigT) throw new DerError('not a certificate');
  const fields = children(der, tbsT);
  const f = fields[0]?.tag === 0xa0 ? fields.slice(1) : fields; // [0] EXPLICIT version
  const [serialT, , issuerT, , subjectT, spkiT] = f;
  if (!serialT || !issuerT || !subjectT || !spkiT) throw new DerError('not a certificate');
  const keyT = children(der, spkiT)[1]!;
  const algOid = children(der, algT)[0]!;
  return {
    der,
    tbs: raw(der, tbsT),
    serial: raw(der, serialT),
    serialHex: content(der, serialT).toString('hex'),
    issuer: raw(der, issuerT),
    subject: raw(der, subjectT),
    spki: raw(der, spkiT),
    publicKeyBits: content(der, keyT).subarray(1),
    signatureAlgorithm: decodeOid(content(der, algOid)),
    signature: content(der, sigT).subarray(1),
  };
}

const partsCache = new WeakMap<Buffer, CertificateParts>();

/** Records the parts of a certificate its builder holds already (ca/x509.ts), so that partsOf need not read it. */
export function rememberParts(parts: CertificateParts): void {
  partsCache.set(parts.der, parts);
}

/** certificateParts, remembered per Buffer: CA and TSA certificates are the same Buffer on every request. */
export function partsOf(der: Buffer): CertificateParts {
  let parts = partsCache.get(der);
  if (!parts) {
    parts = certificateParts(der);
    partsCache.set(der, parts);
  }
  return parts;
}
