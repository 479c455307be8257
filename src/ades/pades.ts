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
 *
 * revocationInfo at every level: relying parties read revocationInfo.ocsp and .crl for every PDF
 * and may add validation data to any of them (the spec requires it for P at B-LT and forbids it nowhere). So
 * every PAdES signature reports the same validation material: OCSP for the signer certificate and for the CA
 * certificates below the root (and the TSA's certificate from B-T on), a CRL only where a CA runs no responder.
 * At B-LT and B-LTA it is issued after the signature time-stamp (cades-levels.ts validationData).
 */
import { DomainError } from '../domain-error.ts';
import { buildCadesBaselineB } from './cades.ts';
import { buildCadesLevel, validationData } from './cades-levels.ts';
import type { BuiltSignature, SignatureInput } from './types.ts';

function requireRevocation(input: SignatureInput) {
  if (!input.services.revocation) throw new DomainError('not_configured', 'no revocation source is configured');
  return input.services.revocation;
}

/** the signer chain, and from B-T on the TSA chain: every certificate a validator of the PDF meets */
function certificatesOf(input: SignatureInput, withTsa: boolean): Buffer[] {
  const certificates = [
    input.signerCertificate.der,
    ...input.chain,
    ...(withTsa ? (input.services.timestamps?.chain ?? []) : []),
  ];
  return certificates.filter((c, i) => certificates.findIndex((o) => o.equals(c)) === i);
}

/** The PAdES B-B CMS: CAdES B-B without signing-time. */
export function padesBaselineBCms(input: Omit<SignatureInput, 'services'>): Promise<Buffer> {
  return buildCadesBaselineB({ ...input, signingTime: undefined });
}

/** PAdES baseline B-B: the B-B CMS; revocationInfo for the signer chain. */
export async function buildPadesBaselineB(input: SignatureInput): Promise<BuiltSignature> {
  return {
    signature: await padesBaselineBCms(input),
    revocation: await validationData(certificatesOf(input, false), requireRevocation(input)),
  };
}

/** PAdES baseline B-T: B-B plus the signature-time-stamp over the signature value (EN 319 142-1 5.3). */
export async function buildPadesBaselineT(input: SignatureInput): Promise<BuiltSignature> {
  const built = await buildCadesLevel('T', input, true);
  return { ...built, revocation: await validationData(certificatesOf(input, true), requireRevocation(input)) };
}

/**
 * PAdES baseline B-LT (and B-LTA, whose extra document time-stamp the RP adds): the B-T CMS, and the validation
 * material for the DSS as revocationInfo: OCSP responses (CRLs where OCSP does not apply) for every
 * certificate of the signer chain and of the TSA chain that is not self-signed, issued after the signature
 * time-stamp. The certificates themselves are in the CMS and its time-stamp token, where the RP takes them
 * for /Certs.
 */
export async function buildPadesBaselineLT(input: SignatureInput): Promise<BuiltSignature> {
  const built = await buildCadesLevel('T', input, true);
  return {
    ...built,
    revocation: await validationData(certificatesOf(input, true), requireRevocation(input), built.timeStampedAt),
  };
}
