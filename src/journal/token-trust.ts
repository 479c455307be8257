/**
 * Which time-stamp tokens the journal audit believes. A token whose signature verifies with the certificate it
 * carries proves nothing about who signed it: anyone can make a certificate with the EKU timeStamping and
 * time-stamp a rewritten chain. So every token must name its signing certificate (ESS signing-certificate-v2,
 * RFC 5035; or v1, RFC 2634), carry it, and verify with it; then:
 *
 * - a token of our TSA names a TSA certificate we issued: byte for byte one of ours (every generation the CA
 *   material and the store know, across renewals), issued by our root (the operator's trust anchor, not the
 *   database's), EKU timeStamping alone (RFC 3161 2.3), valid and within its key usage period at the token's
 *   genTime (the certificate's private key usage period, RFC 5280 4.2.1.4 of RFC 3280, else its notBefore plus
 *   calendar.tsuKeyUsageDays: EN 319 421 7.6), and not revoked before that genTime;
 * - a token of another operator (an external TSA in place of ours, tsa.url; the journal's second TSA) names the
 *   certificate it carries, which chains to that TSA's configured certificates and was valid at its genTime.
 */
import { createHash, verify, X509Certificate } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { digest, hashByOid, SHA256 } from '../crypto/algorithms.ts';
import { sha256Hex } from '../store/journal.ts';
import type { Store } from '../store/types.ts';
import { partsOf } from '../util/der.ts';

/** Our TSA as the operator knows it: what its tokens must chain to and name. */
export interface OurTsa {
  /** our root CA certificate (DER): the trust anchor */
  readonly root: Buffer;
  /** our TSA certificates (DER) the CA material knows; the audit adds those the store registered */
  readonly certificates: readonly Buffer[];
  /** how long a TSU key signs after its certificate's notBefore, where the certificate names no usage period */
  readonly keyUsageDays: number;
}

export interface TokenTrust {
  readonly ours: OurTsa;
  /** an external TSA that time-stamps in place of ours (tsa.chainFile): its certificates up to its root */
  readonly external?: readonly Buffer[] | undefined;
  /** the journal's second TSA (journal.secondTsaChainFile): its certificates up to its root */
  readonly second?: readonly Buffer[] | undefined;
}

/** One of our TSA certificates, with its revocation when the store has one. */
export interface KnownTsaCertificate {
  readonly der: Buffer;
  readonly revokedAt?: Date | undefined;
}

const MESSAGE_DIGEST = '1.2.840.113549.1.9.4';
const SIGNING_CERTIFICATE_V2 = '1.2.840.113549.1.9.16.2.47';
const SIGNING_CERTIFICATE = '1.2.840.113549.1.9.16.2.12';
const TIME_STAMPING = '1.3.6.1.5.5.7.3.8';
const PRIVATE_KEY_USAGE_PERIOD = '2.5.29.16';
const DAY_MS = 86_400_000;
const MAX_CHAIN = 8;

/** A token whose imprint, message-digest and signature check out, with what signed it. */
interface VerifiedToken {
  readonly genTime: Date;
  /** the carried certificate its ESS attribute names and whose key verifies its signature (DER) */
  readonly signer: Buffer;
}

/** The ESS signing certificate a SignerInfo names: the hash of the certificate, and with which algorithm. */
function essCertificate(signer: pkijs.SignerInfo): { hash: string; certHash: Buffer } | undefined {
  const attributes = signer.signedAttrs?.attributes ?? [];
  const v2 = attributes.find((a) => a.type === SIGNING_CERTIFICATE_V2)?.values[0];
  const v1 = attributes.find((a) => a.type === SIGNING_CERTIFICATE)?.values[0];
  const value = v2 ?? v1;
  if (!(value instanceof asn1js.Sequence)) return undefined;
  const certs = value.valueBlock.value[0];
  const first = certs instanceof asn1js.Sequence ? certs.valueBlock.value[0] : undefined;
  if (!(first instanceof asn1js.Sequence)) return undefined;
  const [a, b] = first.valueBlock.value;
  // ESSCertIDv2: hashAlgorithm DEFAULT sha256 (absent then), certHash; ESSCertID: a SHA-1 certHash
  const algorithm = v2 && a instanceof asn1js.Sequence ? new pkijs.AlgorithmIdentifier({ schema: a }) : undefined;
  const certHash = algorithm ? b : a;
  if (!(certHash instanceof asn1js.OctetString)) return undefined;
  const hash = v2 ? hashByOid(algorithm?.algorithmId ?? SHA256.oid)?.node : 'sha1';
  return hash ? { hash, certHash: Buffer.from(certHash.valueBlock.valueHexView) } : undefined;
}

/** The certificates a token carries (DER). */
const carried = (signed: pkijs.SignedData): Buffer[] =>
  (signed.certificates ?? [])
    .filter((c) => c instanceof pkijs.Certificate)
    .map((c) => Buffer.from(c.toSchema().toBER()));

/**
 * RFC 3161 2.4.2 and RFC 5652 5.4: the token's imprint is `root` hashed with `imprintOid`, its message-digest is
 * the hash of its TSTInfo, and its signature over the signed attributes verifies with the carried certificate
 * its ESS attribute names. pkijs parses; node:crypto verifies (pkijs' own verify wants the time-stamped data).
 */
