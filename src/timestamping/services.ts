/**
 * The trust services a signature at B-T and above needs, as interfaces: the signature builders in ades/
 * depend on these, the implementations (in-process TSA and OCSP responder, or external ones) live in pki/.
 */
import type { HashAlgorithm } from '../crypto/algorithms.ts';

/** RFC 3161 time-stamping: a TimeStampToken (DER ContentInfo) over a message imprint. */
export interface TimestampProvider {
  timestamp(messageImprint: Uint8Array, hashAlgorithm: HashAlgorithm): Promise<Buffer>;
  /** DER certificates of the TSA chain (TSA certificate first), for B-LT validation material */
  readonly chain: readonly Buffer[];
}

/**
 * Revocation material for certificates we (or our TSA) use: OCSP responses and CRLs, DER. With `after` (the
 * signature time-stamp's genTime at B-LT and B-LTA), the data is issued strictly after it: OCSP producedAt and
 * thisUpdate, CRL thisUpdate > after (EU DSS's fresh revocation data; issue 11). A provider may wait for its
 * clock to pass `after` to do so.
 */
export interface RevocationProvider {
  /** DER certificates of the CAs whose revocation data this provider gives: issuers that a signature may not carry (the root) */
  readonly authorities?: readonly Buffer[];
  /** an OCSP response (DER OCSPResponse) for a certificate issued by `issuerDer`, or undefined when OCSP does not apply */
  ocspResponse(certificateDer: Buffer, issuerDer: Buffer, after?: Date): Promise<Buffer | undefined>;
  /** current CRL (DER CertificateList) of a CA we operate, or undefined */
  crl(issuerDer: Buffer, after?: Date): Promise<Buffer | undefined>;
}
