/**
 * What every signature builder takes and gives (builders.ts registers them by format and level). Its own
 * module so the level builders (cades-levels.ts, pades.ts, xades.ts) need not import the table that imports
 * them.
 */
import type { HashAlgorithm } from '../crypto/algorithms.ts';
import type { CmsCertificate } from '../crypto/cms.ts';
import type { SigningKey } from '../crypto/signature.ts';
import type { RevocationProvider } from '../revocation/provider.ts';
import type { TimestampProvider } from '../timestamping/provider.ts';

export interface SignatureInput {
  /** the document digest we were sent */
  readonly hash: Buffer;
  readonly hashAlgorithm: HashAlgorithm;
  readonly signerCertificate: CmsCertificate;
  /** DER CA certificates up to (excluding) the root, issuing CA first */
  readonly chain: readonly Buffer[];
  /** the signer key of this request, wherever it lives (custody/) */
  readonly key: SigningKey;
  readonly signingTime: Date;
  readonly services: AdesServices;
}

export interface AdesServices {
  readonly timestamps?: TimestampProvider;
  readonly revocation?: RevocationProvider;
}

export interface RevocationInfo {
  readonly ocsp: readonly Buffer[];
  readonly crl: readonly Buffer[];
}

export interface BuiltSignature {
  /** DER of what goes into SignatureObject (CMS ContentInfo for C and P, XML bytes for X) */
  readonly signature: Buffer;
  /** validation material used (B-LT and above; PAdES at every level), reported in the response's revocationInfo */
  readonly revocation?: RevocationInfo;
  /** genTime of the signature-time-stamp (B-T and above) */
  readonly timeStampedAt?: Date;
}

export type SignatureBuilder = (input: SignatureInput) => Promise<BuiltSignature>;
