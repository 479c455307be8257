/**
 * Signature builders by format and level (spec 2.12: C = CAdES, P = PAdES, X = XAdES; AdES-B-B .. B-LTA).
 * What is registered here is exactly what we offer (offer.ts reads this table): a combination without a
 * builder answers 400 naming what we do offer, never a wrong signature.
 */
import type { KeyObject } from 'node:crypto';
import type { HashAlgorithm } from './algorithms.ts';
import type { CmsCertificate } from './cades.ts';
import { buildCadesBaselineB } from './cades.ts';
import { buildCadesLevel } from './cades-levels.ts';
import { buildPadesBaselineB, buildPadesBaselineLT, buildPadesBaselineT } from './pades.ts';
import { buildXadesBaselineB, buildXadesBaselineT } from './xades.ts';
import type { RevocationProvider, TimestampProvider } from '../pki/services.ts';
import type { ConformanceLevel, SignatureFormat } from '../signing/request.ts';

export interface SignatureInput {
  /** the document digest we were sent */
  readonly hash: Buffer;
  readonly hashAlgorithm: HashAlgorithm;
  readonly signerCertificate: CmsCertificate;
  /** DER CA certificates up to (excluding) the root, issuing CA first */
  readonly chain: readonly Buffer[];
  readonly privateKey: KeyObject;
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
  /** validation material used (B-LT and above), reported in the response's revocationInfo */
  readonly revocation?: RevocationInfo;
}

export type SignatureBuilder = (input: SignatureInput) => Promise<BuiltSignature>;

export const BUILDERS: Readonly<Record<SignatureFormat, Partial<Record<ConformanceLevel, SignatureBuilder>>>> = {
  C: {
    'AdES-B-B': async (i) => ({ signature: buildCadesBaselineB({ ...i }) }),
    'AdES-B-T': (i) => buildCadesLevel('T', i),
    'AdES-B-LT': (i) => buildCadesLevel('LT', i),
    'AdES-B-LTA': (i) => buildCadesLevel('LTA', i),
  },
  P: {
    'AdES-B-B': async (i) => buildPadesBaselineB(i),
    'AdES-B-T': buildPadesBaselineT,
    'AdES-B-LT': buildPadesBaselineLT,
    'AdES-B-LTA': buildPadesBaselineLT, // the same CMS: B-LTA's document time-stamp is the RP's (EN 319 142-1 5.5)
  },
  X: {
    'AdES-B-B': buildXadesBaselineB,
    'AdES-B-T': buildXadesBaselineT,
  },
};

export function builderFor(format: SignatureFormat, level: ConformanceLevel): SignatureBuilder | undefined {
  return BUILDERS[format][level];
}
