/**
 * Detached CMS signatures (RFC 5652) at CAdES baseline B-B (ETSI EN 319 122-1 6.3), over a document hash we
 * were sent (spec 2.12: signDoc gets digests, never documents). Also PAdES B-B (no signing-time). The B-T and
 * higher levels (cades-levels.ts) build on the CMS parts of crypto/cms.ts.
 */
import { createHash } from 'node:crypto';
import { CMS_OID, signHashOf, type CmsSignerInput } from '../crypto/cms.ts';
import { algorithmIdentifierDer, signatureAlgorithm } from '../crypto/signature.ts';
import { algorithmIdentifier as derAlgorithmIdentifier, explicit, integer, octetString, oid, partsOf, sequence, tlv, x509Time } from '../util/der.ts';

/**
 * CAdES baseline B-B, detached, over the document hash we were sent (also PAdES B-B: no signing-time).
 *
 * This is the signDoc hot path, so it is written with util/der.ts instead of pkijs/asn1js objects (~0.5 ms
 * -> ~0.1 ms per signature): the same structure as signSignerInfo + encodeSignedData produce (the unit tests
 * compare both), with the signer's issuer and serial taken from its certificate's DER as they are.
 */
export async function buildCadesBaselineB(input: CmsSignerInput): Promise<Buffer> {
  if (input.hash.length !== input.hashAlgorithm.length) {
    throw new RangeError(`document hash has ${input.hash.length} bytes, ${input.hashAlgorithm.name} has ${input.hashAlgorithm.length}`);
  }
  const signer = partsOf(input.signerCertificate.der); // read once per certificate, not once per hash
  const issuerSerial = sequence(sequence(tlv(0xa4, signer.issuer)), signer.serial); // IssuerSerial, issuer as [4] directoryName
  const attributes = [
    derAttribute(CMS_OID.contentType, oid(CMS_OID.data)),
    derAttribute(CMS_OID.messageDigest, octetString(input.hash)),
    ...(input.signingTime ? [derAttribute(CMS_OID.signingTime, x509Time(input.signingTime))] : []),
    // SigningCertificateV2 { certs { ESSCertIDv2 { certHash (SHA-256: hashAlgorithm DEFAULT, omitted), issuerSerial } } }
    derAttribute(CMS_OID.signingCertificateV2, sequence(sequence(sequence(octetString(certificateHash(input.signerCertificate.der)), issuerSerial)))),
  ].sort(Buffer.compare); // DER SET OF order (FIELD-NOTES: validators re-sort and then fail otherwise)
  const hash = signHashOf(input.hashAlgorithm);
  const signedAttributes = tlv(0x31, ...attributes);
  const signature = await input.key.sign(hash, signedAttributes);
  const signatureAlgorithmDer = algorithmIdentifierDer(signatureAlgorithm(input.key, hash));
  const digestAlgorithm = derAlgorithmIdentifier(input.hashAlgorithm.oid);
  const signerInfo = sequence(
    integer(1),
    sequence(signer.issuer, signer.serial), // sid: IssuerAndSerialNumber
    digestAlgorithm,
    tlv(0xa0, ...attributes), // signedAttrs [0] IMPLICIT: exactly the bytes signed, under the context tag
    signatureAlgorithmDer,
    octetString(signature),
  );
  const signedData = sequence(
    integer(1),
    tlv(0x31, digestAlgorithm),
    sequence(oid(CMS_OID.data)), // encapContentInfo without eContent: detached
    tlv(0xa0, input.signerCertificate.der, ...input.chain), // certificates [0] IMPLICIT
    tlv(0x31, signerInfo),
  );
  return sequence(oid(CMS_OID.signedData), explicit(0, signedData));
}

const certificateHashes = new WeakMap<Buffer, Buffer>();

/** SHA-256 of the signer certificate, once per certificate (a request's hashes share it) */
function certificateHash(der: Buffer): Buffer {
  let hash = certificateHashes.get(der);
  if (!hash) {
    hash = createHash('sha256').update(der).digest();
    certificateHashes.set(der, hash);
  }
  return hash;
}

/** Attribute ::= SEQUENCE { attrType OID, attrValues SET OF ANY } with one value */
function derAttribute(type: string, value: Buffer): Buffer {
  return sequence(oid(type), tlv(0x31, value));
}