function verifiedToken(token: Buffer, root: Buffer, imprintOid: string): VerifiedToken | string {
  const signed = new pkijs.SignedData({ schema: pkijs.ContentInfo.fromBER(new Uint8Array(token)).content });
  const tstInfo = Buffer.from(signed.encapContentInfo.eContent!.getValue());
  const tst = pkijs.TSTInfo.fromBER(new Uint8Array(tstInfo));
  const imprint = Buffer.from(tst.messageImprint.hashedMessage.valueBlock.valueHexView);
  if (tst.messageImprint.hashAlgorithm.algorithmId !== imprintOid || !imprint.equals(root))
    return 'the time-stamp covers another hash than the root';
  const signer = signed.signerInfos[0]!;
  const hash = hashByOid(signer.digestAlgorithm.algorithmId);
  const attributes = signer.signedAttrs;
  if (!hash || !attributes) return 'the time-stamp has no signed attributes of a known hash';
  const messageDigest = attributes.attributes.find((a) => a.type === MESSAGE_DIGEST)?.values[0];
  if (
    !(messageDigest instanceof asn1js.OctetString) ||
    !Buffer.from(messageDigest.valueBlock.valueHexView).equals(digest(hash, tstInfo))
  )
    return "the time-stamp's message-digest is not the hash of its TSTInfo";
  const ess = essCertificate(signer);
  if (!ess) return 'the time-stamp names no signing certificate (ESS signing-certificate-v2)';
  const certificates = carried(signed);
  if (certificates.length === 0) return 'the time-stamp carries no TSA certificate';
  const named = certificates.find((c) => createHash(ess.hash).update(c).digest().equals(ess.certHash));
  if (!named) return "the time-stamp's signing-certificate-v2 names none of the certificates it carries";
  const signedBytes = Buffer.from(attributes.encodedValue);
  signedBytes[0] = 0x31; // DER SET OF, as signed (RFC 5652 5.4)
  const key = new X509Certificate(named).publicKey;
  const signature = Buffer.from(signer.signature.valueBlock.valueHexView);
  if (!verify(hash.node, signedBytes, key, signature)) return "the time-stamp's signature does not verify";
  return { genTime: tst.genTime, signer: named };
}

/** verifiedToken, with a token that does not parse as a finding */
function verifiedOrProblem(token: Buffer, root: Buffer, imprintOid: string): VerifiedToken | string {
  try {
    return verifiedToken(token, root, imprintOid);
  } catch (err) {
    return `the time-stamp does not parse: ${(err as Error).message}`;
  }
}

/**
 * The token's imprint is `root`, its message-digest its TSTInfo's, and its signature verifies with the carried
 * certificate it names; undefined when so. Says nothing of who that certificate belongs to (tokenProblems).
 */
export function checkToken(token: Buffer, root: Buffer, imprintOid = SHA256.oid): string | undefined {
  const verified = verifiedOrProblem(token, root, imprintOid);
  return typeof verified === 'string' ? verified : undefined;
}

/** The end of a TSA certificate's key usage: its private key usage period's notAfter, else notBefore + days. */
function keyUsageEnd(der: Buffer, days: number): Date {
  const certificate = pkijs.Certificate.fromBER(new Uint8Array(der));
  const extension = certificate.extensions?.find((e) => e.extnID === PRIVATE_KEY_USAGE_PERIOD);
  if (extension) {
    const period = asn1js.fromBER(extension.extnValue.valueBlock.valueHexView).result as asn1js.Sequence;
    const notAfter = period.valueBlock.value.find((v) => v.idBlock.tagClass === 3 && v.idBlock.tagNumber === 1);
    if (notAfter instanceof asn1js.Primitive) {
      const text = Buffer.from(notAfter.valueBlock.valueHexView).toString('latin1');
      const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(text);
      if (m) return new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!));
    }
  }
  return new Date(certificate.notBefore.value.getTime() + days * DAY_MS);
}

/** `der` is certified by `issuer` (name and signature) */
const issuedBy = (der: X509Certificate, issuer: X509Certificate) =>
  der.checkIssued(issuer) && der.verify(issuer.publicKey);

/** What is wrong with the certificate `token` names as one of our TSA certificates at its genTime. */
function ourCertificateProblems(
  verified: VerifiedToken,
  ours: OurTsa,
  known: ReadonlyMap<string, KnownTsaCertificate>,
): string[] {
  const problems: string[] = [];
  const certificate = new X509Certificate(verified.signer);
  const at = verified.genTime;
  const found = known.get(sha256Hex(verified.signer));
  if (!issuedBy(certificate, new X509Certificate(ours.root)))
    problems.push(`its TSA certificate (${oneLine(certificate.subject)}) does not chain to our root`);
  if (!found) problems.push('it names no TSA certificate of ours');
  const usage = certificate.keyUsage ?? [];
  if (usage.length !== 1 || usage[0] !== TIME_STAMPING)
    problems.push('its TSA certificate has not the extended key usage timeStamping alone');
  if (at < new Date(certificate.validFrom) || at > new Date(certificate.validTo))
    problems.push(`its TSA certificate was not valid at its genTime ${at.toISOString()}`);
  else if (at > keyUsageEnd(verified.signer, ours.keyUsageDays))
    problems.push(`its genTime ${at.toISOString()} is after its TSA key's usage period`);
  if (found?.revokedAt && found.revokedAt <= at)
    problems.push(`its TSA certificate was revoked at ${found.revokedAt.toISOString()}, before its genTime`);
  return problems;
}

