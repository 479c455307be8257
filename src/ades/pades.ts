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
import { SignDocError } from '../errors.ts';
import { buildCadesBaselineB } from './cades.ts';
import { buildCadesLevel, validationData } from './cades-levels.ts';
import type { BuiltSignature, SignatureInput } from './builders.ts';

/** PAdES baseline B-B: CAdES B-B without signing-time. */
export function buildPadesBaselineB(input: SignatureInput): BuiltSignature {
  return { signature: buildCadesBaselineB({ ...input, signingTime: undefined }) };
}

/** PAdES baseline B-T: B-B plus the signature-time-stamp over the signature value (EN 319 142-1 5.3). */
export async function buildPadesBaselineT(input: SignatureInput): Promise<BuiltSignature> {
  return buildCadesLevel('T', input, true);
}

/**
 * PAdES baseline B-LT (and B-LTA, whose extra document time-stamp the RP adds): the B-T CMS, and the validation
 * material for the DSS as revocationInfo: OCSP responses (CRLs where OCSP does not apply) for every
 * certificate of the signer chain and of the TSA chain that is not self-signed. The certificates themselves
 * are in the CMS and its time-stamp token, where the RP takes them for /Certs.
 */
export async function buildPadesBaselineLT(input: SignatureInput): Promise<BuiltSignature> {
  const { signature } = await buildCadesLevel('T', input, true);
  const { timestamps, revocation } = input.services;
  if (!revocation) throw new SignDocError('server_error', 'no revocation source is configured');
  const certificates = [input.signerCertificate.der, ...input.chain, ...(timestamps?.chain ?? [])];
  const unique = certificates.filter((c, i) => certificates.findIndex((o) => o.equals(c)) === i);
  return { signature, revocation: await validationData(unique, revocation) };
}
