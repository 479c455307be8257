/**
 * The per-request signer certificate (spec 2.16): a fresh key pair's public key, certified by the issuing CA
 * with the identity claims of the token introspection (spec 2.11), as a qualified certificate for electronic
 * signatures (ETSI EN 319 412-2 / -5, policies of EN 319 411-2).
 *
 * Claims the IDP did not provide are omitted (spec 2.11: "the QTSP must tolerate missing claims"), and so are
 * claim values that are malformed: a qualified certificate must not carry garbage, and a bad claim must not
 * fail the signature either. Nothing in here throws on claim content. What EN 319 412-2 NAT-4.2.4-1 requires
 * of every subject is always there: countryName (from the address claim, else the configured country of the
 * identity scheme), commonName (the names, shortened to 64 characters when longer), and givenName and/or
 * surname, or else a pseudonym.
 *
 * Honest certificates: QcSSCD and the policy QCP-n-qscd say that the private key lives in a qualified
 * signature creation device. They are written only when the caller states that the key was generated in a
 * token the configuration declares a QSCD (keyInQscd); every other certificate gets QCP-n and no QcSSCD.
 *
 * Runs once per signDoc request: the constant extensions are encoded once per profile, and nothing we build
 * is parsed again.
 */
import { createHash, type KeyObject } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import type { KeyedCertificate } from './authority.ts';
import {
  basicConstraintsExtension,
  extensionDer,
  nameDer,
  issueCertificateAsync,
  keyUsageExtension,
  nameText,
  OID,
  rawExtension,
  spkiDer,
  type NameAttribute,
} from './x509.ts';
import { ISO_3166_ALPHA2, ISO_639_1 } from '../util/iso-codes.ts';
import { oid, sequence, TAG, tlv, utf8String } from '../util/der.ts';

export interface IdentityClaims {
  given_name?: string;
  family_name?: string;
  /** YYYY-MM-DD (OpenID Connect Core 5.1) */
  birthdate?: string;
  place_of_birth?: { country?: string; region?: string; locality?: string };
  /** ISO 3166-1 alpha-2 codes */
  nationalities?: string[];
  address?: { street_address?: string; locality?: string; postal_code?: string; country?: string };
}

export type ClaimName = keyof IdentityClaims;

export interface SignerCertificate {
  readonly der: Buffer;
  /** the pkijs view, parsed from `der` when first read */
  readonly certificate: pkijs.Certificate;
  /** lowercase hex of the serial number's content octets */
  readonly serialHex: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
  /** the subject as OpenSSL prints it, lines joined by ", " (x509.ts nameText; what the store records) */
  readonly subjectText: string | undefined;
  /** claim names that went into the certificate, in IdentityClaims order */
  readonly providedClaims: ClaimName[];
}

/**
 * The issuing CA as signer certificates see it: its key, and optionally the AIA (OCSP, caIssuers) and CRL
 * distribution point extensions every certificate it issues carries (publication.ts issuingCaPointers).
 */
export type IssuingCa = KeyedCertificate & { readonly signerPointers?: readonly pkijs.Extension[] };

/** The AS transaction (consent) a certificate is minted for. */
export interface ConsentReference {
  /** the AS (introspection iss) */
  readonly issuer: string;
  /** the AS's transaction id (introspection txn) */
  readonly txn: string;
}

export interface MintSignerCertificateInput {
  readonly claims: IdentityClaims;
  readonly publicKey: KeyObject;
  readonly issuingCa: IssuingCa;
  readonly validitySeconds: number;
  /** the deployment's certificate profile (signerProfile: default country, PDS locations) */
  readonly profile: SignerProfile;
  /**
   * Whether the private key was generated in, and stays in, a token that the configuration declares a QSCD.
   * Only then does the certificate claim QcSSCD and QCP-n-qscd (EN 319 412-5 Table 2, EN 319 411-2 5.3).
   */
  readonly keyInQscd: boolean;
  /** the consent the certificate is minted for: a subject without names gets a pseudonym derived from it */
  readonly consent: ConsentReference;
  readonly now?: Date;
}

/** ETSI EN 319 412-1 / -5 and ETSI EN 319 411-2 identifiers. */
export const QC_OID = {
  qcCompliance: '0.4.0.1862.1.1',
  qcSSCD: '0.4.0.1862.1.4',
  qcPDS: '0.4.0.1862.1.5',
  qcType: '0.4.0.1862.1.6',
  qcTypeESign: '0.4.0.1862.1.6.1',
  /** QCP-n: EU qualified certificate issued to a natural person (EN 319 411-2 5.3) */
  qcpN: '0.4.0.194112.1.0',
  /** QCP-n-qscd: the same, with the private key in a QSCD (EN 319 411-2 5.3) */
  qcpNQscd: '0.4.0.194112.1.2',
} as const;

