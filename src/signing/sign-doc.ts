/**
 * The signDoc use case, top to bottom (spec 2.12, 4.5, 5.7, 5.9, 2.16): each step is one call of a named
 * function in its own module; this file only calls them in order. The step numbers are those of
 * docs/architecture.md; 7 comes before 6 because the evidence holds the certificate minted in 7.
 */
import { chooseSigning, type SigningChoice } from '../ades/offer.ts';
import type { AdesServices } from '../ades/types.ts';
import type { KeyedCertificate } from '../ca/authority.ts';
import type { SignerProfile } from '../ca/signer-certificate.ts';
import type { SignerAlgorithm } from '../crypto/keys.ts';
import type { KeyCustody } from '../custody/types.ts';
import { unauthorized } from '../errors.ts';
import { introspect, type Introspection, type IntrospectionContext } from '../introspection/client.ts';
import type { MediationReporting } from '../mediation/report.ts';
import type { Store } from '../store/types.ts';
import { x5tS256 } from '../trust/fingerprint.ts';
import { validateSad, type SadContext } from '../trust/sad.ts';
import type { Logger } from '../util/logger.ts';
import type { Metrics } from '../util/metrics.ts';
import { checkConsent } from './consent.ts';
import { requireCurrentMaterial, type MaterialCalendar } from './material-gate.ts';
import { recordEvidence } from './evidence.ts';
import { claimDocuments, releaseDocuments } from './once.ts';
import { report } from './report.ts';
import { parseSignDocRequest, type ParsedSignDocRequest } from './request.ts';
import { replayed, signHashes, type Signatures } from './signatures.ts';
import { destroySigner, inCustody, mintSigner, requireCustodySupport } from './signer.ts';

export interface SignDocDeps {
  readonly qtspId: string;
  readonly sad: SadContext;
  readonly introspection: IntrospectionContext;
  readonly issuingCa: KeyedCertificate;
  /** TSA and revocation sources for B-T and above */
  readonly ades: AdesServices;
  readonly signerValiditySeconds: number;
  /** what every signer certificate carries besides the identity: default country, PDS locations (signer.*) */
  readonly signerProfile: SignerProfile;
  /** key custody (custody/): per-request key pairs (step 7), software or in a PKCS#11 token */
  readonly keys: KeyCustody;
  /** signer algorithm for requests without signAlgo (configuration signer.defaultAlgorithm) */
  readonly defaultAlgorithm: SignerAlgorithm;
  /** evidence and certificate store: written before any signature is built */
  readonly store: Store;
  /** mediation records (spec 6.2): our owner_id, and the relay to wake once a record is stored */
  readonly mediation: MediationReporting;
  /** the ends of the long-lived material: nothing is signed while one a signature depends on has ended */
  readonly calendar: MaterialCalendar;
  readonly logger: Logger;
  readonly metrics: Metrics;
}

export type SignDocResult = Signatures & { readonly txn: string };

/** step 2: the RP's TLS client certificate (self-signed, no chain validation: spec 4.5) */
function clientFingerprint(clientCertDer: Buffer | undefined): string {
  if (!clientCertDer?.length)
    throw unauthorized('no TLS client certificate was presented; signDoc requires mutual TLS');
  return x5tS256(clientCertDer);
}

/** offer: format, level, hash and signer key must be offered (ades/offer.ts), before any network call */
function choose(request: ParsedSignDocRequest, deps: SignDocDeps): SigningChoice {
  const { signAlgo, signAlgoParams } = request.body;
  const { format, level, hashAlgorithm } = request;
  return chooseSigning(format, level, hashAlgorithm, signAlgo, signAlgoParams, deps.defaultAlgorithm);
}

export async function signDoc(
  body: unknown,
  clientCertDer: Buffer | undefined,
  deps: SignDocDeps,
): Promise<SignDocResult> {
  const request = parseSignDocRequest(body); // 1 parse
  const choice = choose(request, deps); // offer
  requireCurrentMaterial(deps.calendar); // material: nothing a signature depends on has ended
  const fingerprint = clientFingerprint(clientCertDer); // 2 client
  const sad = await validateSad(request.body.SAD, fingerprint, deps.sad); // 3 sad
  const introspection = await introspect(sad, deps.introspection); // 4 introspect
  return signConsented(request, choice, introspection, fingerprint, deps); // 5-10
}

/** Steps 5-10, once the AS has vouched for the SAD (the benchmark times this part in process too). */
export async function signConsented(
  request: ParsedSignDocRequest,
  choice: SigningChoice,
  introspection: Introspection,
  fingerprint: string,
  current: SignDocDeps,
): Promise<SignDocResult> {
  // one issuing CA for the whole request, also when a rollover switches it meanwhile (its certificate, chain, evidence)
  const deps: SignDocDeps = { ...current, issuingCa: current.issuingCa };
  const consent = checkConsent(introspection.payload, request, deps.qtspId, fingerprint); // 5 consent
  requireCustodySupport(choice, request, deps); // custody
  const once = await claimDocuments(consent, request, choice, deps.store, deps.logger); // 5b once per document
  // signed before: nothing is minted, signed or billed
  if (once.kind === 'replay') return { ...replayed(once.signatures), txn: consent.txn };
  try {
    const signer = await inCustody(() => mintSigner(choice, consent, deps), deps); // 7 mint
    try {
      await recordEvidence(introspection, consent, request, choice, signer, deps); // 6 evidence
      const signed = await inCustody(() => signHashes(request, choice, signer, deps), deps); // 8 sign
      requireCurrentMaterial(deps.calendar); // still nothing ended while it was signed
      await report(introspection, consent, request, signer, once.claim, signed, deps); // 10 report, keep
      return { ...signed, txn: consent.txn };
    } finally {
      await destroySigner(signer); // 9 destroy
    }
  } catch (err) {
    await releaseDocuments(once.claim, deps.store, deps.logger); // nothing was returned: a retry may sign them
    throw err;
  }
}
