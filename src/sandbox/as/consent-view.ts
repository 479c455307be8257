/**
 * What the bank's consent page shows (spec 2.7, 5.10, 7.3, 7.4): the RP, the QTSP and its documents, every
 * document label as sent, the full text of a QTSP default document, and per test identity the claims that
 * would be shared with the QTSP, or the data it lacks. Pure functions of the pushed request and the records.
 */
import { digest, HASH_ALGORITHMS } from '../../crypto/algorithms.ts';
import { decodeDigest } from '../../util/base64.ts';
import { OAuthError } from '../errors.ts';
import type { DefaultSigningDocument, SpRecord } from '../platform/sp-record.ts';
import type { PlatformClient } from '../types.ts';
import { type TestUser, userClaim, userHas } from '../users.ts';
import { resolveClaimNames } from './claims.ts';
import type { InsufficientData, PushedRequest, SignAuthorization } from './model.ts';

export interface DocumentView {
  /** exactly as sent in documentDigests (empty for a default document, spec 2.7) */
  readonly label: string;
  readonly hash: string;
  /** the QTSP default document whose hash this is (spec 2.7 QID): its full text is shown */
  readonly defaultDocument?: DefaultSigningDocument;
}

export interface ClaimView {
  readonly name: string;
  readonly title: string;
  readonly value: string;
}

export interface IdentityView {
  readonly sub: string;
  readonly description: string;
  /** given and family name, or a note that the bank holds none */
  readonly displayName: string;
  /** the claims the QTSP would receive at introspection (spec 2.11) */
  readonly shared: readonly ClaimView[];
  /** requested, not essential, not on record: omitted (spec 7.4) */
  readonly omitted: readonly string[];
  /** set when essential data is missing: consent ends in unable_to_meet_service_requirements (spec 7.3) */
  readonly insufficient?: InsufficientData;
}

export interface PartiesView {
  readonly bankName: string;
  readonly rp: { readonly clientId: string; readonly name?: string };
  readonly qtsp: {
    readonly name: string;
    readonly tosUri: string;
    readonly tosLabel: string;
    readonly policyUri: string;
  };
}

export interface ConsentView extends PartiesView {
  readonly consentId: string;
  readonly csrfToken: string;
  readonly purpose?: string;
  readonly documents: readonly DocumentView[];
  readonly identities: readonly IdentityView[];
  readonly selectedSub: string;
  /** shown above the form, e.g. a wrong second factor */
  readonly error?: string;
  readonly secondFactorHint: string;
}

export interface InsufficientView extends PartiesView {
  readonly consentId: string;
  readonly csrfToken: string;
  readonly identity: IdentityView;
}

const CLAIM_TITLES: Readonly<Record<string, string>> = {
  given_name: 'Given name',
  family_name: 'Family name',
  birthdate: 'Date of birth',
  place_of_birth: 'Place of birth',
  nationalities: 'Nationalities',
  address: 'Address',
};

export function claimTitle(name: string): string {
  return CLAIM_TITLES[name] ?? name;
}

/** A claim value as one line of text (spec 2.7 address sub-fields, 2.11 verified_claims). */
export function claimText(name: string, value: unknown): string {
  if (typeof value === 'string') return value;
  if (name === 'nationalities' && Array.isArray(value)) return value.join(', ');
  const v = value as Record<string, string> | null;
  if (name === 'place_of_birth' && v) return `${v['locality']} (${v['country']})`;
  if (name === 'address' && v) return `${v['street_address']}, ${v['postal_code']} ${v['locality']}, ${v['country']}`;
  return JSON.stringify(value);
}

/** The registration's display name, when the platform holds one. */
export function rpDisplayName(client: PlatformClient): string | undefined {
  const name = (client as { clientName?: unknown }).clientName;
  return typeof name === 'string' && name !== '' ? name : undefined;
}

function signEntry(sign: SignAuthorization): Record<string, unknown> {
  return sign.details.find((e) => e['type'] === 'sign') ?? {};
}

/** Documents as sent; a hash equal to the digest of a default document's UTF-8 text is that document (2.7). */
export function documentViews(sign: SignAuthorization, qtsp: SpRecord): DocumentView[] {
  const entry = signEntry(sign);
  const alg = HASH_ALGORITHMS.get(String(entry['hashAlgorithmOID']));
  const docs = Array.isArray(entry['documentDigests']) ? (entry['documentDigests'] as Record<string, unknown>[]) : [];
  const defaults = qtsp.default_signing_documents.map((d) => ({
    document: d,
    digest: alg ? digest(alg, Buffer.from(d.text, 'utf8')) : undefined,
  }));
  return docs.map((doc) => {
    const hash = String(doc['hash']);
    const decoded = alg ? decodeDigest(hash, alg.length) : undefined;
    const match = decoded?.ok ? defaults.find((d) => d.digest?.equals(decoded.bytes)) : undefined;
    return { label: String(doc['label']), hash, ...(match ? { defaultDocument: match.document } : {}) };
  });
}

/** Every claim the request names: the QTSP's base claims (spec 2.13 required_claims), then the QESID ones. */
function requestedClaims(qtsp: SpRecord, pushed: PushedRequest): { name: string; essential: boolean }[] {
  const base = Object.entries(qtsp.required_claims.verified_claims.claims).map(([name, spec]) => ({
    name,
    essential: spec?.essential === true,
  }));
  const extra = (pushed.sign.identityClaims ?? []).filter((c) => !base.some((b) => b.name === c.name));
  return [...base, ...extra];
}

function displayName(user: TestUser): string {
  const name = [user.claims.given_name, user.claims.family_name].filter((n) => n !== undefined).join(' ');
  return name || '(no name on record)';
}

/** Spec 7.4 for a known user: the claims delivered, or the essential data missing. */
export function identityView(
  qtsp: SpRecord,
  client: PlatformClient,
  pushed: PushedRequest,
  user: TestUser,
): IdentityView {
  const requested = requestedClaims(qtsp, pushed);
  const common = { sub: user.sub, description: user.description, displayName: displayName(user) };
  try {
    const names = resolveClaimNames(qtsp, client, pushed.sign.identityClaims, user);
    const shared = names.map((name) => ({
      name,
      title: claimTitle(name),
      value: claimText(name, userClaim(user, name)),
    }));
    const omitted = requested.filter((c) => !names.includes(c.name)).map((c) => c.name);
    return { ...common, shared, omitted };
  } catch (err) {
    if (!(err instanceof OAuthError)) throw err;
    const missing = requested.filter((c) => c.essential && !userHas(user, c.name)).map((c) => c.name);
    const insufficient: InsufficientData = { sub: user.sub, missing, description: err.description };
    return { ...common, shared: [], omitted: [], insufficient };
  }
}
