/**
 * CertificateList (RFC 5280 5.1) as DER: the long-lived root CRL the key ceremony signs (init.ts) and the CRLs
 * the running service signs for its online CAs (revocation/crl.ts) are built alike.
 */
import { createHash } from 'node:crypto';
import {
  algorithmIdentifier,
  bitString,
  explicit,
  integer,
  octetString,
  oid,
  partsOf,
  sequence,
  tlv,
  x509Time,
} from '../util/der.ts';
import { signatureAlgorithm, type SignatureAlgorithm } from '../crypto/signature.ts';
import type { KeyedCertificate } from './authority.ts';

export const CRL_OID = {
  cRLNumber: '2.5.29.20',
  reasonCode: '2.5.29.21',
  authorityKeyIdentifier: '2.5.29.35',
} as const;

/**
 * cRLNumber of the CRL of `now`'s second listing `revokedCount` certificates: grows with time and with every
 * revocation, the same on every instance (RFC 5280 5.2.3: monotonically increasing; see revocation/crl.ts).
 */
export function crlNumber(now: Date, revokedCount: number): number {
  return Math.floor(now.getTime() / 1000) * 100_000 + revokedCount;
}

export const wholeSeconds = (d: Date) => new Date(Math.floor(d.getTime() / 1000) * 1000);
export const crlExtension = (extnID: string, value: Buffer) => sequence(oid(extnID), octetString(value));

/** SHA-1 of a CA's public key: the CRL's authorityKeyIdentifier and the store's issuerKeyId */
export function caKeyId(caDer: Buffer): Buffer {
  return createHash('sha1').update(partsOf(caDer).publicKeyBits).digest();
}

export interface CrlContent {
  readonly ca: KeyedCertificate;
  /** revokedCertificates entries (RFC 5280 5.1.2.6), DER, in order */
  readonly entries: readonly Buffer[];
  readonly revokedCount: number;
  readonly now: Date;
  readonly validitySeconds: number;
}

/** TBSCertList with thisUpdate = now (whole seconds), cRLNumber = crlNumber(now, revokedCount), and its algorithm. */
export function crlToBeSigned(c: CrlContent): { tbs: Buffer; alg: SignatureAlgorithm } {
  const alg = signatureAlgorithm(c.ca.key, c.ca.issuer.hash);
  const thisUpdate = wholeSeconds(c.now);
  const nextUpdate = new Date(thisUpdate.getTime() + c.validitySeconds * 1000);
  const crlExtensions = sequence(
    crlExtension(CRL_OID.authorityKeyIdentifier, sequence(tlv(0x80, caKeyId(c.ca.der)))),
    crlExtension(CRL_OID.cRLNumber, integer(crlNumber(c.now, c.revokedCount))),
  );
  const tbs = sequence(
    integer(1), // v2: extensions present (RFC 5280 5.1.2.1)
    algorithmIdentifier(alg.oid, alg.nullParams),
    partsOf(c.ca.der).subject,
    x509Time(thisUpdate),
    x509Time(nextUpdate),
    ...(c.entries.length ? [sequence(...c.entries)] : []), // absent rather than empty (RFC 5280 5.1.2.6)
    explicit(0, crlExtensions),
  );
  return { tbs, alg };
}

/** CertificateList ::= SEQUENCE { tbsCertList, signatureAlgorithm, signatureValue } */
export function certificateList(tbs: Buffer, alg: SignatureAlgorithm, signature: Buffer): Buffer {
  return sequence(tbs, algorithmIdentifier(alg.oid, alg.nullParams), bitString(signature));
}