/** Clock skew allowance: relying parties with a slightly slow clock must not see a not-yet-valid certificate. */
const BACKDATE_MS = 60_000;

/**
 * Upper bounds in characters. RFC 5280 Appendix A: ub-common-name 64; X.520: ub-street-address 128,
 * ub-postal-code 40. Names and place of birth have no useful standard bound (ub-name is 32768): 128 keeps the
 * certificate, and so the CMS that carries it, small and its size predictable.
 */
const MAX_CHARS = { name: 128, commonName: 64, streetAddress: 128, postalCode: 40, placeOfBirthPart: 128 } as const;

/**
 * Characters that never belong in a name or an address: C0/C1 controls, lone surrogates (they would be
 * replaced by U+FFFD in UTF-8), line/paragraph separators, and bidi embeddings/overrides/isolates (they can
 * make a name display as something else, as in "Trojan Source").
 */
const FORBIDDEN_CHARS = /[\p{Cc}\p{Cs}\u2028\u2029\u202A-\u202E\u2066-\u2069]/u;

// ---------------------------------------------------------------------------------------------------------
// Claim validation: each returns the cleaned value, or undefined when the claim is absent or malformed.

/** A trimmed, NFC-normalised, single-line text of at most `max` characters. */
function cleanText(value: unknown, max: number): string | undefined {
  if (typeof value !== 'string') return undefined;
  const text = value.normalize('NFC').trim();
  if (text === '' || FORBIDDEN_CHARS.test(text)) return undefined;
  return fitsIn(text, max) ? text : undefined;
}

/** OpenID Connect Core 5.1.1 allows street_address to span lines; a DirectoryString shows one line. */
function cleanStreetAddress(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const oneLine = value
    .split(/\r\n|\r|\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .join(', ');
  return cleanText(oneLine, MAX_CHARS.streetAddress);
}

/** An assigned ISO 3166-1 alpha-2 code, upper-cased (a lower-case "de" carries the same information). */
export function cleanCountryCode(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const code = value.trim().toUpperCase();
  return ISO_3166_ALPHA2.has(code) ? code : undefined;
}

/**
 * dateOfBirth as GeneralizedTime YYYYMMDD120000Z (RFC 3739 3.2.2; noon, so that no time zone shifts the day).
 * Only a real calendar date counts: OpenID Connect's "0000" year (year withheld), year-only values, 2023-02-30
 * and dates after `now` are dropped.
 */
function cleanBirthdate(value: unknown, now: Date): string | undefined {
  if (typeof value !== 'string') return undefined;
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  if (!m) return undefined;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (year === 0) return undefined;
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day); // not Date.UTC: it maps years 0..99 to 1900..1999
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) return undefined;
  if (date.getTime() > now.getTime()) return undefined;
  return `${m[1]}${m[2]}${m[3]}120000Z`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** placeOfBirth: "locality, region, country" of the parts that are present and well-formed. */
function cleanPlaceOfBirth(value: unknown): string | undefined {
  if (!isObject(value)) return undefined;
  const parts = [value['locality'], value['region'], value['country']]
    .map((part) => cleanText(part, MAX_CHARS.placeOfBirthPart))
    .filter((part): part is string => part !== undefined);
  return parts.length > 0 ? parts.join(', ') : undefined;
}

/** Valid codes, upper-cased, duplicates removed (one countryOfCitizenship per nationality). */
function cleanNationalities(value: unknown): string[] {
  if (!Array.isArray(value)) return [];
  const codes = value.map(cleanCountryCode).filter((code): code is string => code !== undefined);
  return [...new Set(codes)];
}

// ---------------------------------------------------------------------------------------------------------
// Subject and extensions

interface SubjectResult {
  readonly attributes: NameAttribute[];
  readonly claims: ClaimName[];
}

/** Whether a text has at most `max` code points: never more than its UTF-16 code units, counted only when more. */
function fitsIn(text: string, max: number): boolean {
  return text.length <= max || charCount(text) <= max;
}

/** Length in characters (code points), as X.520 upper bounds count them. */
function charCount(text: string): number {
  return [...text].length;
}

const graphemes = new Intl.Segmenter('und', { granularity: 'grapheme' });

