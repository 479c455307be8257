/**
 * PAdES signatures (spec 2.12 signature_format P): the CMS a relying party embeds into a PDF's /Contents,
 * per the CMS profile of ETSI EN 319 142-1. It differs from CAdES (EN 319 122-1) in what the PDF carries
 * instead of the CMS:
 *   - no signing-time attribute (5.4 / 6.3: the claimed time is the PDF signature dictionary's /M);
 *   - B-LT and B-LTA: the validation material goes into the PDF's DSS dictionary, which the RP writes from the
 *     response's revocationInfo (required for P at B-LT, spec 2.12), not into SignedData (5.4.2); the CMS of
 *     B-LT and B-LTA is therefore the B-T CMS;
 *   - B-LTA: the archival time-stamp is a document time-stamp the RP appends to the PDF (5.5), not an
 *     archive-time-stamp-v3 attribute.
 * signing-certificate-v2 and content-type / message-digest are as in CAdES B-B (cades.ts).
 */
import { buildCadesBaselineB } from './cades.ts';
import type { BuiltSignature, SignatureInput } from './builders.ts';

/** PAdES baseline B-B: CAdES B-B without signing-time. */
export function buildPadesBaselineB(input: SignatureInput): BuiltSignature {
  return { signature: buildCadesBaselineB({ ...input, signingTime: undefined }) };
}
