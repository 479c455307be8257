/**
 * The signDoc use case, top to bottom (DESIGN.md steps 1-10; spec 2.12, 4.5, 5.7, 5.9, 2.16).
 * Each step is one named function in its own module; this file only calls them in order.
 */
import type { KeyObject } from 'node:crypto';
import { builderFor, type AdesServices, type RevocationInfo } from '../ades/builders.ts';
import { chooseSigning, type SigningChoice } from '../ades/offer.ts';
import { temporarilyUnavailable, unauthorized } from '../errors.ts';
import { introspect, type Introspection, type IntrospectionContext } from '../introspection/client.ts';
import type { KeyedCertificate } from '../pki/authority.ts';
import type { SignerKeySource } from '../pki/key-pool.ts';
import { signingKeyFor, type SignerAlgorithm } from '../pki/keys.ts';
import { mintSignerCertificate, type SignerCertificate } from '../pki/signer-certificate.ts';
import { reportSignature, type MediationReporting } from '../mediation/report.ts';
import { issuedCertificateRecord, serialHexOf } from '../store/records.ts';
import type { SigningTransaction, Store } from '../store/types.ts';
import { x5tS256 } from '../trust/fingerprint.ts';
import { validateSad, type SadContext } from '../trust/sad.ts';
import type { Logger } from '../util/logger.ts';
import type { Metrics } from '../http/metrics.ts';
import { checkConsent, type Consent } from './consent.ts';
import { parseSignDocRequest, type ParsedSignDocRequest } from './request.ts';

export interface SignDocDeps {
  readonly qtspId: string;
  readonly sad: SadContext;
  readonly introspection: IntrospectionContext;
  readonly issuingCa: KeyedCertificate;
  /** TSA and revocation sources for B-T and above */
  readonly ades: AdesServices;
  readonly signerValiditySeconds: number;
  /** per-request key pairs (step 7): EC generated inline, RSA from a pool of fresh keys (pki/key-pool.ts) */
  readonly keys: SignerKeySource;
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
  readonly SignatureObject: string[];
  readonly revocationInfo?: { ocsp: string[]; crl: string[] };
  readonly txn: string;
}

/** step 2: the RP's TLS client certificate (self-signed, no chain validation: spec 4.5) */
function clientFingerprint(clientCertDer: Buffer | undefined): string {
  if (!clientCertDer?.length) throw unauthorized('no TLS client certificate was presented; signDoc requires mutual TLS');
  return x5tS256(clientCertDer);
}

/** A signer that lives for one request: its private key is dropped by destroySigner (step 9). */
interface EphemeralSigner {
  privateKey: KeyObject | undefined;
  readonly certificate: SignerCertificate;
}

/** step 7: fresh key pair and a certificate carrying the identity the bank vouched for (spec 2.16) */
async function mintSigner(choice: SigningChoice, consent: Consent, deps: SignDocDeps): Promise<EphemeralSigner> {
  const keys = await deps.keys.take(choice.keyAlgorithm); // handed out once, never again
  const certificate = mintSignerCertificate({ claims: consent.claims, publicKey: keys.publicKey, issuingCa: deps.issuingCa, validitySeconds: deps.signerValiditySeconds });
  deps.metrics.certificates.inc();
  return { privateKey: signingKeyFor(keys.privateKey, choice.scheme), certificate }; // the certificate keeps the key's own SPKI
}

/**
 * step 6: evidence of why we sign: the introspection JWT as received, the transaction and the certificate just
 * minted, in one database transaction (store.recordSigning), before any signature exists. After step 7
 * because the certificate is part of the evidence, and because our OCSP responder must already answer "good"
 * for it while B-LT signatures are built. No evidence, no signature: a store failure is a 503.
 */
async function recordEvidence(introspection: Introspection, consent: Consent, request: ParsedSignDocRequest, choice: SigningChoice, signer: EphemeralSigner, deps: SignDocDeps): Promise<void> {
  const now = new Date();
  const certificate = issuedCertificateRecord({ certificate: signer.certificate.certificate, der: signer.certificate.der, issuerKeyId: deps.issuingCa.issuer.keyId, txn: consent.txn, issuedAt: now });
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
    certificateSerialHex: certificate.serialHex,
    createdAt: now,
  };
  try {
    await deps.store.recordSigning({ transaction, certificate });
  } catch (err) {
    // message and code only: a driver's error object may carry row values
    deps.logger.error({ event: 'store.write_failed', driver: deps.store.driver, txn: consent.txn, error: (err as Error).message, code: (err as { code?: unknown }).code }, 'evidence store write failed; request refused');
    throw temporarilyUnavailable('the evidence store is unavailable; nothing was signed');
  }
  deps.logger.info({ event: 'sign.authorized', txn: consent.txn, iss: consent.issuer, client_id: consent.clientId, client_state: consent.clientState, hashes: request.hashes.length, hash_alg: request.hashAlgorithm.name, serial: certificate.serialHex }, 'signing authorized, evidence recorded');
}

