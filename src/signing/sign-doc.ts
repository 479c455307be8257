/**
 * The signDoc use case, top to bottom (DESIGN.md steps 1-10; spec 2.12, 4.5, 5.7, 5.9, 2.16).
 * Each step is one named function in its own module; this file only calls them in order.
 */
import { builderFor } from '../ades/builders.ts';
import type { AdesServices, RevocationInfo } from '../ades/types.ts';
import { chooseSigning, type SigningChoice } from '../ades/offer.ts';
import { badRequest, temporarilyUnavailable, unauthorized } from '../errors.ts';
import { introspect, type Introspection, type IntrospectionContext } from '../introspection/client.ts';
import type { KeyedCertificate } from '../ca/authority.ts';
import { describeLocation, KeyCustodyUnavailable, type KeyCustody, type SignerKey } from '../custody/types.ts';
import type { SignerAlgorithm } from '../crypto/keys.ts';
import { mintSignerCertificate, type SignerCertificate, type SignerProfile } from '../ca/signer-certificate.ts';
import { reportSignature, type MediationReporting } from '../mediation/report.ts';
import { issuedCertificateRecord } from '../store/records.ts';
import type { DocumentClaim, KeptSignature, SigningTransaction, Store } from '../store/types.ts';
import { x5tS256 } from '../trust/fingerprint.ts';
import { validateSad, type SadContext } from '../trust/sad.ts';
import { base64Text, checkedBase64Text, type Base64Text } from '../util/base64.ts';
import type { Logger } from '../util/logger.ts';
import type { Metrics } from '../util/metrics.ts';
import { checkConsent, type Consent } from './consent.ts';
import { claimDocuments, releaseDocuments } from './once.ts';
import { parseSignDocRequest, type ParsedSignDocRequest } from './request.ts';

export interface SignDocDeps {
  readonly qtspId: string;
  readonly sad: SadContext;
  readonly introspection: IntrospectionContext;
  readonly issuingCa: KeyedCertificate;
  /** TSA and revocation sources for B-T and above */
  readonly ades: AdesServices;
  readonly signerValiditySeconds: number;
  /** what every signer certificate carries besides the identity: default country, PDS locations (configuration signer.*) */
  readonly signerProfile: SignerProfile;
  /** key custody (pki/custody/): per-request key pairs (step 7), software or in a PKCS#11 token */
  readonly keys: KeyCustody;
  /** signer algorithm for requests without signAlgo (configuration signer.defaultAlgorithm) */
  readonly defaultAlgorithm: SignerAlgorithm;
  /** evidence and certificate store: written before any signature is built */
  readonly store: Store;
  /** mediation records (spec 6.2): our owner_id, and the relay to wake once a record is stored */
  readonly mediation: MediationReporting;
  readonly logger: Logger;
  readonly metrics: Metrics;
}

export interface SignDocResult {
  readonly SignatureObject: Base64Text[];
  readonly revocationInfo?: { ocsp: Base64Text[]; crl: Base64Text[] };
  readonly txn: string;
}

/** step 2: the RP's TLS client certificate (self-signed, no chain validation: spec 4.5) */
function clientFingerprint(clientCertDer: Buffer | undefined): string {
  if (!clientCertDer?.length)
    throw unauthorized('no TLS client certificate was presented; signDoc requires mutual TLS');
  return x5tS256(clientCertDer);
}

/** A signer that lives for one request: its key pair is destroyed by destroySigner (step 9). */
interface EphemeralSigner {
  readonly key: SignerKey;
  readonly certificate: SignerCertificate;
}

