/**
 * CAdES baseline levels above B-B (ETSI EN 319 122-1 V1.3.1, clause 6): the B-B SignerInfo (crypto/cms.ts), plus
 *   B-T   signature-time-stamp (1.2.840.113549.1.9.16.2.14, 5.3): an RFC 3161 token over the signature value;
 *   B-LT  every certificate (signer chain and TSA chain) in SignedData.certificates, and revocation data for
 *         every certificate that is not self-signed in SignedData.crls: OCSP responses as
 *         OtherRevocationInfoFormat id-ri-ocsp-response (1.3.6.1.5.5.7.16.2, RFC 5940), a CRL only where the
 *         certificate's CA runs no responder (6.3, 6.4); all of it issued strictly after the signature
 *         time-stamp's genTime, as EU DSS checks for fresh revocation data;
 *   B-LTA archive-time-stamp-v3 (0.4.0.1733.2.4, 5.5.3) carrying ats-hash-index-v3 (0.4.0.19122.1.5, 5.5.2)
 *         in the token's unsigned attributes.
 * certificate-values / revocation-values are not used: baseline signatures must not (6.3).
 *
 * The SignedData is composed with der.ts from DER we hold (certificates, tokens, OCSP responses, CRLs), so
 * nothing is parsed again or re-encoded differently from what a hash covered. Every time-stamp imprint uses
 * the hash algorithm of the message-digest: for the archive time-stamp, whose input includes the document
 * hash, it must (5.5.3); for the signature time-stamp it keeps one algorithm per signature.
 */
import { X509Certificate } from 'node:crypto';
import { DomainError } from '../domain-error.ts';
import type { RevocationProvider } from '../revocation/provider.ts';
import type { TimestampProvider } from '../timestamping/provider.ts';
import { genTimeOf } from '../timestamping/tsa.ts';
import { digest, type HashAlgorithm } from '../crypto/algorithms.ts';
import type { BuiltSignature, RevocationInfo, SignatureInput } from './types.ts';
import { baselineSignedAttributes, CMS_OID, encodeSignedData, signerInfo, signSignerInfo } from '../crypto/cms.ts';
import {
  algorithmIdentifier,
  children,
  explicit,
  octetString,
  oid,
  partsOf,
  raw,
  readWhole,
  sequence,
  setOf,
  tlv,
  type Tlv,
} from '../util/der.ts';

export const CADES_OID = {
  signatureTimeStamp: '1.2.840.113549.1.9.16.2.14',
  archiveTimeStampV3: '0.4.0.1733.2.4',
  atsHashIndexV3: '0.4.0.19122.1.5',
  /** id-ri-ocsp-response (RFC 5940 4.1) */
  ocspResponse: '1.3.6.1.5.5.7.16.2',
} as const;

export type CadesLevel = 'T' | 'LT' | 'LTA';

/** Attribute ::= SEQUENCE { attrType OBJECT IDENTIFIER, attrValues SET OF AttributeValue } (RFC 5652 5.3) */
function attribute(type: string, value: Buffer): Buffer {
  return sequence(oid(type), setOf([value]));
}

/** RevocationInfoChoice other [1] IMPLICIT OtherRevocationInfoFormat with an OCSPResponse (RFC 5940 4.1) */
function ocspRevocationInfo(ocspResponse: Buffer): Buffer {
  return tlv(0xa1, oid(CADES_OID.ocspResponse), ocspResponse);
}

function requireTimestamps(services: SignatureInput['services']): TimestampProvider {
  if (!services.timestamps) throw new DomainError('not_configured', 'no time-stamping authority is configured');
  return services.timestamps;
}

function requireRevocation(services: SignatureInput['services']): RevocationProvider {
  if (!services.revocation) throw new DomainError('not_configured', 'no revocation source is configured');
  return services.revocation;
}

const unique = (list: readonly Buffer[]) => list.filter((b, i) => list.findIndex((o) => o.equals(b)) === i);

// ---------------------------------------------------------------------------------------------------------
// B-LT validation material

