/**
 * CRLs of our CAs (RFC 5280 5): version 2, authorityKeyIdentifier and a cRLNumber that only grows, one entry
 * per revoked certificate of the CA's key (from the store) with its reasonCode. The issuing CA's CRL is signed
 * here (CrlIssuer, GET /crl/issuing.crl); the root's is signed at the key ceremony with a long validity and
 * served as it is (CeremonyCrl, GET /crl/root.crl), since the root key is offline.
 *
 * Several instances serve the issuing CA's CRLs behind one load balancer, and a relying party must never see the
 * cRLNumber go back from one fetch to the next (RFC 5280 5.2.3: monotonically increasing). So a CRL is a function
 * of the shared store and the clock, the same on every instance: the CRL of second t with n revoked certificates has
 *   thisUpdate = t (RFC 5280 5.1.2.4: whole seconds),  cRLNumber = t * 100000 + n
 * Revocations are never undone and the store keeps revoked certificates after they expire, so n never
 * decreases: the number grows with time and with every revocation, whichever instance (or `qtsp pki revoke`)
 * wrote it; two instances in the same second with the same list build the same CRL. Instances need
 * synchronised clocks (NTP), as any CA does. Each public fetch asks the store for the revoked certificates (one
 * query) and signs again only when the second or the list changed, so a revocation anywhere shows at once.
 * A B-LT signature asks for a CRL issued after its time-stamp (current(after), EN 319 122-1
 * freshness): it takes the last one this process built when that is fresh enough, else a new one.
 */
import * as pkijs from 'pkijs';
import { DomainError } from '../domain-error.ts';
import { enumerated, integerFromBytes, sequence, x509Time } from '../util/der.ts';
import type { RevokedCertificate, Store } from '../store/types.ts';
import type { KeyedCertificate } from '../ca/authority.ts';
import {
  caKeyId,
  certificateList,
  CRL_OID,
  crlExtension,
  crlNumber,
  crlToBeSigned,
  wholeSeconds,
} from '../ca/certificate-list.ts';
import { CRL_REASON_CODE } from './ocsp.ts';

export { CRL_OID, crlNumber };

export const PKIX_CRL = 'application/pkix-crl';

export type RevokedSource = Pick<Store, 'revokedCertificates'>;

export interface CrlIssuerOptions {
  readonly ca: KeyedCertificate;
  /** undefined: no store, an empty CRL */
  readonly revoked?: RevokedSource;
  readonly validitySeconds: number;
  readonly refreshSeconds: number;
  readonly clock?: () => Date;
  /** told of each CRL signed here, after it is built (the journal, journal/ca-events.ts); must not throw */
  readonly issued?: (crl: {
    readonly der: Buffer;
    readonly number: number;
    readonly thisUpdate: Date;
    readonly nextUpdate: Date;
    readonly revokedCount: number;
  }) => void;
}

/** A CRL as issued: its number, DER, when this process issued it (ms) and its thisUpdate (ms, whole seconds). */
interface Issued {
  readonly number: number;
  readonly der: Buffer;
  readonly issuedAt: number;
  readonly thisUpdate: number;
}

function entry(revoked: RevokedCertificate): Buffer {
  // RFC 5280 5.3.1: reasonCode unspecified SHOULD be absent
  const extensions =
    revoked.reason === 'unspecified'
      ? []
      : [sequence(crlExtension(CRL_OID.reasonCode, enumerated(CRL_REASON_CODE[revoked.reason])))];
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
    this.keyId = caKeyId(options.ca.der);
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
    const revoked = await this.#revoked();
    const now = this.#clock();
    const number = crlNumber(now, revoked.length);
    if (this.#current?.number === number) return this.#current;
    const der = await this.build(revoked, now);
    const thisUpdate = wholeSeconds(now);
    this.#current = { der, number, issuedAt: now.getTime(), thisUpdate: thisUpdate.getTime() };
    this.#o.issued?.({
      der,
      number,
      thisUpdate,
      nextUpdate: new Date(thisUpdate.getTime() + this.#o.validitySeconds * 1000),
      revokedCount: revoked.length,
    });
    return this.#current;
  }

  /** the store's entries for this CA; a store that fails is our own failure, not an upstream's */
  async #revoked(): Promise<readonly RevokedCertificate[]> {
    if (!this.#o.revoked) return [];
    try {
      return await this.#o.revoked.revokedCertificates(this.keyId.toString('hex'));
    } catch {
      throw new DomainError('certificate_store_unavailable', 'the certificate store is unavailable');
    }
  }

  /** CertificateList (RFC 5280 5.1) for these entries, thisUpdate = now (whole seconds), cRLNumber = crlNumber(). */
  async build(revoked: readonly RevokedCertificate[], now: Date): Promise<Buffer> {
    const entries = [...revoked].sort((a, b) => a.serialHex.localeCompare(b.serialHex)).map(entry);
    const { ca, validitySeconds } = this.#o;
    const { tbs, alg } = crlToBeSigned({ ca, entries, revokedCount: revoked.length, now, validitySeconds });
    return certificateList(tbs, alg, await ca.key.sign(alg.hash, tbs));
  }
}

/** What serves and embeds a CA's CRL: an online CrlIssuer, or the CRL a key ceremony signed (CeremonyCrl). */
export interface CrlSource {
  /** the CA's certificate, DER */
  readonly caDer: Buffer;
  /** SHA-1 of the CA's public key: the store's issuerKeyId */
  readonly keyId: Buffer;
  current(after?: Date): Promise<Buffer>;
}

/**
 * The root's CRL, signed at the key ceremony with a long nextUpdate: the root key is offline, so the service
 * serves this file as it is. It is never fresher than a time-stamp made after the ceremony; the status of
 * the certificates the root issued comes from the root's delegated OCSP responder instead (local.ts).
 */
export class CeremonyCrl implements CrlSource {
  readonly caDer: Buffer;
  readonly keyId: Buffer;
  #der: Buffer;
  #thisUpdate: number;

  constructor(caDer: Buffer, crlDer: Buffer) {
    this.caDer = caDer;
    this.keyId = caKeyId(caDer);
    this.#der = crlDer;
    this.#thisUpdate = CeremonyCrl.#thisUpdateOf(crlDer);
  }

  static #thisUpdateOf(crlDer: Buffer): number {
    return pkijs.CertificateRevocationList.fromBER(new Uint8Array(crlDer)).thisUpdate.value.getTime();
  }

  /** The CRL of a later ceremony: served from now on. */
  renew(crlDer: Buffer): void {
    this.#thisUpdate = CeremonyCrl.#thisUpdateOf(crlDer);
    this.#der = crlDer;
  }

  async current(after?: Date): Promise<Buffer> {
    if (after && this.#thisUpdate <= after.getTime())
      throw new Error('the root CRL is signed at key ceremonies only: none is issued after this time');
    return this.#der;
  }
}
