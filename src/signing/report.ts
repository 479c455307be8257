/**
 * Step 10 of signDoc: the mediation record of this call (spec 6.2) and the signatures kept for a retry
 * (once.ts), in one database transaction before the signatures are returned (mediation/report.ts says why not
 * with the evidence).
 */
import type { Introspection } from '../introspection/client.ts';
import { reportSignature, type ReportContext } from '../mediation/report.ts';
import type { DocumentClaim } from '../store/types.ts';
import type { Consent } from './consent.ts';
import type { ParsedSignDocRequest } from './request.ts';
import type { Signatures } from './signatures.ts';
import type { EphemeralSigner } from './signer.ts';

/** step 10 */
export function report(
  introspection: Introspection,
  consent: Consent,
  request: ParsedSignDocRequest,
  signer: EphemeralSigner,
  claim: DocumentClaim,
  signed: Signatures,
  deps: ReportContext,
): Promise<void> {
  const { txn, issuer, clientId, clientState } = consent;
  const certificate = signer.certificate;
  const kept = signed.SignatureObject.map((signature, i) => ({
    hash: claim.hashes[i]!,
    signature,
    revocation: signed.revocationInfo ?? null,
  }));
  return reportSignature(
    {
      txn,
      issuer,
      clientId,
      clientState,
      authorizationDetails: introspection.payload.authorization_details,
      credentialID: request.body.credentialID,
      hashes: request.hashes,
      providedClaims: certificate.providedClaims,
      certificateSerialHex: certificate.serialHex,
      deliveryTime: new Date(),
    },
    deps,
    { claim, signatures: kept },
  );
}