/** The longest prefix of whole user-perceived characters that fits `max` code points, trailing spaces removed. */
function truncate(text: string, max: number): string {
  let out = '';
  for (const { segment } of graphemes.segment(text)) {
    if (charCount(out) + charCount(segment) > max) break;
    out += segment;
  }
  return out.trimEnd();
}

/**
 * commonName from the names (EN 319 412-2 NAT-4.2.4-1: always present). RFC 5280's ub-common-name is 64
 * characters; a longer name is shortened, not dropped: first the given names become initials ("Maximiliane
 * Friederike" -> "M. F."), keeping the surname whole, as names are shortened on identity documents; if that
 * is still too long, the name is cut at 64 characters on a character boundary. givenName and surname always
 * carry the full names.
 */
export function commonNameOf(given: string | undefined, family: string | undefined): string {
  const full = [given, family].filter(Boolean).join(' ');
  if (fitsIn(full, MAX_CHARS.commonName)) return full;
  if (given && family) {
    const initials = given
      .split(/\s+/)
      .map((name) => `${[...graphemes.segment(name)][0]!.segment}.`)
      .join(' ');
    const abbreviated = `${initials} ${family}`;
    if (fitsIn(abbreviated, MAX_CHARS.commonName)) return abbreviated;
  }
  return truncate(full, MAX_CHARS.commonName);
}

/**
 * The pseudonym of a subject the claims name neither by given name nor by surname (EN 319 412-2 4.2.4: a
 * pseudonym then stands in, and commonName carries it). Decision: derived from the consent (AS issuer and
 * txn), not from the person (sub) and not random:
 * - not from sub: a pseudonym stable per person would let every relying party link all signatures of a user
 *   who chose not to disclose a name; one per consent links nothing beyond the one transaction;
 * - not random: anyone holding the evidence record (iss, txn) can recompute it and so tie the certificate to
 *   its transaction, and through the stored introspection response to the identity the bank vouched for
 *   (the QTSP can always reveal who stood behind a pseudonym, eIDAS Art. 5(2));
 * - not a refusal: spec 2.11 makes the QTSP tolerate missing claims.
 * 24 hex digits (96 bits) of SHA-256 over a domain-separated encoding.
 */
export function pseudonymOf(consent: ConsentReference): string {
  return createHash('sha256')
    .update(`qtsp signer pseudonym v1\0${consent.issuer}\0${consent.txn}`)
    .digest('hex')
    .slice(0, 24);
}

/**
 * Subject DN (spec 2.16, EN 319 412-2 4.2.4): countryName, from address streetAddress and postalCode, then
 * givenName and surname or else a pseudonym, then commonName. countryName is the address claim's country,
 * else the configured country of the identity scheme. address.locality has no place in the spec's list
 * (localityName 2.5.4.7 is not one of its OIDs): not used.
 */
function subjectOf(claims: IdentityClaims, profile: SignerProfile, consent: ConsentReference): SubjectResult {
  const attributes: NameAttribute[] = [];
  const provided: ClaimName[] = [];
  const address = isObject(claims.address) ? claims.address : {};
  const country = cleanCountryCode(address['country']);
  const street = cleanStreetAddress(address['street_address']);
  const postalCode = cleanText(address['postal_code'], MAX_CHARS.postalCode);
  attributes.push({ type: OID.countryName, value: country ?? profile.defaultCountry });
  if (street) attributes.push({ type: OID.streetAddress, value: street });
  if (postalCode) attributes.push({ type: OID.postalCode, value: postalCode });

  const given = cleanText(claims.given_name, MAX_CHARS.name);
  const family = cleanText(claims.family_name, MAX_CHARS.name);
  if (given) attributes.push({ type: OID.givenName, value: given });
  if (family) attributes.push({ type: OID.surname, value: family });
  if (given || family) {
    attributes.push({ type: OID.commonName, value: commonNameOf(given, family) });
  } else {
    const pseudonym = pseudonymOf(consent);
    attributes.push({ type: OID.pseudonym, value: pseudonym }, { type: OID.commonName, value: pseudonym });
  }

  if (given) provided.push('given_name');
  if (family) provided.push('family_name');
  if (country || street || postalCode) provided.push('address');
  return { attributes, claims: provided };
}

/** Attribute ::= SEQUENCE { type, values SET OF } with one value (RFC 5280 4.1.2.4) */
function attribute(type: string, value: Buffer): Buffer {
  return sequence(oid(type), tlv(TAG.set, value));
}

