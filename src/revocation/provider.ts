/**
 * The revocation material a signature at B-LT and above needs, as an interface: the signature builders in ades/
 * depend on it; LocalRevocation (local.ts) gives it from our own OCSP responder and CRLs.
 */

/**
 * Revocation material for certificates we (or our TSA) use: OCSP responses and CRLs, DER. With `after` (the
 * signature time-stamp's genTime at B-LT and B-LTA), the data is issued strictly after it: OCSP producedAt and
 * thisUpdate, CRL thisUpdate > after (fresh revocation data, as EU DSS validation expects). A provider may wait
 * for its clock to pass `after` to do so.
 */
export interface RevocationProvider {
  /** DER certificates of the CAs whose revocation data this provider gives: issuers a signature may not carry */
  readonly authorities?: readonly Buffer[];
  /** an OCSP response (DER OCSPResponse) for a certificate issued by `issuerDer`; undefined when OCSP does not apply */
  ocspResponse(certificateDer: Buffer, issuerDer: Buffer, after?: Date): Promise<Buffer | undefined>;
  /** current CRL (DER CertificateList) of a CA we operate, or undefined */
  crl(issuerDer: Buffer, after?: Date): Promise<Buffer | undefined>;
}