/**
 * Revocation data for every certificate that is not self-signed (EN 319 122-1 6.4: B-LT): the OCSP response
 * of its CA when the CA runs a responder, else the CA's CRL. The issuer is found by name among `certificates`
 * and the provider's authorities.
 * `after` (B-LT, B-LTA: the signature time-stamp's genTime): every piece is issued strictly after it.
 */
export async function validationData(
  certificates: readonly Buffer[],
  revocation: RevocationProvider,
  after?: Date,
): Promise<RevocationInfo> {
  const parts = certificates.map(partsOf);
  const issuers = [...parts, ...(revocation.authorities ?? []).map(partsOf)]; // the root need not be in the signature
  const results = await Promise.all(
    parts
      .filter((p) => !p.issuer.equals(p.subject))
      .map(async (p) => {
        const issuer = issuers.find((q) => q.subject.equals(p.issuer));
        if (!issuer)
          throw new DomainError(
            'incomplete_chain',
            "the issuer of a certificate in the signature (the time-stamping authority's) is not known to us: " +
              'B-LT and B-LTA cannot be given now',
            `not among our CA certificates and tsa.chainFile: ${new X509Certificate(p.der).issuer}`,
          );
        const ocsp = await revocation.ocspResponse(p.der, issuer.der, after);
        if (ocsp) return { ocsp };
        const crl = await revocation.crl(issuer.der, after);
        if (!crl)
          throw new DomainError(
            'revocation_unavailable',
            'no revocation data (OCSP or CRL) is available for a certificate of the signature',
          );
        return { crl };
      }),
  );
  return {
    ocsp: unique(results.flatMap((r) => (r.ocsp ? [r.ocsp] : []))),
    crl: unique(results.flatMap((r) => (r.crl ? [r.crl] : []))),
  };
}

// ---------------------------------------------------------------------------------------------------------
// B-LTA: ats-hash-index-v3 and archive-time-stamp-v3 (EN 319 122-1 5.5.2, 5.5.3)

/**
 * ATSHashIndexV3 ::= SEQUENCE { hashIndAlgorithm AlgorithmIdentifier, certificatesHashIndex, crlsHashIndex,
 * unsignedAttrValuesHashIndex (each SEQUENCE OF OCTET STRING) }. Annex D has no DEFAULT on hashIndAlgorithm, so
 * it is always written; it equals the archive time-stamp's imprint algorithm (5.5.2). One hash per
 * CertificateChoices and per RevocationInfoChoice (whole TLV), and per value of each unsigned attribute over
 * attrType TLV || AttributeValue TLV.
 */
export function atsHashIndexV3(
  hash: HashAlgorithm,
  certificates: readonly Buffer[],
  crls: readonly Buffer[],
  unsignedAttributes: readonly Buffer[],
): Buffer {
  const index = (items: readonly Buffer[]) => sequence(...items.map((i) => octetString(digest(hash, i))));
  const valueInputs = unsignedAttributes.flatMap((attr) => {
    const [typeT, valuesT] = children(attr, readWhole(attr)) as [Tlv, Tlv];
    return children(attr, valuesT).map((v) => Buffer.concat([raw(attr, typeT), raw(attr, v)]));
  });
  return sequence(algorithmIdentifier(hash.oid), index(certificates), index(crls), index(valueInputs));
}

/**
 * Message imprint input of archive-time-stamp-v3 (5.5.3), detached signature: eContentType TLV, the document
 * hash (the octets the message-digest carries), the SignerInfo's version, sid, digestAlgorithm, signedAttrs,
 * signatureAlgorithm and signature TLVs as encoded, and the ATSHashIndexV3 value.
 */
export function archiveTimeStampInput(
  documentHash: Buffer,
  signerInfoFields: readonly Buffer[],
  hashIndex: Buffer,
): Buffer {
  return Buffer.concat([oid(CMS_OID.data), documentHash, ...signerInfoFields, hashIndex]);
}

/**
 * Adds one unsigned attribute to the SignerInfo of a time-stamp token, leaving every signed byte as it was
 * (5.5.2: ats-hash-index-v3 goes into the archive time-stamp token's unsignedAttrs).
 */
