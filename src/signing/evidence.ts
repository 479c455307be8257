/**
 * Step 6 of signDoc: evidence of why we sign: the introspection JWT as received, the transaction and the
 * certificate just minted, in one database transaction (store.recordSigning), before any signature exists.
 * After step 7 because the certificate is part of the evidence, and because our OCSP responder must already
 * answer "good" for it while B-LT signatures are built. No evidence, no signature: a store failure is a 503.
 *
 * An 'ordered' write (store/group-commit.ts): committed and visible (to our OCSP responder too) when it
 * resolves, and on disk with step 10's durable write, which every answer with signatures waits for. A crash
 * in between loses only the evidence of signatures that never left; one disk flush per signDoc fewer.
 */
import type { SigningChoice } from '../ades/offer.ts';
import type { KeyedCertificate } from '../ca/authority.ts';
import { describeLocation } from '../custody/types.ts';
import { temporarilyUnavailable } from '../errors.ts';
import type { Introspection } from '../introspection/client.ts';
import { issuedCertificateRecord } from '../store/records.ts';
import type { IssuedCertificate, SigningTransaction, Store } from '../store/types.ts';
import type { Logger } from '../util/logger.ts';
import type { Consent } from './consent.ts';
import type { ParsedSignDocRequest } from './request.ts';
import type { EphemeralSigner } from './signer.ts';

export interface EvidenceDeps {
  readonly issuingCa: KeyedCertificate;
  readonly store: Store;
  readonly logger: Logger;
}

/** step 6: the evidence, written before any signature exists */
export async function recordEvidence(
  introspection: Introspection,
  consent: Consent,
  request: ParsedSignDocRequest,
  choice: SigningChoice,
  signer: EphemeralSigner,
  deps: EvidenceDeps,
): Promise<void> {
  const now = new Date();
  const certificate = certificateRecord(signer, consent, now, deps);
  const transaction: SigningTransaction = {
    txn: consent.txn,
    iss: consent.issuer,
    sub: consent.sub,
    clientId: consent.clientId,
    clientState: consent.clientState,
    introspectionJwt: introspection.jwt,
    hashAlgorithmOid: request.hashAlgorithm.oid,
    hashes: request.hashes.map((h) => h.toString('base64')),
    signatureFormat: choice.format,
    conformanceLevel: choice.level,
    keySource: introspection.keySource,
    keyCustody: describeLocation(signer.key.location), // software, or the token's label and serial
    certificateSerialHex: certificate.serialHex,
    createdAt: now,
  };
  await write(transaction, certificate, deps);
  deps.logger.info(
    {
      event: 'sign.authorized',
      txn: consent.txn,
      iss: consent.issuer,
      client_id: consent.clientId,
      client_state: consent.clientState,
      hashes: request.hashes.length,
      hash_alg: request.hashAlgorithm.name,
      serial: certificate.serialHex,
    },
    'signing authorized, evidence recorded',
  );
}

function certificateRecord(
  signer: EphemeralSigner,
  consent: Consent,
  now: Date,
  deps: EvidenceDeps,
): IssuedCertificate {
  const { der, serialHex, notBefore, notAfter, subjectText } = signer.certificate;
  return issuedCertificateRecord({
    der,
    serialHex,
    notBefore,
    notAfter,
    subjectText,
    issuerKeyId: deps.issuingCa.issuer.keyId,
    txn: consent.txn,
    issuedAt: now,
  });
}

/** One 'ordered' database transaction; a failure is logged by message and code and refused with a 503. */
async function write(
  transaction: SigningTransaction,
  certificate: IssuedCertificate,
  deps: EvidenceDeps,
): Promise<void> {
  try {
    await deps.store.recordSigning({ transaction, certificate }, 'ordered');
  } catch (err) {
    // message and code only: a driver's error object may carry row values
    deps.logger.error(
      {
        event: 'store.write_failed',
        driver: deps.store.driver,
        txn: transaction.txn,
        error: (err as Error).message,
        code: (err as { code?: unknown }).code,
      },
      'evidence store write failed; request refused',
    );
    throw temporarilyUnavailable('the evidence store is unavailable; nothing was signed');
  }
}