/**
 * The subjectDirectoryAttributes extension (RFC 3739 3.2.2, spec 2.16) of the claims, as the DER of the whole
 * Extension, or none when no claim goes there. Written with the DER writer: composing it from pkijs/asn1js
 * objects cost more per certificate in the signDoc profile than the certificate's signature.
 * test/unit/ca/signer-certificate.test.ts checks it byte for byte against the pkijs composition and OpenSSL reads
 * it in the integration tests.
 */
export function subjectDirectoryAttributesOf(
  claims: IdentityClaims,
  now: Date,
): { extension?: Buffer; claims: ClaimName[] } {
  const attributes: Buffer[] = [];
  const provided: ClaimName[] = [];
  const birth = cleanBirthdate(claims.birthdate, now);
  if (birth) {
    attributes.push(attribute(OID.dateOfBirth, tlv(TAG.generalizedTime, Buffer.from(birth, 'latin1'))));
    provided.push('birthdate');
  }
  const place = cleanPlaceOfBirth(claims.place_of_birth);
  if (place) {
    attributes.push(attribute(OID.placeOfBirth, utf8String(place)));
    provided.push('place_of_birth');
  }
  // spec 2.16: one countryOfCitizenship attribute per nationality (not one attribute with several values)
  const nationalities = cleanNationalities(claims.nationalities);
  for (const code of nationalities) {
    attributes.push(attribute(OID.countryOfCitizenship, tlv(TAG.printableString, Buffer.from(code, 'latin1'))));
  }
  if (nationalities.length > 0) provided.push('nationalities');
  if (attributes.length === 0) return { claims: provided }; // SIZE (1..MAX): no empty extension
  // the Extension's DER itself: a pkijs.Extension around it cost asn1js objects and an encoding per certificate
  return { extension: extensionDer(OID.subjectDirectoryAttributes, sequence(...attributes)), claims: provided };
}

/** One PDS location (EN 319 412-5 4.3.4): an https URL and the ISO 639-1 code of the document's language. */
export interface PdsLocation {
  readonly url: string;
  readonly language: string;
}

/** The deployment's settings for signer certificates (configuration signer.defaultCountry, signer.pdsUrls). */
export interface SignerProfileSettings {
  /** ISO 3166-1 alpha-2 country of the identity scheme: countryName when the claims carry no address country */
  readonly defaultCountry: string;
  /** ISO 639-1 language -> https URL of the PKI disclosure statement in that language; empty: no QcPDS */
  readonly pdsUrls: Readonly<Record<string, string>>;
}

/** A profile ready for minting: checked settings and the constant extensions, encoded once per QSCD case. */
export interface SignerProfile {
  readonly defaultCountry: string;
  readonly pdsLocations: readonly PdsLocation[];
  /** the claim-independent extensions of a certificate whose key is (true) or is not (false) in a QSCD */
  readonly constantExtensions: (keyInQscd: boolean) => readonly pkijs.Extension[];
}

/** QcPDS PdsLocations ::= SEQUENCE SIZE (1..MAX) OF PdsLocation { url IA5String, language PrintableString (SIZE(2)) }
 */
function qcPdsStatement(locations: readonly PdsLocation[]): pkijs.QCStatement {
  const pdsLocations = locations.map(
    ({ url, language }) =>
      new asn1js.Sequence({
        value: [new asn1js.IA5String({ value: url }), new asn1js.PrintableString({ value: language })],
      }),
  );
  return new pkijs.QCStatement({ id: QC_OID.qcPDS, type: new asn1js.Sequence({ value: pdsLocations }) });
}

/**
 * QCStatements (RFC 3739 3.2.6; EN 319 412-5 4.2, Table 2 for EU qualified certificates): QcCompliance;
 * QcSSCD only when the key is in a QSCD; QcPDS when PDS locations are configured; QcType esign.
 */
function qcStatementsExtension(keyInQscd: boolean, pdsLocations: readonly PdsLocation[]): pkijs.Extension {
  // assigned, not passed: pkijs 4's typings declare the QCStatements constructor with QCStatement's parameters
  const statements = new pkijs.QCStatements();
  statements.values = [
    new pkijs.QCStatement({ id: QC_OID.qcCompliance }),
    ...(keyInQscd ? [new pkijs.QCStatement({ id: QC_OID.qcSSCD })] : []),
    ...(pdsLocations.length ? [qcPdsStatement(pdsLocations)] : []),
    // QcType ::= SEQUENCE OF OBJECT IDENTIFIER (EN 319 412-5 4.2.3)
    new pkijs.QCStatement({
      id: QC_OID.qcType,
      type: new asn1js.Sequence({ value: [new asn1js.ObjectIdentifier({ value: QC_OID.qcTypeESign })] }),
    }),
  ];
  return rawExtension(OID.qcStatements, statements.toSchema());
}

