/**
 * CRLs of our CAs (RFC 5280 5): version 2, authorityKeyIdentifier and a cRLNumber that only grows, one entry
 * per revoked certificate of the CA's key (from the store) with its reasonCode. Served at GET /crl/root.crl
 * and /crl/issuing.crl, and put into B-LT signatures for the certificates the root issued (issuing CA, TSA),
 * which have no OCSP responder.
 *
 * Several instances serve CRLs behind one load balancer, and a relying party must never see the cRLNumber go
 * back from one fetch to the next (RFC 5280 5.2.3: monotonically increasing). So a CRL is a function of the
 * shared store and the clock, the same on every instance: the CRL of second t with n revoked certificates has
 *   thisUpdate = t (RFC 5280 5.1.2.4: whole seconds),  cRLNumber = t * 100000 + n
 * Revocations are never undone and the store keeps revoked certificates after they expire, so n never
 * decreases: the number grows with time and with every revocation, whichever instance (or `qtsp pki revoke`)
 * wrote it; two instances in the same second with the same list build the same CRL. Instances need
 * synchronised clocks (NTP), as any CA does. Each public fetch asks the store for the revoked certificates (one
 * query) and signs again only when the second or the list changed, so a revocation anywhere shows at once.
 * A B-LT signature asks for a CRL issued after its time-stamp (current(after), EN 319 122-1
 * freshness): it takes the last one this process built when that is fresh enough, else a new one.
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
import type { KeyedCertificate } from '../ca/authority.ts';
import { signatureAlgorithm } from '../crypto/signature.ts';
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

/** cRLNumber of the CRL of `now`'s second listing `revokedCount` certificates (see the top of the file) */
export function crlNumber(now: Date, revokedCount: number): number {
  return Math.floor(now.getTime() / 1000) * 100_000 + revokedCount;
}

/** A CRL as issued: its number, DER, when this process issued it (ms) and its thisUpdate (ms, whole seconds). */
interface Issued {
  readonly number: number;
  readonly der: Buffer;
  readonly issuedAt: number;
  readonly thisUpdate: number;
}

const extension = (extnID: string, value: Buffer) => sequence(oid(extnID), octetString(value));
const wholeSeconds = (d: Date) => new Date(Math.floor(d.getTime() / 1000) * 1000);

function entry(revoked: RevokedCertificate): Buffer {
  // RFC 5280 5.3.1: reasonCode unspecified SHOULD be absent
  const extensions =
    revoked.reason === 'unspecified'
      ? []
      : [sequence(extension(CRL_OID.reasonCode, enumerated(CRL_REASON_CODE[revoked.reason])))];
  return sequence(
    integerFromBytes(Buffer.from(revoked.serialHex, 'hex')),
    x509Time(wholeSeconds(revoked.revokedAt)),
    ...extensions,
  );
}

export class CrlIssuer {
  readonly #o: CrlIssuerOptions;
  readonly #clock: () => Date;
  /** SHA-1 of the CA's public key: the store's issuerKeyId and the CRL's authorityKeyIdentifier */
  readonly keyId: Buffer;
  #current: Issued | undefined;
  #pending: Promise<Issued> | undefined;

  constructor(options: CrlIssuerOptions) {
    this.#o = options;
    this.#clock = options.clock ?? (() => new Date());
    this.keyId = createHash('sha1').update(partsOf(options.ca.der).publicKeyBits).digest();
  }

  /** the CA's certificate, DER */
  get caDer(): Buffer {
    return this.#o.ca.der;
  }

  /**
   * The current CRL (DER CertificateList); rejects when the store fails. With `after`: a CRL whose thisUpdate
   * is strictly later (EN 319 122-1 B-LT freshness); the caller has waited until our clock is past
   * `after` by a whole second, so a CRL issued now qualifies.
   */
  async current(after?: Date): Promise<Buffer> {
    // signing path: the last CRL built here serves while it is after the time-stamp and at most refreshSeconds old
    const fresh = (c: Issued | undefined): c is Issued =>
      after !== undefined &&
      c !== undefined &&
      this.#clock().getTime() - c.issuedAt < this.#o.refreshSeconds * 1000 &&
      c.thisUpdate > after.getTime();
    // a pending issuance may have read the clock before `after`: then one more, which reads it after
    for (let attempt = 0; attempt < 3; attempt++) {
      if (fresh(this.#current)) return this.#current.der;
      this.#pending ??= this.#issue().finally(() => (this.#pending = undefined));
      const issued = await this.#pending;
      if (after === undefined || issued.thisUpdate > after.getTime()) return issued.der;
      this.#current = undefined;
    }
    throw new Error(`no CRL could be issued after ${after!.toISOString()}: the clock is behind`);
  }

  /** the next signing-path current() asks the store again (after a revocation through this process) */
  invalidate(): void {
    this.#current = undefined;
  }

  /** The CRL of this second and the store's list: the one built last when both are unchanged, else a new one. */
  async #issue(): Promise<Issued> {
    const revoked = this.#o.revoked ? await this.#o.revoked.revokedCertificates(this.keyId.toString('hex')) : [];
    const now = this.#clock();
    const number = crlNumber(now, revoked.length);
    if (this.#current?.number === number) return this.#current;
    const der = await this.build(revoked, now);
    this.#current = { der, number, issuedAt: now.getTime(), thisUpdate: wholeSeconds(now).getTime() };
    return this.#current;
  }

  /** CertificateList (RFC 5280 5.1) for these entries, thisUpdate = now (whole seconds), cRLNumber = crlNumber(). */
  async build(revoked: readonly RevokedCertificate[], now: Date): Promise<Buffer> {
    const key = this.#o.ca.key;
    const alg = signatureAlgorithm(key, this.#o.ca.issuer.hash);
    const algId = algorithmIdentifier(alg.oid, alg.nullParams);
    const thisUpdate = wholeSeconds(now);
    const nextUpdate = new Date(thisUpdate.getTime() + this.#o.validitySeconds * 1000);
    const entries = [...revoked].sort((a, b) => a.serialHex.localeCompare(b.serialHex)).map(entry);
    const crlExtensions = sequence(
      extension(CRL_OID.authorityKeyIdentifier, sequence(tlv(0x80, this.keyId))),
      extension(CRL_OID.cRLNumber, integer(crlNumber(now, revoked.length))),
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
    return sequence(tbs, algId, bitString(await key.sign(alg.hash, tbs)));
  }
}
