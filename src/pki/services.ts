/**
 * The trust services a signature at B-T and above needs, as interfaces: the signature builders in ades/
 * depend on these, the implementations (in-process TSA and OCSP responder, or external ones) live in pki/.
 */
import type { HashAlgorithm } from '../ades/algorithms.ts';

/** RFC 3161 time-stamping: a TimeStampToken (DER ContentInfo) over a message imprint. */
export interface TimestampProvider {
  timestamp(messageImprint: Uint8Array, hashAlgorithm: HashAlgorithm): Promise<Buffer>;
  /** DER certificates of the TSA chain (TSA certificate first), for B-LT validation material */
  readonly chain: readonly Buffer[];
}

/** Revocation material for certificates we (or our TSA) use: OCSP responses and CRLs, DER. */
export interface RevocationProvider {
  /** an OCSP response (DER OCSPResponse) for a certificate issued by `issuerDer`, or undefined when OCSP does not apply */
  ocspResponse(certificateDer: Buffer, issuerDer: Buffer): Promise<Buffer | undefined>;
  /** current CRL (DER CertificateList) of a CA we operate, or undefined */
  crl(issuerDer: Buffer): Promise<Buffer | undefined>;
}
