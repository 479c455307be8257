/**
 * Where relying parties find the status and the issuers of our certificates: the URLs of the OCSP responder,
 * the CRLs and the CA certificates (served by http/pki-routes.ts), and the certificate extensions pointing
 * at them: Authority Information Access (RFC 5280 4.2.2.1) and CRL Distribution Points (RFC 5280 4.2.1.13).
 */
import * as pkijs from 'pkijs';
import type { Config } from '../config/schema.ts';
import { urlHost } from '../util/listen.ts';
import { explicit, nullValue, oid, sequence, tlv } from '../util/der.ts';

export interface PkiUrls {
  readonly ocsp: string;
  readonly tsa: string;
  readonly rootCrl: string;
  readonly issuingCrl: string;
  readonly rootCert: string;
  readonly issuingCert: string;
}

/** Paths below the public base URL; pki-routes.ts serves exactly these. */
export const PKI_PATHS = {
  ocsp: '/ocsp',
  tsa: '/tsa',
  rootCrl: '/crl/root.crl',
  issuingCrl: '/crl/issuing.crl',
  rootCert: '/ca/root.crt',
  issuingCert: '/ca/issuing.crt',
} as const;

export const DEFAULT_PUBLIC_BASE_URL = 'http://127.0.0.1:8439';

export function pkiUrls(publicBaseUrl: string): PkiUrls {
  const base = publicBaseUrl.replace(/\/+$/, '');
  return {
    ocsp: base + PKI_PATHS.ocsp,
    tsa: base + PKI_PATHS.tsa,
    rootCrl: base + PKI_PATHS.rootCrl,
    issuingCrl: base + PKI_PATHS.issuingCrl,
    rootCert: base + PKI_PATHS.rootCert,
    issuingCert: base + PKI_PATHS.issuingCert,
  };
}

/** server.publicBaseUrl, or the address the plain-HTTP publication server listens on. */
export function publicBaseUrl(config: Config): string {
  if (config.server.publicBaseUrl) return config.server.publicBaseUrl;
  return `http://${urlHost(config.server.host)}:${config.server.publicationPort}`;
}

export const PKIX_OID = {
  authorityInfoAccess: '1.3.6.1.5.5.7.1.1',
  crlDistributionPoints: '2.5.29.31',
  adOcsp: '1.3.6.1.5.5.7.48.1',
  adCaIssuers: '1.3.6.1.5.5.7.48.2',
  /** RFC 6960 4.2.2.2.1 */
  ocspNoCheck: '1.3.6.1.5.5.7.48.1.5',
  ocspSigning: '1.3.6.1.5.5.7.3.9',
  timeStamping: '1.3.6.1.5.5.7.3.8',
} as const;

/** GeneralName uniformResourceIdentifier: [6] IMPLICIT IA5String */
const uri = (url: string) => tlv(0x86, Buffer.from(url, 'ascii'));

function extension(extnID: string, value: Buffer, critical = false): pkijs.Extension {
  return new pkijs.Extension({ extnID, critical, extnValue: new Uint8Array(value).buffer });
}

/** AuthorityInfoAccessSyntax: OCSP first when there is one, then caIssuers (RFC 5280 4.2.2.1). */
export function authorityInfoAccessExtension(caIssuersUrl: string, ocspUrl?: string): pkijs.Extension {
  const descriptions = [
    ...(ocspUrl ? [sequence(oid(PKIX_OID.adOcsp), uri(ocspUrl))] : []),
    sequence(oid(PKIX_OID.adCaIssuers), uri(caIssuersUrl)),
  ];
  return extension(PKIX_OID.authorityInfoAccess, sequence(...descriptions));
}

/** One DistributionPoint with distributionPoint fullName = the URL (RFC 5280 4.2.1.13). */
export function crlDistributionPointsExtension(url: string): pkijs.Extension {
  return extension(PKIX_OID.crlDistributionPoints, sequence(sequence(explicit(0, tlv(0xa0, uri(url))))));
}

/** id-pkix-ocsp-nocheck: the responder's own certificate is not checked for revocation (RFC 6960 4.2.2.2.1). */
export function ocspNoCheckExtension(): pkijs.Extension {
  return extension(PKIX_OID.ocspNoCheck, nullValue());
}

/** Certificates the issuing CA issues (signer certificates): its OCSP responder, its certificate, its CRL. */
export function issuingCaPointers(urls: PkiUrls): pkijs.Extension[] {
  return [authorityInfoAccessExtension(urls.issuingCert, urls.ocsp), crlDistributionPointsExtension(urls.issuingCrl)];
}

/**
 * Certificates the root issues (issuing CA, TSA, mail CA): our OCSP responder, which answers for them under the
 * root's delegated responder certificate, the root certificate, and the root's CRL (signed at key ceremonies).
 */
export function rootCaPointers(urls: PkiUrls): pkijs.Extension[] {
  return [authorityInfoAccessExtension(urls.rootCert, urls.ocsp), crlDistributionPointsExtension(urls.rootCrl)];
}
