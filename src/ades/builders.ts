/**
 * Signature builders by format and level (spec 2.12: C = CAdES, P = PAdES, X = XAdES; AdES-B-B .. B-LTA).
 * What is registered here is exactly what we offer (offer.ts reads this table): a combination without a
 * builder is refused naming what we do offer, never a wrong signature.
 */
import { buildCadesBaselineB } from './cades.ts';
import { buildCadesLevel } from './cades-levels.ts';
import { buildPadesBaselineB, buildPadesBaselineLT, buildPadesBaselineT } from './pades.ts';
import { buildXadesBaselineB, buildXadesBaselineT } from './xades.ts';
import type { ConformanceLevel, SignatureFormat } from './formats.ts';
import type { SignatureBuilder } from './types.ts';

export const BUILDERS: Readonly<Record<SignatureFormat, Partial<Record<ConformanceLevel, SignatureBuilder>>>> = {
  C: {
    'AdES-B-B': async (i) => ({ signature: await buildCadesBaselineB({ ...i }) }),
    'AdES-B-T': (i) => buildCadesLevel('T', i),
    'AdES-B-LT': (i) => buildCadesLevel('LT', i),
    'AdES-B-LTA': (i) => buildCadesLevel('LTA', i),
  },
  P: {
    'AdES-B-B': buildPadesBaselineB,
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
