/**
 * What this QTSP offers: signature formats, conformance levels and signature algorithms (spec 2.12). A request
 * for anything else is a 400 that names what we do offer, never a wrong signature.
 */
import { badRequest } from '../errors.ts';
import type { KeyAlgorithm } from '../pki/keys.ts';
import type { HashAlgorithm } from './algorithms.ts';
import { SIGNATURE_OIDS } from './algorithms.ts';
import { BUILDERS } from './builders.ts';
import { XADES_HASH_NAMES, xadesSupportsHash } from './xades.ts';
import type { ConformanceLevel, SignatureFormat } from '../signing/request.ts';

const LEVELS: readonly ConformanceLevel[] = ['AdES-B-B', 'AdES-B-T', 'AdES-B-LT', 'AdES-B-LTA'];

/** format -> levels with a registered builder */
export const OFFERED: Readonly<Record<SignatureFormat, readonly ConformanceLevel[]>> = Object.fromEntries(
  (Object.keys(BUILDERS) as SignatureFormat[]).map((f) => [f, LEVELS.filter((l) => BUILDERS[f][l])]),
) as Record<SignatureFormat, ConformanceLevel[]>;

const EC_PUBLIC_KEY = '1.2.840.10045.2.1';

export interface SigningChoice {
  readonly format: SignatureFormat;
  readonly level: ConformanceLevel;
  readonly keyAlgorithm: KeyAlgorithm;
}

function offeredText(): string {
  return Object.entries(OFFERED)
    .filter(([, levels]) => levels.length)
    .map(([f, levels]) => `${f} at ${levels.join(', ')}`)
    .join('; ');
}

export function chooseSigning(format: SignatureFormat, level: ConformanceLevel, hash: HashAlgorithm, signAlgo?: string, signAlgoParams?: string): SigningChoice {
  if (!OFFERED[format].includes(level)) {
    throw badRequest(`signature_format ${format} at ${level} is not offered; this QTSP signs ${offeredText()}`);
  }
  if (format === 'X' && !xadesSupportsHash(hash)) {
    throw badRequest(
      `signature_format X is offered with ${XADES_HASH_NAMES.join(', ')} document hashes only, not ${hash.name}: ` +
        'XML signature verifiers in common use (xmlsec1 1.2, WebCrypto) have no SHA-3; C and P are offered with all six hashes',
    );
  }
  const ecdsaForHash = (SIGNATURE_OIDS.ecdsa as Record<string, string>)[hash.node];
  if (signAlgo !== undefined && signAlgo !== EC_PUBLIC_KEY && signAlgo !== ecdsaForHash) {
    throw badRequest(`signAlgo ${signAlgo} is not offered; offered: ${EC_PUBLIC_KEY} (ECDSA P-256) or ${ecdsaForHash} (ECDSA with ${hash.name}, the document hash)`);
  }
  if (signAlgoParams !== undefined) throw badRequest('signAlgoParams must be absent for ECDSA');
  return { format, level, keyAlgorithm: 'P-256' };
}
