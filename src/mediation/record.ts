/**
 * The QTSP's mediation record `remote_signature_creation` (spec 6.2), built for one signDoc call before its
 * signature data is returned, and handed to the store with the evidence (one database transaction) as an
 * outbox entry whose id is the record's reference_id. Delivery happens later (delivery/relay.ts,
 * delivery/worker.ts); the response never waits for it (6.2: "The failure must not affect the response to the
 * caller").
 *
 * The record carries exactly the fields 6.2 lists: delivery_time, transaction_id, owner_id, credentialID,
 * count, service_provider_id, client_id, issuer, reference_id; with QESID also requested_claims and
 * provided_claim_names. No record for an RP in client_state demo (6.2, 3).
 */
import { createHash } from 'node:crypto';
import type { NewOutboxEntry } from '../store/types.ts';

export const MEDIATION_TOPIC = 'mediation';
export const RECORD_TYPE = 'remote_signature_creation';

/** OpenID Connect claims-parameter style: null (best effort) or { essential: true } (spec 2.7, 6.2). */
export type ClaimRequest = null | { essential: true };

export interface RemoteSignatureCreationRecord {
  readonly delivery_time: string;
  readonly transaction_id: string;
  readonly owner_id: string;
  readonly credentialID: string;
  readonly count: number;
  readonly service_provider_id: string;
  readonly client_id: string;
  readonly issuer: string;
  readonly reference_id: string;
  readonly requested_claims?: { readonly verified_claims: { readonly claims: Readonly<Record<string, ClaimRequest>> } };
  readonly provided_claim_names?: readonly string[];
}

/** What the mediation service receives: the envelope is not specified (spec 4.7), so its type is the record's. */
export interface MediationEnvelope {
  readonly type: typeof RECORD_TYPE;
  readonly record: RemoteSignatureCreationRecord;
}

/** Who we are in the ecosystem (spec 2.13: client_id = our qtsp_id, owner_id). */
export interface MediationIdentity {
  readonly qtspId: string;
  readonly ownerId: string;
}

export interface SignatureReport {
  readonly txn: string;
  readonly issuer: string;
  readonly clientId: string;
  readonly clientState: 'active' | 'demo';
  /** authorization_details of the introspection response (the consent) */
  readonly authorizationDetails: unknown;
  readonly credentialID: string;
  /** the digests signed in this call, request order */
  readonly hashes: readonly Buffer[];
  /** claim names that went into the signer certificate (mintSignerCertificate's providedClaims) */
  readonly providedClaims: readonly string[];
  /** serial of the signer certificate minted for this call: unique per call, kept in the evidence */
  readonly certificateSerialHex: string;
  readonly deliveryTime: Date;
}

/** spec 6.2, 8: 1 to 100 characters of a-z, A-Z, 0-9 and dash */
export const REFERENCE_ID_PATTERN = /^[A-Za-z0-9-]{1,100}$/;

/**
 * reference_id, unique in the scope service_provider_id + issuer (6.2): derived from the AS txn and the
 * serial of the certificate minted for this call, so the same call always yields the same id (a record
 * rebuilt from the evidence keeps it) and two calls under one txn differ. Hex keeps it inside the alphabet
 * whatever the txn contains; the prefix keeps it from being all digits (bullmq job ids must not be).
 */
export function referenceId(txn: string, certificateSerialHex: string): string {
  return `rsc-${createHash('sha256').update(`${txn}\n${certificateSerialHex}`).digest('hex')}`;
}

interface SignDetail {
  readonly documentDigests?: unknown;
  readonly identity_assurance_claims?: unknown;
}

/** The one object of type sign (checkConsent has already insisted there is exactly one). */
function signDetail(authorizationDetails: unknown): SignDetail {
  const details = Array.isArray(authorizationDetails) ? authorizationDetails : [];
  const sign = details.find((d) => !!d && typeof d === 'object' && (d as { type?: unknown }).type === 'sign');
  return (sign ?? {}) as SignDetail;
}