/** step 8: one signature per hash, in request order, in the requested format and level */
async function signHashes(request: ParsedSignDocRequest, choice: SigningChoice, signer: EphemeralSigner, deps: SignDocDeps): Promise<Omit<SignDocResult, 'txn'>> {
  const build = builderFor(choice.format, choice.level)!; // chooseSigning admitted only offered combinations
  const privateKey = signer.privateKey!;
  const signingTime = new Date();
  const built = [];
  for (const hash of request.hashes) {
    built.push(await build({ hash, hashAlgorithm: request.hashAlgorithm, signerCertificate: signer.certificate, chain: [deps.issuingCa.der], privateKey, signingTime, services: deps.ades }));
  }
  deps.metrics.signatures.inc(built.length);
  return { SignatureObject: built.map((b) => b.signature.toString('base64')), ...revocationInfo(built.map((b) => b.revocation)) };
}

/** the response's revocationInfo (spec 2.12): every distinct OCSP response and CRL used, Base64 DER */
function revocationInfo(all: readonly (RevocationInfo | undefined)[]): Pick<SignDocResult, 'revocationInfo'> {
  const present = all.filter((r): r is RevocationInfo => r !== undefined);
  if (present.length === 0) return {};
  const unique = (list: Buffer[]) => [...new Set(list.map((b) => b.toString('base64')))];
  return { revocationInfo: { ocsp: unique(present.flatMap((r) => [...r.ocsp])), crl: unique(present.flatMap((r) => [...r.crl])) } };
}

/** step 10: the mediation record of this call (spec 6.2), stored before the signatures are returned (mediation/report.ts says why not with the evidence) */
function report(introspection: Introspection, consent: Consent, request: ParsedSignDocRequest, signer: EphemeralSigner, deps: SignDocDeps): Promise<void> {
  const { txn, issuer, clientId, clientState } = consent;
  const certificate = signer.certificate;
  return reportSignature(
    { txn, issuer, clientId, clientState, authorizationDetails: introspection.payload.authorization_details, credentialID: request.body.credentialID, hashes: request.hashes, providedClaims: certificate.providedClaims, certificateSerialHex: serialHexOf(certificate.certificate), deliveryTime: new Date() },
    deps,
  );
}

/** step 9: no reference to the private key survives the request (never logged, never stored) */
function destroySigner(signer: EphemeralSigner): void {
  signer.privateKey = undefined;
}

export async function signDoc(body: unknown, clientCertDer: Buffer | undefined, deps: SignDocDeps): Promise<SignDocResult> {
  const request = parseSignDocRequest(body); // 1 parse
  const b = request.body;
  const choice = chooseSigning(request.format, request.level, request.hashAlgorithm, b.signAlgo, b.signAlgoParams, deps.defaultAlgorithm);
  const fingerprint = clientFingerprint(clientCertDer); // 2 client
  const sad = await validateSad(b.SAD, fingerprint, deps.sad); // 3 sad
  const introspection = await introspect(sad, deps.introspection); // 4 introspect
  return signConsented(request, choice, introspection, fingerprint, deps); // 5-10
}

/** Steps 5-10, once the AS has vouched for the SAD (the benchmark times this part in process too). */
export async function signConsented(request: ParsedSignDocRequest, choice: SigningChoice, introspection: Introspection, fingerprint: string, deps: SignDocDeps): Promise<SignDocResult> {
  const consent = checkConsent(introspection.payload, request, deps.qtspId, fingerprint); // 5 consent
  const signer = await mintSigner(choice, consent, deps); // 7 mint
  try {
    await recordEvidence(introspection, consent, request, choice, signer, deps); // 6 evidence (needs the certificate of 7)
    const signed = await signHashes(request, choice, signer, deps); // 8 sign
    await report(introspection, consent, request, signer, deps); // 10 report
    return { ...signed, txn: consent.txn };
  } finally {
    destroySigner(signer); // 9 destroy
  }
}
