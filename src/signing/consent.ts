/**
 * Step 5 of signDoc: what the user consented to at the bank covers this request (spec 5.9, 2.7, 2.11, 3).
 * Every failure is a 401: the SAD does not authorise what was asked.
 */
import { unauthorized } from '../errors.ts';
import type { IntrospectionPayload } from '../introspection/client.ts';
import { fingerprintsEqual } from '../trust/fingerprint.ts';
import type { ParsedSignDocRequest } from './request.ts';
import type { IdentityClaims } from '../ca/signer-certificate.ts';

export interface Consent {
  readonly txn: string;
  readonly sub: string;
  readonly issuer: string;
  readonly clientId: string;
  readonly clientState: 'active' | 'demo';
  readonly claims: IdentityClaims;
}

interface SignDetail {
  type: 'sign';
  locations?: unknown;
  credentialID?: unknown;
  hashAlgorithmOID?: unknown;
  documentDigests?: unknown;
}

function signDetail(p: IntrospectionPayload): SignDetail {
  const details = Array.isArray(p.authorization_details) ? p.authorization_details : [];
  const signs = details.filter(
    (d): d is SignDetail => !!d && typeof d === 'object' && (d as { type?: unknown }).type === 'sign',
  );
  if (signs.length !== 1) throw unauthorized('the consent holds no single authorization_details object of type sign');
  return signs[0]!;
}

function consentedHashes(detail: SignDetail): Set<string> {
  const digests = Array.isArray(detail.documentDigests) ? detail.documentDigests : [];
  const set = new Set<string>();
  for (const d of digests) {
    const hash = (d as { hash?: unknown } | null)?.hash;
    if (typeof hash === 'string') set.add(Buffer.from(hash, 'base64').toString('base64'));
  }
  return set;
}

function identityClaims(p: IntrospectionPayload): IdentityClaims {
  const claims = p.verified_claims?.claims;
  return claims && typeof claims === 'object' ? (claims as IdentityClaims) : {};
}

export function checkConsent(
  p: IntrospectionPayload,
  request: ParsedSignDocRequest,
  qtspId: string,
  clientFingerprint: string,
): Consent {
  const detail = signDetail(p);
  const locations = detail.locations;
  if (!Array.isArray(locations) || locations.length !== 1 || locations[0] !== qtspId) {
    throw unauthorized('the consent was given for another QTSP (authorization_details.locations)');
  }
  if (detail.credentialID !== request.body.credentialID)
    throw unauthorized('credentialID does not match the consented one');
  if (detail.hashAlgorithmOID !== request.hashAlgorithm.oid)
    throw unauthorized('hashAlgorithmOID does not match the consented one');
  const consented = consentedHashes(detail);
  request.hashes.forEach((h, i) => {
    if (!consented.has(h.toString('base64')))
      throw unauthorized(`documentDigests.hashes[${i}] is not among the consented documentDigests`);
  });
  const cnf = p.cnf?.['x5t#S256'];
  if (typeof cnf !== 'string' || !fingerprintsEqual(cnf, clientFingerprint)) {
    throw unauthorized('the introspected token is bound to another TLS client certificate (cnf.x5t#S256)');
  }
  if (p.client_state !== 'active' && p.client_state !== 'demo')
    throw unauthorized('the relying party is not active (client_state)');
  if (typeof p.txn !== 'string' || p.txn === '') throw unauthorized('introspection response carries no txn');
  if (typeof p.sub !== 'string' || p.sub === '') throw unauthorized('introspection response carries no sub');
  return {
    txn: p.txn,
    sub: p.sub,
    issuer: p.iss,
    clientId: p.client_id,
    clientState: p.client_state,
    claims: identityClaims(p),
  };
}
