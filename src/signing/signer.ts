/**
 * Steps 7 and 9 of signDoc: the signer of one request, minted in the key custody with a certificate of our
 * issuing CA, and destroyed before the response leaves. A custody failure is a 503.
 */
import type { SigningChoice } from '../ades/offer.ts';
import type { KeyedCertificate } from '../ca/authority.ts';
import { mintSignerCertificate, type SignerCertificate, type SignerProfile } from '../ca/signer-certificate.ts';
import { KeyCustodyUnavailable, type KeyCustody, type SignerKey } from '../custody/types.ts';
import { badRequest, temporarilyUnavailable } from '../errors.ts';
import type { Logger } from '../util/logger.ts';
import type { Metrics } from '../util/metrics.ts';
import type { Consent } from './consent.ts';
import type { ParsedSignDocRequest } from './request.ts';

/** A signer that lives for one request: its key pair is destroyed by destroySigner (step 9). */
export interface EphemeralSigner {
  readonly key: SignerKey;
  readonly certificate: SignerCertificate;
}

export interface SignerDeps {
  readonly issuingCa: KeyedCertificate;
  readonly signerValiditySeconds: number;
  readonly signerProfile: SignerProfile;
  readonly keys: KeyCustody;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

/** The custody must sign this scheme with this hash (a PKCS#11 2.40 token has no RSASSA-PSS with SHA-3). */
export function requireCustodySupport(choice: SigningChoice, request: ParsedSignDocRequest, deps: SignerDeps): void {
  const hash = request.hashAlgorithm.node as Parameters<KeyCustody['supports']>[1];
  if (deps.keys.supports(choice.scheme, hash)) return;
  throw badRequest(
    `signAlgo ${choice.algorithm} with ${request.hashAlgorithm.name} is not offered: ` +
      'the key custody (HSM) cannot sign it',
  );
}

/** step 7: a fresh key pair in the key custody and a certificate with the identity the bank vouched for (2.16) */
export async function mintSigner(choice: SigningChoice, consent: Consent, deps: SignerDeps): Promise<EphemeralSigner> {
  const key = await deps.keys.createSignerKey(choice.keyAlgorithm, choice.scheme); // handed out once, never again
  try {
    const certificate = await mintSignerCertificate({
      claims: consent.claims,
      publicKey: key.publicKey,
      issuingCa: deps.issuingCa,
      validitySeconds: deps.signerValiditySeconds,
      profile: deps.signerProfile,
      keyInQscd: deps.keys.qscd, // QcSSCD and QCP-n-qscd only for keys in a declared QSCD
      consent,
    });
    deps.metrics.certificates.inc();
    return { key, certificate };
  } catch (err) {
    await key.destroy();
    throw err;
  }
}

/** step 9: the key pair is gone before the response leaves (PKCS#11: C_DestroyObject of both halves) */
export function destroySigner(signer: EphemeralSigner): Promise<void> {
  return signer.key.destroy();
}

/** A key custody failure (a token gone) is a 503: nothing was signed, and readiness says why. */
export async function inCustody<T>(work: () => Promise<T>, deps: SignerDeps): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (!(err instanceof KeyCustodyUnavailable)) throw err;
    deps.logger.error(
      { event: 'sign.custody_unavailable', custody: deps.keys.kind, error: err.message },
      'key custody unavailable; request refused',
    );
    throw temporarilyUnavailable('the key custody (HSM) is unavailable; nothing was signed');
  }
}
