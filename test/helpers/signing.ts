/**
 * Signing through the sandbox as a relying party does: the user's consent at the bank (PAR, the sandbox's
 * automatic consent, the token: authorizeSigning), then signDoc (spec 4.5) with that SAD over mutual TLS.
 * authorize() and signDocBody() are the two halves, for tests that change one of them; signThroughSandbox()
 * runs both.
 */
import assert from 'node:assert/strict';
import { type AuthorizeResult, authorizeSigning, callSignDoc, type RpEndpoints } from '../../src/rp/flow.ts';
import { PROFILE, SHA256_OID } from './environment.ts';

export interface DocumentDigest {
  readonly hash: string;
  readonly label: string;
}

export type IdentityClaims = Record<string, null | { essential: true }>;

/** The documents of one consent as the bank lists them: `document 1`, `document 2`, ... */
export function labelled(hashes: readonly string[]): DocumentDigest[] {
  return hashes.map((hash, i) => ({ hash, label: `document ${i + 1}` }));
}

export interface ConsentOptions {
  /** the hash algorithm of the digests (default SHA-256) */
  readonly hashAlgorithmOID?: string;
  /** identity assurance claims the RP asks for (spec 2.3) */
  readonly claims?: IdentityClaims;
}

export interface Authorization extends AuthorizeResult {
  /** the digests consented to, in order */
  readonly hashes: string[];
}

/** The user's consent to these documents at the bank: the access token (the SAD) and what it covers. */
export async function authorize(
  endpoints: RpEndpoints,
  documentDigests: readonly DocumentDigest[],
  options: ConsentOptions = {},
): Promise<Authorization> {
  const auth = await authorizeSigning(endpoints, {
    documentDigests: [...documentDigests],
    hashAlgorithmOID: options.hashAlgorithmOID ?? SHA256_OID,
    ...(options.claims ? { identityAssuranceClaims: options.claims } : {}),
  });
  return { ...auth, hashes: documentDigests.map((d) => d.hash) };
}

/** Fields of a signDoc request beside SAD and the hashes: they are added, or replace the defaults. */
export interface SignDocFields {
  /** documentDigests.hashAlgorithmOID (default SHA-256) */
  readonly hashAlgorithmOID?: string;
  readonly [field: string]: unknown;
}

/** A signDoc request body (spec 2.12): CAdES (signature_format C) with no conformance_level unless `fields` say. */
export function signDocBody(
  sad: string,
  hashes: readonly string[],
  { hashAlgorithmOID = SHA256_OID, ...fields }: SignDocFields = {},
): Record<string, unknown> {
  return {
    SAD: sad,
    credentialID: 'qes_eidas',
    documentDigests: { hashes: [...hashes], hashAlgorithmOID },
    profile: PROFILE,
    signature_format: 'C',
    ...fields,
  };
}

/** What signDoc answers, as far as tests read it. */
export interface SignDocResponse {
  readonly SignatureObject?: string[];
  readonly revocationInfo?: { ocsp?: string[]; crl?: string[] };
  readonly error?: string;
  readonly error_description?: string;
}

export interface Signed {
  readonly status: number;
  readonly body: SignDocResponse;
  readonly headers: Record<string, unknown>;
  /** the SAD the call was made with */
  readonly sad: string;
}

export interface SigningOptions extends ConsentOptions {
  /** where to POST signDoc: default the QTSP of `at`, else the signDoc URL the AS named with the token */
  readonly signDocUrl?: string;
  /** further signDoc request fields (signDocBody) */
  readonly fields?: Omit<SignDocFields, 'hashAlgorithmOID'>;
}

/**
 * The consent to `hashes` (labelled `document 1`...), then one signDoc call over all of them, as the relying
 * party of `at.endpoints`. The answer is returned whatever its status.
 */
export async function signThroughSandbox(
  at: { readonly endpoints: RpEndpoints; readonly qtsp?: { readonly signDocUrl: string } },
  hashes: readonly string[],
  options: SigningOptions = {},
): Promise<Signed> {
  const auth = await authorize(at.endpoints, labelled(hashes), options);
  const url = options.signDocUrl ?? at.qtsp?.signDocUrl ?? auth.qtsp.signDoc;
  const body = signDocBody(auth.accessToken, hashes, {
    ...(options.hashAlgorithmOID ? { hashAlgorithmOID: options.hashAlgorithmOID } : {}),
    ...options.fields,
  });
  const res = await callSignDoc(url, at.endpoints, body);
  return { status: res.status, body: res.body as SignDocResponse, headers: res.headers, sad: auth.accessToken };
}

/** The signatures of a signDoc answer that must be 200 (its body is the failure message otherwise). */
export function signaturesOf(res: { readonly status: number; readonly body: unknown }): Buffer[] {
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const objects = (res.body as SignDocResponse).SignatureObject;
  assert.ok(Array.isArray(objects), JSON.stringify(res.body));
  return objects.map((s) => Buffer.from(s, 'base64'));
}
