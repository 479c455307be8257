/**
 * Detached CMS signatures (RFC 5652) at CAdES baseline B-B (ETSI EN 319 122-1 6.3), over a document hash we
 * were sent (spec 2.12: signDoc gets digests, never documents). Also PAdES B-B (no signing-time). The B-T and
 * higher levels (cades-levels.ts) build on the same CMS parts of crypto/cms.ts.
 */
import {
  baselineSignedAttributes,
  encodeSignedData,
  signerInfo,
  signSignerInfo,
  type CmsSignerInput,
} from '../crypto/cms.ts';

/** CAdES baseline B-B, detached, over the document hash we were sent (also PAdES B-B: no signing-time). */
export async function buildCadesBaselineB(input: CmsSignerInput): Promise<Buffer> {
  if (input.hash.length !== input.hashAlgorithm.length) {
    throw new RangeError(
      `document hash has ${input.hash.length} bytes, ${input.hashAlgorithm.name} has ${input.hashAlgorithm.length}`,
    );
  }
  const signed = await signSignerInfo({
    hashAlgorithm: input.hashAlgorithm,
    signerCertificate: input.signerCertificate,
    key: input.key,
    signedAttributes: baselineSignedAttributes(input),
  });
  return encodeSignedData({
    hashAlgorithm: input.hashAlgorithm,
    signerInfo: signerInfo(signed),
    certificates: [input.signerCertificate.der, ...input.chain],
  });
}