const canonicalBase64 = (b64: string): string => Buffer.from(b64, 'base64').toString('base64');

/** Hashes of default documents: documentDigests entries with an empty label (spec 2.7, QID). */
function defaultDocumentHashes(detail: SignDetail): Set<string> {
  const digests = Array.isArray(detail.documentDigests) ? detail.documentDigests : [];
  const set = new Set<string>();
  for (const d of digests) {
    const { hash, label } = (d ?? {}) as { hash?: unknown; label?: unknown };
    if (typeof hash === 'string' && label === '') set.add(canonicalBase64(hash));
  }
  return set;
}

/** count (6.2): the signed hashes of custom documents; a default document does not count (QID alone: 0). */
export function customDocumentCount(hashes: readonly Buffer[], authorizationDetails: unknown): number {
  const defaults = defaultDocumentHashes(signDetail(authorizationDetails));
  return hashes.filter((h) => !defaults.has(h.toString('base64'))).length;
}

/**
 * requested_claims (6.2): identity_assurance_claims as an OpenID claims-parameter object. Only the essential
 * flag is kept; value, values and max_age are ignored (2.7), so anything but { essential: true } is null.
 * Every requested name stays, even one the IDP did not deliver (6.2).
 */
export function requestedClaims(
  identityAssuranceClaims: Record<string, unknown>,
): RemoteSignatureCreationRecord['requested_claims'] {
  const claims: Record<string, ClaimRequest> = {};
  for (const [name, request] of Object.entries(identityAssuranceClaims)) {
    const essential =
      !!request && typeof request === 'object' && (request as { essential?: unknown }).essential === true;
    claims[name] = essential ? { essential: true } : null;
  }
  return { verified_claims: { claims } };
}

/** provided_claim_names (6.2 naming rules, version 2.5): each claim as verified_claims/claims/<name>. */
export function providedClaimNames(providedClaims: readonly string[]): string[] {
  return providedClaims.map((name) => `verified_claims/claims/${name}`);
}

/** QESID: the consent carried identity_assurance_claims (QID is the case where only a default document is signed). */
function identityAssuranceClaimsOf(detail: SignDetail): Record<string, unknown> | undefined {
  const claims = detail.identity_assurance_claims;
  return claims && typeof claims === 'object' && !Array.isArray(claims)
    ? (claims as Record<string, unknown>)
    : undefined;
}

/** The record for one signDoc call, or undefined for a demo client (spec 6.2, 3). */
export function remoteSignatureCreationRecord(
  report: SignatureReport,
  identity: MediationIdentity,
): RemoteSignatureCreationRecord | undefined {
  if (report.clientState === 'demo') return undefined;
  const detail = signDetail(report.authorizationDetails);
  const identityClaims = identityAssuranceClaimsOf(detail);
  return {
    delivery_time: report.deliveryTime.toISOString(),
    transaction_id: report.txn,
    owner_id: identity.ownerId,
    credentialID: report.credentialID,
    count: customDocumentCount(report.hashes, report.authorizationDetails),
    service_provider_id: identity.qtspId,
    client_id: report.clientId,
    issuer: report.issuer,
    reference_id: referenceId(report.txn, report.certificateSerialHex),
    ...(identityClaims
      ? {
          requested_claims: requestedClaims(identityClaims),
          provided_claim_names: providedClaimNames(report.providedClaims),
        }
      : {}),
  };
}

/** The outbox entries for one signDoc call: the record under its reference_id, or none (demo). */
export function mediationOutboxEntries(report: SignatureReport, identity: MediationIdentity): NewOutboxEntry[] {
  const record = remoteSignatureCreationRecord(report, identity);
  if (!record) return [];
  const envelope: MediationEnvelope = { type: RECORD_TYPE, record };
  return [{ id: record.reference_id, topic: MEDIATION_TOPIC, payload: envelope }];
}