const oneLine = (name: string) => name.split('\n').join(', ');

/**
 * The certificate a token names chains to a self-signed certificate among `anchors` (each signature checked)
 * and was valid at the token's genTime; undefined when so. `who` names the TSA in the problem.
 */
function chainProblem(verified: VerifiedToken, anchors: readonly Buffer[], who: string): string | undefined {
  const signer = new X509Certificate(verified.signer);
  const at = verified.genTime.getTime();
  if (at < Date.parse(signer.validFrom) || at > Date.parse(signer.validTo))
    return `${who} TSA certificate was not valid at its genTime`;
  const known = anchors.map((der) => new X509Certificate(der));
  let current = signer;
  for (let depth = 0; depth < MAX_CHAIN; depth++) {
    const issuer = known.find((c) => issuedBy(current, c));
    if (!issuer) return `${who} TSA certificate does not chain to that TSA's configured chain`;
    if (issuedBy(issuer, issuer)) return undefined;
    current = issuer;
  }
  return `${who} TSA certificate chain is too long`;
}

/**
 * A token of our TSA (or of the external TSA configured in its place) over `root`: what is wrong with it, each
 * a finding; [] when the operator's trust anchors vouch for it. `known`: our TSA certificates by SHA-256 (hex).
 */
export function ourTokenProblems(
  token: Buffer,
  root: Buffer,
  imprintOid: string,
  trust: TokenTrust,
  known: ReadonlyMap<string, KnownTsaCertificate>,
): string[] {
  const verified = verifiedOrProblem(token, root, imprintOid);
  if (typeof verified === 'string') return [verified];
  try {
    const problems = ourCertificateProblems(verified, trust.ours, known);
    if (problems.length === 0 || !trust.external) return problems.map((p) => `the time-stamp is not ours: ${p}`);
    const external = chainProblem(verified, [...trust.external, trust.ours.root], "the external TSA's");
    return external ? [`the time-stamp is neither ours (${problems.join('; ')}) nor the external TSA's`] : [];
  } catch (err) {
    return [`the time-stamp's certificate does not parse: ${(err as Error).message}`];
  }
}

/** The second TSA's token over `root`: signed by a certificate it names that chains to `anchors`. */
export function secondTokenProblems(token: Buffer, root: Buffer, anchors: readonly Buffer[] | undefined): string[] {
  const verified = verifiedOrProblem(token, root, SHA256.oid);
  if (typeof verified === 'string') return [`second time-stamp: ${verified}`];
  try {
    const problem = anchors ? chainProblem(verified, anchors, "the second time-stamp's") : undefined;
    return problem ? [problem] : [];
  } catch (err) {
    return [`the second time-stamp's certificate does not parse: ${(err as Error).message}`];
  }
}

/** The certificate a token names and carries (DER), whether or not it is trusted; undefined when none. */
export function namedCertificate(token: Buffer): Buffer | undefined {
  try {
    const signed = new pkijs.SignedData({ schema: pkijs.ContentInfo.fromBER(new Uint8Array(token)).content });
    const ess = essCertificate(signed.signerInfos[0]!);
    return ess && carried(signed).find((c) => createHash(ess.hash).update(c).digest().equals(ess.certHash));
  } catch {
    return undefined;
  }
}

/** Our TSA certificates by SHA-256 (hex): those of the material, and `stored` (the store's records). */
export function knownTsaCertificates(
  ours: OurTsa,
  stored: readonly KnownTsaCertificate[],
): Map<string, KnownTsaCertificate> {
  const known = new Map<string, KnownTsaCertificate>();
  for (const der of ours.certificates) known.set(sha256Hex(der), { der });
  for (const c of stored) known.set(sha256Hex(c.der), c);
  return known;
}

/**
 * The store's records of the certificates `tokens` name, where the record is that very certificate (the service
 * registers its TSA certificate at each start and reload), with its revocation.
 */
export async function storedTsaCertificates(
  store: Pick<Store, 'getCertificate'>,
  tokens: readonly Buffer[],
): Promise<KnownTsaCertificate[]> {
  const named = new Map<string, Buffer>();
  for (const token of tokens) {
    const der = namedCertificate(token);
    if (der) named.set(sha256Hex(der), der);
  }
  const stored: KnownTsaCertificate[] = [];
  for (const der of named.values()) {
    const record = await store.getCertificate(partsOf(der).serialHex);
    if (!record?.der.equals(der)) continue;
    stored.push({ der, revokedAt: record.status.status === 'revoked' ? record.status.revokedAt : undefined });
  }
  return stored;
}
