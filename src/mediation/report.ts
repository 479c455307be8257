/**
 * signDoc step 10, report (signing/report.ts; spec 6.2): the record remote_signature_creation is written to the outbox
 * once the signatures exist and before they are returned, then the relay is woken; delivery happens after the
 * response and never delays it.
 *
 * Why after the signatures and not inside the evidence write of step 6: the evidence must precede signing
 * (our OCSP responder answers for the certificate while B-LT is built), and signing can still fail after it
 * (a time-stamping authority that is down). A record written with the evidence would then bill the RP for a
 * signature it never got. Written here, a record exists exactly when signature data is about to be returned;
 * if the write fails, the signatures are withheld (503), so no signature leaves unbilled. A write whose answer
 * was lost after it committed is found committed by the store (keepSignatures) and the signatures are returned;
 * if the store cannot tell in time, the record may exist, and the retry with the same SAD receives the kept
 * signatures (signing/once.ts), billed once.
 */
import { DomainError } from '../domain-error.ts';
import type { DocumentClaim, KeptSignature, Store } from '../store/types.ts';
import type { Logger } from '../util/logger.ts';
import { mediationOutboxEntries, type SignatureReport } from './record.ts';

export interface MediationReporting {
  /** owner_id of our records (config mediation.ownerId) */
  readonly ownerId: string;
  /** wakes the outbox relay with the entries just committed; returns at once */
  readonly recorded: (entries: readonly { readonly id: string; readonly topic: string }[]) => void;
}

export interface ReportContext {
  readonly qtspId: string;
  readonly mediation: MediationReporting;
  readonly store: Store;
  readonly logger: Logger;
}

/**
 * `kept`: the signatures of this call and the claim on their documents (signing/once.ts), kept with the record
 * in one database transaction: a signature is kept for a retry exactly when it is billed.
 */
export async function reportSignature(
  report: SignatureReport,
  ctx: ReportContext,
  kept?: { claim: DocumentClaim; signatures: readonly KeptSignature[] },
): Promise<void> {
  // client_state demo: no record (spec 6.2, 3); the signatures are still kept
  const entries = mediationOutboxEntries(report, { qtspId: ctx.qtspId, ownerId: ctx.mediation.ownerId });
  if (entries.length === 0 && !kept) return;
  try {
    if (kept) {
      const outcome = await ctx.store.keepSignatures({
        ...kept,
        evidenceSerialHex: report.certificateSerialHex,
        outbox: entries,
      });
      if (outcome.lostAnswer !== undefined)
        ctx.logger.warn(
          { event: 'store.commit_confirmed', txn: report.txn, error: outcome.lostAnswer },
          'the answer to the write was lost; the database shows it committed: signatures returned',
        );
    } else await ctx.store.addOutbox(entries);
  } catch (err) {
    ctx.logger.error(
      { event: 'mediation.record_not_stored', txn: report.txn, error: (err as Error).message },
      'mediation record could not be stored; signatures withheld',
    );
    throw new DomainError('evidence_store_unavailable', 'the evidence store is unavailable');
  }
  if (entries.length) ctx.mediation.recorded(entries);
}