export function addTokenUnsignedAttribute(token: Buffer, attr: Buffer): Buffer {
  const ci = readWhole(token);
  const [typeT, wrapT] = children(token, ci) as [Tlv, Tlv];
  const sdT = children(token, wrapT)[0]!;
  const sdFields = children(token, sdT);
  const siSetT = sdFields[sdFields.length - 1]!;
  const siT = children(token, siSetT)[0]!;
  const siFields = children(token, siT);
  const last = siFields[siFields.length - 1]!;
  const existing = last.tag === 0xa1 ? children(token, last).map((a) => raw(token, a)) : [];
  const kept = (last.tag === 0xa1 ? siFields.slice(0, -1) : siFields).map((f) => raw(token, f));
  const tokenSignerInfo = sequence(...kept, tlv(0xa1, ...setMembers([...existing, attr])));
  const signedData = sequence(...sdFields.slice(0, -1).map((f) => raw(token, f)), setOf([tokenSignerInfo]));
  return sequence(raw(token, typeT), explicit(0, signedData));
}

/** the DER-sorted members of a SET OF (X.690 11.6), as setOf() would write them */
function setMembers(items: readonly Buffer[]): Buffer[] {
  return [...items].sort(Buffer.compare);
}

/**
 * CAdES B-T, B-LT or B-LTA over the document hash we were sent. withoutSigningTime: the PAdES CMS profile
 * (pades.ts builds on the B-T CMS).
 */
export async function buildCadesLevel(
  level: CadesLevel,
  input: SignatureInput,
  withoutSigningTime = false,
): Promise<BuiltSignature> {
  const hash = input.hashAlgorithm;
  if (input.hash.length !== hash.length)
    throw new RangeError(`document hash has ${input.hash.length} bytes, ${hash.name} has ${hash.length}`);
  const timestamps = requireTimestamps(input.services);
  // the B-B SignerInfo; the PAdES CMS profile leaves signing-time out (EN 319 142-1 5.4: the PDF's /M holds the
  // claimed time)
  const signedAttributes = baselineSignedAttributes(withoutSigningTime ? { ...input, signingTime: undefined } : input);
  const signed = await signSignerInfo({
    hashAlgorithm: hash,
    signerCertificate: input.signerCertificate,
    key: input.key,
    signedAttributes,
  });
  const token = await timestamps.timestamp(digest(hash, signed.signatureValue), hash);
  const timeStampedAt = genTimeOf(token);
  const unsignedAttributes = [attribute(CADES_OID.signatureTimeStamp, token)];
  const signerChain = [input.signerCertificate.der, ...input.chain];
  if (level === 'T') {
    return {
      signature: encodeSignedData({
        hashAlgorithm: hash,
        certificates: signerChain,
        signerInfo: signerInfo(signed, unsignedAttributes),
      }),
      timeStampedAt,
    };
  }
  const certificates = unique([...signerChain, ...timestamps.chain]);
  // issued after the signature time-stamp (EU DSS: revocation data fresh relative to the best signature time)
  const revocation = await validationData(certificates, requireRevocation(input.services), timeStampedAt);
  const crls = [...revocation.ocsp.map(ocspRevocationInfo), ...revocation.crl];
  if (level === 'LTA') {
    const hashIndex = atsHashIndexV3(hash, certificates, crls, unsignedAttributes);
    const archiveToken = await timestamps.timestamp(
      digest(hash, archiveTimeStampInput(input.hash, signed.fields, hashIndex)),
      hash,
    );
    const withIndex = addTokenUnsignedAttribute(archiveToken, attribute(CADES_OID.atsHashIndexV3, hashIndex));
    unsignedAttributes.push(attribute(CADES_OID.archiveTimeStampV3, withIndex));
  }
  return {
    signature: encodeSignedData({
      hashAlgorithm: hash,
      certificates,
      crls,
      signerInfo: signerInfo(signed, unsignedAttributes),
    }),
    revocation,
    timeStampedAt,
  };
}
