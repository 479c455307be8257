/**
 * Step 5b of signDoc, once per document: one consent (the AS transaction, `iss` + `txn`) gives at most one
 * signature per consented document. Before anything is minted, the request claims its documents in the store
 * (a unique key per iss, txn, hash algorithm and hash, so two requests, on one instance or on several sharing
 * PostgreSQL, cannot both claim one document). Then:
 *
 * - every document is new: this request signs them; the signatures are kept with the claim when the mediation
 *   record is written (same database transaction), so a signature is kept for a retry exactly when it is billed;
 * - every document was signed before, by a request asking the same (format, level, signer key): the kept
 *   signatures are returned again, nothing is minted, signed or billed. This is the RP retrying after a lost
 *   response (spec 4.5, 8: it waits 60 s for signDoc and may time out while we answer);
 * - a document is being signed by another request right now: wait for it (bounded), then answer as above;
 * - a document was signed before with other parameters, or only some documents were: 400, naming the document.
 *
 * Why return the kept signature rather than refuse: the RP was billed for it and the user consented to it; a
 * refusal would leave an RP whose answer was lost without the signature and force the user through the
 * bank's consent again. The signature returned is the same bytes, so nothing new is created or billed.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SigningChoice } from '../ades/offer.ts';
import { badRequest, temporarilyUnavailable } from '../errors.ts';
import type { ClaimOutcome, DocumentClaim, KeptSignature, Store } from '../store/types.ts';
import type { Logger } from '../util/logger.ts';
import type { Consent } from './consent.ts';
import type { ParsedSignDocRequest } from './request.ts';

/**
 * A claim without a signature older than this is abandoned (its request died: process killed, store gone while
 * releasing it) and may be taken over. Twice the 60 s an RP waits for signDoc (spec 4.5, 8): no request
 * still holding such a claim can answer its caller anymore.
 */
export const CLAIM_STALE_MS = 120_000;
/** How long a request waits for another request signing the same document (B-LT takes a second or two). */
export const IN_PROGRESS_WAIT_MS = 15_000;
const POLL_MS = 50;

export type Once =
  | { readonly kind: 'sign'; readonly claim: DocumentClaim }
  | { readonly kind: 'replay'; readonly signatures: readonly KeptSignature[] };

/** What a replay must ask exactly as the first request did: the same signature for the same document. */
function requestKey(choice: SigningChoice): string {
  return `${choice.format} ${choice.level} ${choice.algorithm}`;
}

function describe(key: string): string {
  const [format, level, key_] = key.split(' ');
  return `signature_format ${format}, ${level}, ${key_} key`;
}

async function claimOrWait(
  store: Store,
  claim: DocumentClaim,
  logger: Logger,
): Promise<Exclude<ClaimOutcome, { kind: 'in_progress' }>> {
  const deadline = Date.now() + IN_PROGRESS_WAIT_MS;
  for (;;) {
    let outcome: ClaimOutcome;
    try {
      outcome = await store.claimDocuments(claim, new Date(Date.now() - CLAIM_STALE_MS));
    } catch (err) {
      logger.error(
        {
          event: 'store.claim_failed',
          driver: store.driver,
          txn: claim.txn,
          error: (err as Error).message,
          code: (err as { code?: unknown }).code,
        },
        'document claim failed; request refused',
      );
      throw temporarilyUnavailable('the evidence store is unavailable; nothing was signed');
    }
    if (outcome.kind !== 'in_progress') return outcome;
    if (Date.now() >= deadline)
      throw temporarilyUnavailable(
        `documentDigests.hashes[${outcome.index}] is being signed under this consent by another request; ` +
          'retry to receive that signature',
      );
    await sleep(POLL_MS);
  }
}

export async function claimDocuments(
  consent: Consent,
  request: ParsedSignDocRequest,
  choice: SigningChoice,
  store: Store,
  logger: Logger,
): Promise<Once> {
  const claim: DocumentClaim = {
    iss: consent.issuer,
    txn: consent.txn,
    hashAlgorithmOid: request.hashAlgorithm.oid,
    hashes: request.hashes.map((h) => h.toString('base64')),
    claimId: randomUUID(),
    requestKey: requestKey(choice),
    claimedAt: new Date(),
  };
  const outcome = await claimOrWait(store, claim, logger);
  switch (outcome.kind) {
    case 'claimed':
      return { kind: 'sign', claim };
    case 'signed':
      logger.info(
        {
          event: 'sign.replayed',
          txn: consent.txn,
          iss: consent.issuer,
          client_id: consent.clientId,
          hashes: claim.hashes.length,
        },
        'documents signed before under this consent: kept signatures returned, nothing minted or billed',
      );
      return { kind: 'replay', signatures: outcome.signatures };
    case 'other_request':
      throw badRequest(
        `documentDigests.hashes[${outcome.index}] was signed under this consent ` +
          `with ${describe(outcome.requestKey)}; ` +
          'a consent gives one signature per document: repeat that request to receive it again, ' +
          'or ask the user for a new consent',
      );
    case 'mixed':
      throw badRequest(
        `documentDigests.hashes[${outcome.index}] was already signed under this consent by another request ` +
          'and others were not; send the documents signed before in a request of their own ' +
          '(their signatures are returned again) and the others in another',
      );
  }
}

/** A request that claimed and then failed gives its documents back, so a retry can sign them. */
export async function releaseDocuments(claim: DocumentClaim, store: Store, logger: Logger): Promise<void> {
  try {
    await store.releaseDocuments(claim);
  } catch (err) {
    // the store tries it again until the database takes it; a claim never released goes stale after CLAIM_STALE_MS
    logger.warn(
      { event: 'store.release_failed', txn: claim.txn, error: (err as Error).message },
      'document claim not released yet; retried until the store takes it',
    );
  }
}