/** EN 319 411-2 5.3: QCP-n-qscd when the key is in a QSCD, QCP-n otherwise. */
function certificatePoliciesExtension(keyInQscd: boolean): pkijs.Extension {
  const policies = new pkijs.CertificatePolicies({
    certificatePolicies: [new pkijs.PolicyInformation({ policyIdentifier: keyInQscd ? QC_OID.qcpNQscd : QC_OID.qcpN })],
  });
  return rawExtension(OID.certificatePolicies, policies.toSchema());
}

/**
 * Checks the settings (the configuration schema checks them too; this guards other callers) and encodes the
 * constant extensions of both QSCD cases once. keyUsage nonRepudiation alone (EN 319 412-2 4.3.2: content
 * commitment for a signature certificate); basicConstraints CA:false.
 */
export function signerProfile(settings: SignerProfileSettings): SignerProfile {
  if (!ISO_3166_ALPHA2.has(settings.defaultCountry)) {
    throw new TypeError(
      `signer.defaultCountry: ${JSON.stringify(settings.defaultCountry)} ` +
        'is not an assigned ISO 3166-1 alpha-2 code in upper case',
    );
  }
  const pdsLocations = Object.entries(settings.pdsUrls).map(([language, url]) => ({ language, url }));
  for (const { language, url } of pdsLocations) {
    if (!ISO_639_1.has(language))
      throw new TypeError(
        `signer.pdsUrls: ${JSON.stringify(language)} is not an ISO 639-1 language code in lower case`,
      );
    // QCS-4.3.4-03: https; IA5String: ASCII
    if (!/^https:\/\/[\x21-\x7e]+$/.test(url) || !URL.canParse(url))
      throw new TypeError(`signer.pdsUrls.${language}: the PDS URL must be an https URL in ASCII`);
  }
  if (pdsLocations.length && !pdsLocations.some((l) => l.language === 'en')) {
    throw new TypeError(
      'signer.pdsUrls: an English PDS is required when PDS locations are given (EN 319 412-5 Table 2)',
    );
  }
  const common = [keyUsageExtension(['nonRepudiation']), basicConstraintsExtension(false)];
  const byCase = new Map<boolean, readonly pkijs.Extension[]>(
    [true, false].map((qscd) => [
      qscd,
      [...common, certificatePoliciesExtension(qscd), qcStatementsExtension(qscd, pdsLocations)],
    ]),
  );
  return {
    defaultCountry: settings.defaultCountry,
    pdsLocations,
    constantExtensions: (keyInQscd) => byCase.get(keyInQscd)!,
  };
}

export async function mintSignerCertificate(input: MintSignerCertificateInput): Promise<SignerCertificate> {
  const now = input.now ?? new Date();
  const claims: IdentityClaims = isObject(input.claims) ? input.claims : {};
  const subject = subjectOf(claims, input.profile, input.consent);
  const sda = subjectDirectoryAttributesOf(claims, now);
  const pointers = input.issuingCa.signerPointers ?? [];
  const extensions = [
    ...input.profile.constantExtensions(input.keyInQscd === true),
    ...pointers,
    ...(sda.extension ? [sda.extension] : []),
  ];
  const issued = await issueCertificateAsync({
    subject: nameDer(subject.attributes),
    publicKey: spkiDer(input.publicKey),
    issuer: input.issuingCa.issuer,
    keyIdentifiers: true, // subjectKeyIdentifier (RFC 5280 4.2.1.2) and authorityKeyIdentifier
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter: new Date(now.getTime() + input.validitySeconds * 1000),
    extensions,
  });
  const provided = new Set<ClaimName>([...subject.claims, ...sda.claims]);
  const order: readonly ClaimName[] = [
    'given_name',
    'family_name',
    'birthdate',
    'place_of_birth',
    'nationalities',
    'address',
  ];
  return {
    der: issued.der,
    get certificate() {
      return issued.certificate; // parsed when first read (x509.ts assemble)
    },
    serialHex: issued.serialHex,
    notBefore: issued.notBefore,
    notAfter: issued.notAfter,
    subjectText: nameText(subject.attributes),
    providedClaims: order.filter((c) => provided.has(c)),
  };
}
