/**
 * The per-request signer certificate (spec 2.16): a fresh key pair's public key, certified by the issuing CA
 * with the identity claims of the token introspection (spec 2.11), as a qualified certificate for electronic
 * signatures (ETSI EN 319 412-2 / -5).
 *
 * Claims the IDP did not provide are omitted (spec 2.11: "the QTSP must tolerate missing claims"), and so are
 * claim values that are malformed: a qualified certificate must not carry garbage, and a bad claim must not
 * fail the signature either. Nothing in here throws on claim content.
 *
 * Runs once per signDoc request: the constant extensions are encoded once at module load, and nothing we
 * build is parsed again.
 */
import { randomBytes, type KeyObject } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import type { KeyedCertificate } from './authority.ts';
import {
  basicConstraintsExtension,
  buildName,
  issueCertificate,
  keyUsageExtension,
  OID,
  rawExtension,
  spkiOf,
  type NameAttribute,
} from './x509.ts';

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
  readonly certificate: pkijs.Certificate;
  /** claim names that went into the certificate, in IdentityClaims order */
  readonly providedClaims: ClaimName[];
}

/**
 * The issuing CA as signer certificates see it: its key, and optionally the AIA (OCSP, caIssuers) and CRL
 * distribution point extensions every certificate it issues carries (publication.ts issuingCaPointers).
 */
export type IssuingCa = KeyedCertificate & { readonly signerPointers?: readonly pkijs.Extension[] };

export interface MintSignerCertificateInput {
  readonly claims: IdentityClaims;
  readonly publicKey: KeyObject;
  readonly issuingCa: IssuingCa;
  readonly validitySeconds: number;
  readonly now?: Date;
}

/** ETSI EN 319 412-1 / -5 and ETSI EN 319 411-2 identifiers. */
export const QC_OID = {
  qcCompliance: '0.4.0.1862.1.1',
  qcSSCD: '0.4.0.1862.1.4',
  qcType: '0.4.0.1862.1.6',
  qcTypeESign: '0.4.0.1862.1.6.1',
  /** QCP-n-qscd: qualified certificate for natural persons, key in a QSCD (EN 319 411-2 5.3) */
  qcpNQscd: '0.4.0.194112.1.2',
} as const;

/** Clock skew allowance: relying parties with a slightly slow clock must not see a not-yet-valid certificate. */
const BACKDATE_MS = 60_000;

/**
 * Upper bounds in characters. RFC 5280 Appendix A: ub-common-name 64; X.520: ub-street-address 128,
 * ub-postal-code 40. Names and place of birth have no useful standard bound (ub-name is 32768): 128 keeps the
 * certificate, and so the CMS that carries it, small and its size predictable (FIELD-NOTES, CMS).
 */
const MAX_CHARS = { name: 128, commonName: 64, streetAddress: 128, postalCode: 40, placeOfBirthPart: 128 } as const;

/**
 * ISO 3166-1 alpha-2, officially assigned codes (249). Written out rather than asked of ICU: ICU's region list
 * also knows EU, UN, ZZ, XK, withdrawn codes (SU, YU, ...) and exceptional reservations (UK, EA, ...), none of
 * which is a country of citizenship or a countryName (RFC 3739 3.2.2, X.520).
 */
const ISO_3166_ALPHA2 = new Set(
  (
    'AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ ' +
    'CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR ' +
    'GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO ' +
    'JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR ' +
    'MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO ' +
    'RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV ' +
    'TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW'
  ).split(' '),
);

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
  return [...text].length <= max ? text : undefined;
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

/**
 * Subject DN (spec 2.16): givenName, surname, and from address streetAddress, postalCode and countryName.
 * address.locality has no place in the spec's list (localityName 2.5.4.7 is not one of its OIDs): not used.
 * EN 319 412-2 4.2.4 wants givenName and/or surname, or else a pseudonym: without names, a random pseudonym
 * stands in, so the subject is never empty and never identifies by address alone.
 */
function subjectOf(claims: IdentityClaims): SubjectResult {
  const attributes: NameAttribute[] = [];
  const provided: ClaimName[] = [];
  const address = isObject(claims.address) ? claims.address : {};
  const country = cleanCountryCode(address['country']);
  const street = cleanStreetAddress(address['street_address']);
  const postalCode = cleanText(address['postal_code'], MAX_CHARS.postalCode);
  if (country) attributes.push({ type: OID.countryName, value: country });
  if (street) attributes.push({ type: OID.streetAddress, value: street });
  if (postalCode) attributes.push({ type: OID.postalCode, value: postalCode });

  const given = cleanText(claims.given_name, MAX_CHARS.name);
  const family = cleanText(claims.family_name, MAX_CHARS.name);
  if (given) attributes.push({ type: OID.givenName, value: given });
  if (family) attributes.push({ type: OID.surname, value: family });
  if (given || family) {
    // RFC 5280 ub-common-name: a longer name keeps givenName/surname and goes without commonName
    const commonName = [given, family].filter(Boolean).join(' ');
    if ([...commonName].length <= MAX_CHARS.commonName) attributes.push({ type: OID.commonName, value: commonName });
  } else {
    attributes.push({ type: OID.pseudonym, value: randomBytes(12).toString('hex') });
  }

  if (given) provided.push('given_name');
  if (family) provided.push('family_name');
  if (country || street || postalCode) provided.push('address');
  return { attributes, claims: provided };
}

