/**
 * Proof of possession for a certificate an SP adds to its record (PUT /sps/v1/{client_id}/jwks): a compact JWS
 * made with the certificate's key, whose protected header names the certificate (x5t#S256) and whose payload
 * names the record (client_id) and when it was made (iat, seconds). A certificate whose key nobody proved to
 * hold could be published by mistake and then be the record's only one: a QTSP locked out of every bank.
 */
import { X509Certificate } from 'node:crypto';
import { compactVerify, decodeProtectedHeader } from 'jose';
import { invalidRequest } from '../errors.ts';
import { certFingerprint } from '../tls.ts';

export const KEY_PROOF_TYP = 'sp-key-proof+jwt';
/** how old a proof may be, and how far ahead of our clock */
const MAX_AGE_SECONDS = 300;
const MAX_AHEAD_SECONDS = 60;
const ALGORITHMS = ['ES256', 'ES384', 'ES512', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'EdDSA'];

/** The proofs of the body by the certificate they name (x5t#S256); malformed entries are a 400. */
function proofsByFingerprint(body: unknown): Map<string, string> {
  const proofs = (body as { proofs?: unknown })?.proofs ?? [];
  if (!Array.isArray(proofs) || proofs.length > 3 || proofs.some((p) => typeof p !== 'string'))
    throw invalidRequest('proofs must be an array of at most 3 compact JWS');
  const byFingerprint = new Map<string, string>();
  for (const jws of proofs as string[]) {
    let header: Record<string, unknown>;
    try {
      header = decodeProtectedHeader(jws);
    } catch {
      throw invalidRequest('a proof is not a compact JWS');
    }
    const x5t = header['x5t#S256'];
    if (typeof x5t !== 'string' || header['typ'] !== KEY_PROOF_TYP)
      throw invalidRequest(`a proof needs typ ${KEY_PROOF_TYP} and x5t#S256 in its protected header`);
    byFingerprint.set(x5t, jws);
  }
  return byFingerprint;
}

/** Whether `jws` was made with the key of `der` for this client_id, recently. */
async function proves(jws: string, der: Buffer, clientId: string, now: Date): Promise<boolean> {
  let payload: { client_id?: unknown; iat?: unknown };
  try {
    const verified = await compactVerify(jws, new X509Certificate(der).publicKey, { algorithms: ALGORITHMS });
    payload = JSON.parse(new TextDecoder().decode(verified.payload)) as typeof payload;
  } catch {
    return false;
  }
  const seconds = now.getTime() / 1000;
  return (
    payload.client_id === clientId &&
    typeof payload.iat === 'number' &&
    payload.iat >= seconds - MAX_AGE_SECONDS &&
    payload.iat <= seconds + MAX_AHEAD_SECONDS
  );
}

/**
 * Checks that every certificate in `added` (DER) comes with a proof of possession in the body; a 400 naming
 * the first one that does not.
 */
export async function requireKeyProofs(body: unknown, added: readonly Buffer[], clientId: string): Promise<void> {
  const proofs = proofsByFingerprint(body);
  const now = new Date();
  for (const der of added) {
    const jws = proofs.get(certFingerprint(der));
    if (!jws || !(await proves(jws, der, clientId, now)))
      throw invalidRequest(
        `no valid proof of possession for the new certificate ${new X509Certificate(der).subject}: ` +
          `send in proofs a JWS (typ ${KEY_PROOF_TYP}, x5t#S256) made with its key over {client_id, iat}`,
      );
  }
}
