/**
 * The signDoc use case, top to bottom (DESIGN.md steps 1-10; spec 2.12, 4.5, 5.7, 5.9, 2.16).
 * Each step is one named function in its own module; this file only calls them in order.
 */
import type { KeyObject } from 'node:crypto';
import { builderFor, type AdesServices, type RevocationInfo } from '../ades/builders.ts';
import { chooseSigning, type SigningChoice } from '../ades/offer.ts';
import { unauthorized } from '../errors.ts';
import { introspect, type IntrospectionContext } from '../introspection/client.ts';
import type { KeyedCertificate } from '../pki/authority.ts';
import { generateKeyPair } from '../pki/keys.ts';
import { mintSignerCertificate, type SignerCertificate } from '../pki/signer-certificate.ts';
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

/** step 6: evidence of why we sign (the store replaces this audit line when it exists) */
function recordEvidence(consent: Consent, request: ParsedSignDocRequest, logger: Logger): void {
  logger.info({ event: 'sign.authorized', txn: consent.txn, iss: consent.issuer, client_id: consent.clientId, client_state: consent.clientState, hashes: request.hashes.length, hash_alg: request.hashAlgorithm.name }, 'signing authorized');
}

/** A signer that lives for one request: its private key is dropped by destroySigner (step 9). */
interface EphemeralSigner {
  privateKey: KeyObject | undefined;
  readonly certificate: SignerCertificate;
}

/** step 7: fresh key pair and a certificate carrying the identity the bank vouched for (spec 2.16) */
function mintSigner(choice: SigningChoice, consent: Consent, deps: SignDocDeps): EphemeralSigner {
  const keys = generateKeyPair(choice.keyAlgorithm);
  const certificate = mintSignerCertificate({ claims: consent.claims, publicKey: keys.publicKey, issuingCa: deps.issuingCa, validitySeconds: deps.signerValiditySeconds });
  deps.metrics.certificates.inc();
  return { privateKey: keys.privateKey, certificate };
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

/** step 9: no reference to the private key survives the request (never logged, never stored) */
function destroySigner(signer: EphemeralSigner): void {
  signer.privateKey = undefined;
}

export async function signDoc(body: unknown, clientCertDer: Buffer | undefined, deps: SignDocDeps): Promise<SignDocResult> {
  const request = parseSignDocRequest(body); // 1 parse
  const b = request.body;
  const choice = chooseSigning(request.format, request.level, request.hashAlgorithm, b.signAlgo, b.signAlgoParams);
  const fingerprint = clientFingerprint(clientCertDer); // 2 client
  const sad = await validateSad(b.SAD, fingerprint, deps.sad); // 3 sad
  const { payload } = await introspect(sad, deps.introspection); // 4 introspect
  const consent = checkConsent(payload, request, deps.qtspId, fingerprint); // 5 consent
  recordEvidence(consent, request, deps.logger); // 6 evidence
  const signer = mintSigner(choice, consent, deps); // 7 mint
  try {
    return { ...(await signHashes(request, choice, signer, deps)), txn: consent.txn }; // 8 sign
  } finally {
    destroySigner(signer); // 9 destroy
  }
}
