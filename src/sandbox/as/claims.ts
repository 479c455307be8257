/**
 * Identity claims for signing: parsing identity_assurance_claims (spec 2.7), the QESID permission table
 * (spec 7.4), and the claims the AS delivers to the QTSP at introspection (spec 2.11): the base claims of the
 * QTSP's required_claims plus the QESID claims.
 */
import { invalidDetails, unableToMeet, type OAuthError } from '../errors.ts';
import { DEFINED_CLAIMS } from '../platform/constants.ts';
import type { ClaimRequest, SpRecord } from '../platform/sp-record.ts';
import type { PlatformClient } from '../types.ts';
import { userHas, type TestUser } from '../users.ts';
import type { RequestedClaim } from './model.ts';

/** Claims the sandbox bank can offer at all (the user's data decides the rest). */
export const IDP_OFFERED_CLAIMS: readonly string[] = DEFINED_CLAIMS;

export type ClaimDecision = 'deliver' | 'omit' | 'error';

export interface ClaimFacts {
  /** in the set of spec 2.7 */
  readonly defined: boolean;
  /** the IDP offers it and (once known) the user's data is available */
  readonly supported: boolean;
  readonly essential: boolean;
  /** in the RP's allowed_claims_qes */
  readonly allowed: boolean;
}

/** Spec 7.4, cell by cell; where the table allows either, the first-named behaviour is taken. */
export function qesClaimDecision(c: ClaimFacts): ClaimDecision {
  if (!c.defined) return c.essential && c.allowed ? 'error' : 'omit';
  if (!c.allowed) return 'error';
  if (c.supported) return 'deliver';
  return c.essential ? 'error' : 'omit';
}

/** identity_assurance_claims: claim -> null | {essential: true}; other members are ignored (spec 2.7). */
export function parseIdentityAssuranceClaims(value: unknown): {
  requested: Record<string, ClaimRequest>;
  claims: RequestedClaim[];
} {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalidDetails(
      'identity_assurance_claims must be an object mapping claim names to null or {"essential": true}',
    );
  }
  const requested: Record<string, ClaimRequest> = {};
  const claims: RequestedClaim[] = [];
  for (const [name, spec] of Object.entries(value)) {
    if (spec !== null && (typeof spec !== 'object' || Array.isArray(spec))) {
      throw invalidDetails(`identity_assurance_claims.${name} must be null or an object`);
    }
    const essential = (spec as { essential?: unknown } | null)?.essential === true;
    requested[name] = essential ? { essential: true } : null;
    claims.push({ name, essential });
  }
  return { requested, claims };
}

const cannotProvide = (names: readonly string[]): OAuthError =>
  unableToMeet(`the IDP could not provide all requested data (${names.join(', ')})`);

/**
 * PAR-time checks (the user is not known yet): claims the QTSP does not support (spec 2.7), then spec 7.4
 * with "supported" meaning "offered by the IDP". Returns the claims to keep.
 */
export function checkClaimsAtPar(
  claims: readonly RequestedClaim[],
  qtsp: SpRecord,
  client: PlatformClient,
): RequestedClaim[] {
  const unsupported = claims
    .filter((c) => !qtsp.identity_assurance_claims_supported.includes(c.name))
    .map((c) => c.name);
  if (unsupported.length) throw unableToMeet(`claims not supported by the QTSP: ${unsupported.join(', ')}`);
  return applyTable(claims, client, (name) => IDP_OFFERED_CLAIMS.includes(name));
}

function applyTable(
  claims: readonly RequestedClaim[],
  client: PlatformClient,
  supported: (name: string) => boolean,
): RequestedClaim[] {
  const decided = claims.map((c) => ({
    claim: c,
    decision: qesClaimDecision({
      defined: DEFINED_CLAIMS.includes(c.name),
      supported: supported(c.name),
      essential: c.essential,
      allowed: client.allowedClaimsQes.includes(c.name),
    }),
  }));
  const errors = decided.filter((d) => d.decision === 'error').map((d) => d.claim.name);
  if (errors.length) throw cannotProvide(errors);
  return decided.filter((d) => d.decision === 'deliver').map((d) => d.claim);
}

/** The base claims the QTSP requires (its required_claims, spec 2.13), as requested claims. */
function baseClaims(qtsp: SpRecord): RequestedClaim[] {
  return Object.entries(qtsp.required_claims.verified_claims.claims).map(([name, spec]) => ({
    name,
    essential: spec?.essential === true,
  }));
}

/**
 * Consent-time resolution for the known user (spec 7.3, 7.4): the claim names to deliver, or an
 * unable_to_meet_service_requirements error when essential data is missing.
 */
export function resolveClaimNames(
  qtsp: SpRecord,
  client: PlatformClient,
  identityClaims: readonly RequestedClaim[] | undefined,
  user: TestUser,
): string[] {
  const base = baseClaims(qtsp);
  const missing = base.filter((c) => c.essential && !userHas(user, c.name)).map((c) => c.name);
  if (missing.length) throw cannotProvide(missing);
  const names = base.filter((c) => userHas(user, c.name)).map((c) => c.name);
  const qes = applyTable(
    identityClaims ?? [],
    client,
    (name) => IDP_OFFERED_CLAIMS.includes(name) && userHas(user, name),
  );
  for (const c of qes) if (!names.includes(c.name)) names.push(c.name);
  return names;
}