/** Subject Directory Attributes (RFC 3739 3.2.2, spec 2.16), or undefined when no claim goes there. */
function subjectDirectoryAttributesOf(claims: IdentityClaims, now: Date): { extension?: pkijs.Extension; claims: ClaimName[] } {
  const attributes: pkijs.Attribute[] = [];
  const provided: ClaimName[] = [];
  const birth = cleanBirthdate(claims.birthdate, now);
  if (birth) {
    attributes.push(new pkijs.Attribute({ type: OID.dateOfBirth, values: [new asn1js.GeneralizedTime({ value: birth })] }));
    provided.push('birthdate');
  }
  const place = cleanPlaceOfBirth(claims.place_of_birth);
  if (place) {
    attributes.push(new pkijs.Attribute({ type: OID.placeOfBirth, values: [new asn1js.Utf8String({ value: place })] }));
    provided.push('place_of_birth');
  }
  // spec 2.16: one countryOfCitizenship attribute per nationality (not one attribute with several values)
  const nationalities = cleanNationalities(claims.nationalities);
  for (const code of nationalities) {
    attributes.push(new pkijs.Attribute({ type: OID.countryOfCitizenship, values: [new asn1js.PrintableString({ value: code })] }));
  }
  if (nationalities.length > 0) provided.push('nationalities');
  if (attributes.length === 0) return { claims: provided }; // SIZE (1..MAX): no empty extension
  const sda = new pkijs.SubjectDirectoryAttributes({ attributes });
  return { extension: rawExtension(OID.subjectDirectoryAttributes, sda.toSchema()), claims: provided };
}

/** QCStatements (RFC 3739 3.2.6, EN 319 412-5 4.2): EU qualified, key in a QSCD, type esign. */
function qcStatementsExtension(): pkijs.Extension {
  // assigned, not passed: pkijs 4's typings declare the QCStatements constructor with QCStatement's parameters
  const statements = new pkijs.QCStatements();
  statements.values = [
    new pkijs.QCStatement({ id: QC_OID.qcCompliance }),
    new pkijs.QCStatement({ id: QC_OID.qcSSCD }),
    // QcType ::= SEQUENCE OF OBJECT IDENTIFIER (EN 319 412-5 4.2.3)
    new pkijs.QCStatement({
      id: QC_OID.qcType,
      type: new asn1js.Sequence({ value: [new asn1js.ObjectIdentifier({ value: QC_OID.qcTypeESign })] }),
    }),
  ];
  return rawExtension(OID.qcStatements, statements.toSchema());
}

function certificatePoliciesExtension(): pkijs.Extension {
  const policies = new pkijs.CertificatePolicies({
    certificatePolicies: [new pkijs.PolicyInformation({ policyIdentifier: QC_OID.qcpNQscd })],
  });
  return rawExtension(OID.certificatePolicies, policies.toSchema());
}

/**
 * The same for every signer certificate; encoded once. keyUsage nonRepudiation alone (EN 319 412-2 4.3.2:
 * content commitment for a signature certificate); basicConstraints CA:false.
 */
const CONSTANT_EXTENSIONS: readonly pkijs.Extension[] = [
  keyUsageExtension(['nonRepudiation']),
  basicConstraintsExtension(false),
  certificatePoliciesExtension(),
  qcStatementsExtension(),
];

export function mintSignerCertificate(input: MintSignerCertificateInput): SignerCertificate {
  const now = input.now ?? new Date();
  const claims: IdentityClaims = isObject(input.claims) ? input.claims : {};
  const subject = subjectOf(claims);
  const sda = subjectDirectoryAttributesOf(claims, now);
  const pointers = input.issuingCa.signerPointers ?? [];
  const extensions = [...CONSTANT_EXTENSIONS, ...pointers, ...(sda.extension ? [sda.extension] : [])];
  const { der, certificate } = issueCertificate({
    subject: buildName(subject.attributes),
    publicKey: spkiOf(input.publicKey),
    issuer: input.issuingCa.issuer, // adds authorityKeyIdentifier
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter: new Date(now.getTime() + input.validitySeconds * 1000),
    extensions,
  });
  const provided = new Set<ClaimName>([...subject.claims, ...sda.claims]);
  const order: readonly ClaimName[] = ['given_name', 'family_name', 'birthdate', 'place_of_birth', 'nationalities', 'address'];
  return { der, certificate, providedClaims: order.filter((c) => provided.has(c)) };
}