/** step 7: fresh key pair (in the key custody) and a certificate carrying the identity the bank vouched for (spec 2.16) */
async function mintSigner(choice: SigningChoice, consent: Consent, deps: SignDocDeps): Promise<EphemeralSigner> {
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

/**
 * step 6: evidence of why we sign: the introspection JWT as received, the transaction and the certificate just
 * minted, in one database transaction (store.recordSigning), before any signature exists. After step 7
 * because the certificate is part of the evidence, and because our OCSP responder must already answer "good"
 * for it while B-LT signatures are built. No evidence, no signature: a store failure is a 503.
 * An 'ordered' write (store/group-commit.ts): committed and visible (to our OCSP responder too) when it
 * resolves, and on disk with step 10's durable write, which every answer with signatures waits for. A crash
 * in between loses only the evidence of signatures that never left; one disk flush per signDoc fewer.
 */
async function recordEvidence(
  introspection: Introspection,
  consent: Consent,
  request: ParsedSignDocRequest,
  choice: SigningChoice,
  signer: EphemeralSigner,
  deps: SignDocDeps,
): Promise<void> {
  const now = new Date();
  const { der, serialHex, notBefore, notAfter, subjectText } = signer.certificate;
  const certificate = issuedCertificateRecord({
    der,
    serialHex,
    notBefore,
    notAfter,
    subjectText,
    issuerKeyId: deps.issuingCa.issuer.keyId,
    txn: consent.txn,
    issuedAt: now,
  });
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
  try {
    await deps.store.recordSigning({ transaction, certificate }, 'ordered');
  } catch (err) {
    // message and code only: a driver's error object may carry row values
    deps.logger.error(
      {
        event: 'store.write_failed',
        driver: deps.store.driver,
        txn: consent.txn,
        error: (err as Error).message,
        code: (err as { code?: unknown }).code,
      },
      'evidence store write failed; request refused',
    );
    throw temporarilyUnavailable('the evidence store is unavailable; nothing was signed');
  }
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

/**
 * step 8: one signature per hash, in request order, in the requested format and level. Built concurrently:
 * at B-LT each signature waits for revocation data issued after its time-stamp (up to a second, no CPU), and
 * the signatures of one request share that wait and that data instead of queueing a second each.
 */
async function signHashes(
  request: ParsedSignDocRequest,
  choice: SigningChoice,
  signer: EphemeralSigner,
  deps: SignDocDeps,
): Promise<Omit<SignDocResult, 'txn'>> {
  const build = builderFor(choice.format, choice.level)!; // chooseSigning admitted only offered combinations
  const key = signer.key;
  const signingTime = new Date();
  const built = await Promise.all(
    request.hashes.map((hash) =>
      build({
        hash,
        hashAlgorithm: request.hashAlgorithm,
        signerCertificate: signer.certificate,
        chain: [deps.issuingCa.der],
        key,
        signingTime,
        services: deps.ades,
      }),
    ),
  );
  deps.metrics.signatures.inc(built.length);
  return {
    SignatureObject: built.map((b) => base64Text(b.signature)),
    ...revocationInfo(built.map((b) => b.revocation)),
  };
}

/** revocationInfo of kept signatures: each kept the revocationInfo of the response it was returned in */
function revocationOf(kept: readonly KeptSignature[]): Pick<SignDocResult, 'revocationInfo'> {
  const present = kept.flatMap((k) => (k.revocation ? [k.revocation] : []));
  if (present.length === 0) return {};
  const unique = (list: string[]) => [...new Set(list)].map(checkedBase64Text);
  return {
    revocationInfo: { ocsp: unique(present.flatMap((r) => r.ocsp)), crl: unique(present.flatMap((r) => r.crl)) },
  };
}

/** the response's revocationInfo (spec 2.12): every distinct OCSP response and CRL used, Base64 DER */
function revocationInfo(all: readonly (RevocationInfo | undefined)[]): Pick<SignDocResult, 'revocationInfo'> {
  const present = all.filter((r): r is RevocationInfo => r !== undefined);
  if (present.length === 0) return {};
  const unique = (list: Buffer[]) => [...new Set(list.map(base64Text))];
  return {
    revocationInfo: {
      ocsp: unique(present.flatMap((r) => [...r.ocsp])),
      crl: unique(present.flatMap((r) => [...r.crl])),
    },
  };
}

/**
 * step 10: the mediation record of this call (spec 6.2) and the signatures kept for a retry (once.ts), in one
 * database transaction before the signatures are returned (mediation/report.ts says why not with the evidence)
 */
function report(
  introspection: Introspection,
  consent: Consent,
  request: ParsedSignDocRequest,
  signer: EphemeralSigner,
  claim: DocumentClaim,
  signed: Omit<SignDocResult, 'txn'>,
  deps: SignDocDeps,
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

/**
 * step 5b, a replay: the signatures kept for these documents, as first returned (once.ts). Read back from the
 * store, so their characters are checked: the answer carries Base64Text into its JSON unescaped.
 */
function replayed(signatures: readonly KeptSignature[], consent: Consent): SignDocResult {
  return {
    SignatureObject: signatures.map((s) => checkedBase64Text(s.signature)),
    ...revocationOf(signatures),
    txn: consent.txn,
  };
}

/** step 9: the key pair is gone before the response leaves (PKCS#11: C_DestroyObject of both halves) */
function destroySigner(signer: EphemeralSigner): Promise<void> {
  return signer.key.destroy();
}

/** A key custody failure (a token gone) is a 503: nothing was signed, and readiness says why. */
async function inCustody<T>(work: () => Promise<T>, deps: SignDocDeps): Promise<T> {
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

/** The custody must sign this scheme with this hash (a PKCS#11 2.40 token has no RSASSA-PSS with SHA-3). */
function requireCustodySupport(choice: SigningChoice, request: ParsedSignDocRequest, deps: SignDocDeps): void {
  if (deps.keys.supports(choice.scheme, request.hashAlgorithm.node as Parameters<KeyCustody['supports']>[1])) return;
  throw badRequest(
    `signAlgo ${choice.algorithm} with ${request.hashAlgorithm.name} is not offered: the key custody (HSM) cannot sign it`,
  );
}

export async function signDoc(
  body: unknown,
  clientCertDer: Buffer | undefined,
  deps: SignDocDeps,
): Promise<SignDocResult> {
  const request = parseSignDocRequest(body); // 1 parse
  const b = request.body;
  const choice = chooseSigning(
    request.format,
    request.level,
    request.hashAlgorithm,
    b.signAlgo,
    b.signAlgoParams,
    deps.defaultAlgorithm,
  );
  const fingerprint = clientFingerprint(clientCertDer); // 2 client
  const sad = await validateSad(b.SAD, fingerprint, deps.sad); // 3 sad
  const introspection = await introspect(sad, deps.introspection); // 4 introspect
  return signConsented(request, choice, introspection, fingerprint, deps); // 5-10
}

/** Steps 5-10, once the AS has vouched for the SAD (the benchmark times this part in process too). */
export async function signConsented(
  request: ParsedSignDocRequest,
  choice: SigningChoice,
  introspection: Introspection,
  fingerprint: string,
  deps: SignDocDeps,
): Promise<SignDocResult> {
  const consent = checkConsent(introspection.payload, request, deps.qtspId, fingerprint); // 5 consent
  requireCustodySupport(choice, request, deps);
  const once = await claimDocuments(consent, request, choice, deps.store, deps.logger); // 5b once per document
  if (once.kind === 'replay') return replayed(once.signatures, consent); // signed before: nothing minted, signed or billed
  try {
    const signer = await inCustody(() => mintSigner(choice, consent, deps), deps); // 7 mint
    try {
      await recordEvidence(introspection, consent, request, choice, signer, deps); // 6 evidence (needs the certificate of 7)
      const signed = await inCustody(() => signHashes(request, choice, signer, deps), deps); // 8 sign
      await report(introspection, consent, request, signer, once.claim, signed, deps); // 10 report, keep for a retry
      return { ...signed, txn: consent.txn };
    } finally {
      await destroySigner(signer); // 9 destroy
    }
  } catch (err) {
    await releaseDocuments(once.claim, deps.store, deps.logger); // nothing was returned: a retry may sign them
    throw err;
  }
}
