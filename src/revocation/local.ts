/**
 * Revocation material from our own sources for the B-LT builders: OCSP responses of our delegated responders
 * (the issuing CA's for signer certificates, the root's for the issuing CA and the TSA), CRLs of our CAs
 * otherwise, each issued after a given time when asked.
 */
import { DomainError } from '../domain-error.ts';
import type { Store } from '../store/types.ts';
import { partsOf, type CertificateParts } from '../util/der.ts';
import type { CrlSource } from './crl.ts';
import type { OcspResponder } from './ocsp.ts';
import type { RevocationProvider } from './provider.ts';

/** How long an OCSP response made for a signature is reused: the hashes of one signDoc call share one. */
const OCSP_REUSE_MS = 10_000;
const OCSP_CACHE_ENTRIES = 256;
/**
 * Longest wait for our clock to pass a time-stamp's genTime (by a whole second, for a CRL). Our own TSA's genTime
 * is behind our clock; an external TSA whose clock runs further ahead than this is refused rather than waited for.
 */
const MAX_FRESHNESS_WAIT_MS = 3_000;

/** An OCSP response we made: DER, its producedAt and when we made it (ms). */
interface OcspEntry {
  readonly der: Buffer;
  readonly producedAt: number;
  readonly at: number;
}

function authoritiesOf(responders: readonly OcspResponder[], crls: readonly CrlSource[]): readonly Buffer[] {
  const all = [...responders.map((r) => r.caDer), ...crls.map((c) => c.caDer)];
  return all.filter((der, i) => all.findIndex((d) => d.equals(der)) === i);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * RevocationProvider from our own sources: OCSP responses of the responder of the certificate's CA, the CA's
 * CRL when it has no responder. The root's key is offline and its CRL is signed at key ceremonies only, so
 * fresh status for the certificates it issued (issuing CA, TSA) comes from its delegated responder, whose
 * certificate the root issued at the ceremony (RFC 6960 4.2.2.2). A response is reused for a few seconds, so
 * that the signatures of one request (and its revocationInfo) carry one response per certificate rather than
 * one per hash.
 *
 * Freshness (`after`, the signature time-stamp's genTime): OCSP producedAt/thisUpdate carry milliseconds
 * (RFC 6960 4.2.1 allows a fraction), as our TSA's genTime does (RFC 3161 2.4.2), so a response is dated after
 * the time-stamp once our clock has passed genTime by a millisecond, which it mostly has by the time we sign.
 * A CRL's thisUpdate is whole seconds (RFC 5280 5.1.2.4): for a CRL we wait until our clock reaches the first
 * whole second after genTime. We never date data into the future: our responder would state a time that was
 * not yet.
 */
export class LocalRevocation implements RevocationProvider {
  readonly #recent = new Map<string, OcspEntry>();
  readonly #making = new Map<string, Promise<OcspEntry>>();
  #responders: readonly OcspResponder[];
  readonly #status: Pick<Store, 'certificateStatus'>;
  #crls: readonly CrlSource[];
  /** the CA certificates of the responders and CRLs, distinct: read for every signature, set with them */
  #authorities: readonly Buffer[];
  readonly #clock: () => Date;

  /** `responders`: one per CA that runs one; `crls`: one per CA */
  constructor(
    responders: readonly OcspResponder[],
    status: Pick<Store, 'certificateStatus'>,
    crls: readonly CrlSource[],
    clock: () => Date = () => new Date(),
  ) {
    this.#responders = responders;
    this.#status = status;
    this.#crls = crls;
    this.#authorities = authoritiesOf(responders, crls);
    this.#clock = clock;
  }

  /** The responders and CRLs from now on (an issuing CA rollover adds the new CA's beside the old one's). */
  replace(responders: readonly OcspResponder[], crls: readonly CrlSource[]): void {
    this.#responders = responders;
    this.#crls = crls;
    this.#authorities = authoritiesOf(responders, crls);
  }

  get authorities(): readonly Buffer[] {
    return this.#authorities;
  }

  /** Waits until our clock reaches the first multiple of `grainMs` after `after`: times of that grain exceed it. */
  async #pass(after: Date | undefined, grainMs: number): Promise<void> {
    if (!after) return;
    const target = Math.floor(after.getTime() / grainMs) * grainMs + grainMs;
    if (target - this.#clock().getTime() > MAX_FRESHNESS_WAIT_MS) {
      throw new DomainError(
        'timestamp_ahead',
        'the time-stamp is dated ahead of our clock; no revocation data issued after it can be given',
      );
    }
    for (let wait = target - this.#clock().getTime(); wait > 0; wait = target - this.#clock().getTime())
      await sleep(wait);
  }

  async ocspResponse(certificateDer: Buffer, issuerDer: Buffer, after?: Date): Promise<Buffer | undefined> {
    const responder = this.#responders.find((r) => r.caDer.equals(issuerDer));
    if (!responder) return undefined;
    const parts = partsOf(certificateDer);
    const key = `${responder.caKeyId}:${parts.serialHex}`;
    const usable = (r: OcspEntry | undefined): r is OcspEntry =>
      r !== undefined &&
      this.#clock().getTime() - r.at < OCSP_REUSE_MS &&
      (after === undefined || r.producedAt > after.getTime());
    const recent = this.#recent.get(key);
    if (usable(recent)) return recent.der;
    await this.#pass(after, 1); // producedAt in milliseconds
    // the signatures of one request are built concurrently: one of them makes the response, the others take it
    const pending = this.#making.get(key);
    const made = pending ? await pending.catch(() => undefined) : this.#recent.get(key);
    if (usable(made)) return made.der;
    const making = this.#makeOcsp(responder, parts, key);
    this.#making.set(key, making);
    try {
      return (await making).der;
    } finally {
      if (this.#making.get(key) === making) this.#making.delete(key);
    }
  }

  async #makeOcsp(responder: OcspResponder, parts: CertificateParts, key: string): Promise<OcspEntry> {
    let status;
    try {
      status = await this.#status.certificateStatus(responder.caKeyId, parts.serialHex);
    } catch {
      // our own store, not an upstream
      throw new DomainError('certificate_store_unavailable', 'the certificate store is unavailable');
    }
    const { der, producedAt } = await responder.signed([{ certId: responder.certIdFor(parts), status }]);
    const entry = { der, producedAt: producedAt.getTime(), at: this.#clock().getTime() };
    this.#recent.delete(key);
    this.#recent.set(key, entry);
    if (this.#recent.size > OCSP_CACHE_ENTRIES) this.#recent.delete(this.#recent.keys().next().value!);
    return entry;
  }

  async crl(issuerDer: Buffer, after?: Date): Promise<Buffer | undefined> {
    const issuer = this.#crls.find((c) => c.caDer.equals(issuerDer));
    if (!issuer) return undefined;
    await this.#pass(after, 1000); // thisUpdate in whole seconds
    try {
      return await issuer.current(after);
    } catch (err) {
      if (err instanceof DomainError) throw err;
      throw new DomainError(
        'revocation_unavailable',
        'no CRL issued after the time-stamp is available (a ceremony CRL, or a clock behind)',
      );
    }
  }
}
