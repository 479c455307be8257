/**
 * CRLs of our CAs (RFC 5280 5): version 2, authorityKeyIdentifier and a cRLNumber that only grows, one entry
 * per revoked certificate of the CA's key (from the store) with its reasonCode. Served at GET /crl/root.crl
 * and /crl/issuing.crl, and put into B-LT signatures for the certificates the root issued (issuing CA, TSA),
 * which have no OCSP responder.
 *
 * A CRL is issued anew at most every `refreshSeconds` (a CA signs CRLs periodically, not per request; the
 * root's key in particular), and at once after a revocation through this process (invalidate()).
 */
import { createHash } from 'node:crypto';
import {
  algorithmIdentifier,
  bitString,
  enumerated,
  explicit,
  integer,
  integerFromBytes,
  octetString,
  oid,
  partsOf,
  sequence,
  tlv,
  x509Time,
} from '../util/der.ts';
import type { RevokedCertificate, Store } from '../store/types.ts';
import type { KeyedCertificate } from './authority.ts';
import { signatureAlgorithm, signWith } from './keys.ts';
import { CRL_REASON_CODE } from './ocsp.ts';

export const CRL_OID = {
  cRLNumber: '2.5.29.20',
  reasonCode: '2.5.29.21',
  authorityKeyIdentifier: '2.5.29.35',
} as const;

export const PKIX_CRL = 'application/pkix-crl';

export type RevokedSource = Pick<Store, 'revokedCertificates'>;

export interface CrlIssuerOptions {
  readonly ca: KeyedCertificate;
  /** undefined: no store, an empty CRL */
  readonly revoked?: RevokedSource;
  readonly validitySeconds: number;
  readonly refreshSeconds: number;
  readonly clock?: () => Date;
}

const extension = (extnID: string, value: Buffer) => sequence(oid(extnID), octetString(value));
const wholeSeconds = (d: Date) => new Date(Math.floor(d.getTime() / 1000) * 1000);

function entry(revoked: RevokedCertificate): Buffer {
  // RFC 5280 5.3.1: reasonCode unspecified SHOULD be absent
  const extensions = revoked.reason === 'unspecified' ? [] : [sequence(extension(CRL_OID.reasonCode, enumerated(CRL_REASON_CODE[revoked.reason])))];
  return sequence(integerFromBytes(Buffer.from(revoked.serialHex, 'hex')), x509Time(wholeSeconds(revoked.revokedAt)), ...extensions);
}

export class CrlIssuer {
  readonly #o: CrlIssuerOptions;
  readonly #clock: () => Date;
  /** SHA-1 of the CA's public key: the store's issuerKeyId and the CRL's authorityKeyIdentifier */
  readonly keyId: Buffer;
  #current: { der: Buffer; issuedAt: number } | undefined;
  #pending: Promise<Buffer> | undefined;
  #lastNumber = 0;

  constructor(options: CrlIssuerOptions) {
    this.#o = options;
    this.#clock = options.clock ?? (() => new Date());
    this.keyId = createHash('sha1').update(partsOf(options.ca.der).publicKeyBits).digest();
  }

  /** the CA's certificate, DER */
  get caDer(): Buffer {
    return this.#o.ca.der;
  }

  /** The current CRL (DER CertificateList); rejects when the store fails. */
  async current(): Promise<Buffer> {
    const now = this.#clock().getTime();
    if (this.#current && now - this.#current.issuedAt < this.#o.refreshSeconds * 1000) return this.#current.der;
    this.#pending ??= this.#issue().finally(() => (this.#pending = undefined));
    return this.#pending;
  }

  /** the next current() issues a fresh CRL (after a revocation) */
  invalidate(): void {
    this.#current = undefined;
  }

  async #issue(): Promise<Buffer> {
    const revoked = this.#o.revoked ? await this.#o.revoked.revokedCertificates(this.keyId.toString('hex')) : [];
    const now = this.#clock();
    const der = this.build(revoked, now);
    this.#current = { der, issuedAt: now.getTime() };
    return der;
  }

  /** cRLNumber: milliseconds since 1970, never repeating in this process, so it grows across restarts too */
  #nextNumber(now: Date): number {
    this.#lastNumber = Math.max(now.getTime(), this.#lastNumber + 1);
    return this.#lastNumber;
  }

  /** CertificateList (RFC 5280 5.1) for these entries, thisUpdate = now. */
  build(revoked: readonly RevokedCertificate[], now: Date): Buffer {
    const key = this.#o.ca.privateKey;
    const alg = signatureAlgorithm(key, this.#o.ca.issuer.hash);
    const algId = algorithmIdentifier(alg.oid, alg.nullParams);
    const thisUpdate = wholeSeconds(now);
    const nextUpdate = new Date(thisUpdate.getTime() + this.#o.validitySeconds * 1000);
    const entries = [...revoked].sort((a, b) => a.serialHex.localeCompare(b.serialHex)).map(entry);
    const crlExtensions = sequence(
      extension(CRL_OID.authorityKeyIdentifier, sequence(tlv(0x80, this.keyId))),
      extension(CRL_OID.cRLNumber, integer(this.#nextNumber(now))),
    );
    const tbs = sequence(
      integer(1), // v2: extensions present (RFC 5280 5.1.2.1)
      algId,
      partsOf(this.#o.ca.der).subject,
      x509Time(thisUpdate),
      x509Time(nextUpdate),
      ...(entries.length ? [sequence(...entries)] : []), // absent rather than empty (RFC 5280 5.1.2.6)
      explicit(0, crlExtensions),
    );
    return sequence(tbs, algId, bitString(signWith(key, alg.hash, tbs)));
  }
}
