/**
 * Key custody (DESIGN.md "Key custody"; the smallstep cas/apiv1 and PeculiarVentures x509 provider idea): one
 * interface for every private key we sign with, so that no caller knows where a key lives. Two custodians:
 * software (node:crypto KeyObjects in this process: the sandbox default) and pkcs11 (a hardware security module
 * or SoftHSM2 through PKCS#11: the keys never leave the token).
 *
 * Two kinds of keys:
 * - a signer key lives for one signDoc request (DESIGN.md steps 7-9): createSignerKey, sign, destroy;
 * - a long-lived key (root CA, issuing CA, TSA, OCSP responder) is made once by `qtsp pki init` and named.
 */
import type { KeyObject } from 'node:crypto';
import type { KeyAlgorithm, SignatureScheme, SignHash, SigningKey } from '../crypto/signature.ts';

export type { EcdsaEncoding, SigningKey } from '../crypto/signature.ts';

/** Where a key lives; the evidence of each signature records it (issue 9 item 3). */
export type KeyLocation =
  | { readonly kind: 'software' }
  /** a PKCS#11 token, by its label and serial number (CK_TOKEN_INFO) */
  | { readonly kind: 'pkcs11'; readonly tokenLabel: string; readonly tokenSerial: string };

/** "software", or "pkcs11:<label>:<serial>": the evidence column (store) and log lines. */
export function describeLocation(location: KeyLocation): string {
  return location.kind === 'software' ? 'software' : `pkcs11:${location.tokenLabel}:${location.tokenSerial}`;
}

/** The key pair of one signDoc request (spec 2.16): used for one certificate and its signatures, then destroyed. */
export interface SignerKey extends SigningKey {
  readonly publicKey: KeyObject;
  readonly location: KeyLocation;
  /** Both halves are gone afterwards (PKCS#11: C_DestroyObject); idempotent, never throws. */
  destroy(): Promise<void>;
}

/**
 * The long-lived keys in custody, by the role they have in the certificates `qtsp pki init` writes. The root
 * CA is not among them: it signs at init and its CRL only, and stays a software key (pki/init.ts says why).
 */
export const LONG_LIVED_KEYS = ['issuing-ca', 'tsa', 'ocsp-responder'] as const;
export type LongLivedKeyName = (typeof LONG_LIVED_KEYS)[number];

export interface CustodyReadiness {
  readonly ready: boolean;
  readonly reasons: string[];
}

export interface KeyCustody {
  readonly kind: 'software' | 'pkcs11';
  readonly location: KeyLocation;
  /**
   * Whether keys made here are in a qualified signature creation device: only a token the configuration
   * declares one (keys.tokenIsQscd). Software keys never are. Decides QcSSCD and QCP-n-qscd (EN 319 411-2 5.3).
   */
  readonly qscd: boolean;
  /** step 7: a fresh key pair nobody else ever gets (RSA from a pool of never-used pairs) */
  createSignerKey(algorithm: KeyAlgorithm, scheme: SignatureScheme): Promise<SignerKey>;
  /** a long-lived key (loaded or found once at start, then cached), with its public key */
  longLivedKey(name: LongLivedKeyName): SigningKey & { readonly publicKey: KeyObject };
  /** whether this custodian signs with the scheme and hash (a PKCS#11 2.40 token has no PSS with SHA-3) */
  supports(scheme: SignatureScheme, hash: SignHash): boolean;
  /** Resolves when the pool of RSA signer keys holds `count` (default: all) pairs (tests, benchmarks). */
  rsaFilled(count?: number): Promise<void>;
  /** whether the custodian can sign now, and why not (readiness endpoint) */
  readiness(): CustodyReadiness;
  close(): Promise<void>;
}

/** `qtsp pki init --pkcs11`: a custodian that makes long-lived key pairs (replacing any of the same name). */
export interface LongLivedKeyMaker {
  generateLongLivedKey(
    name: LongLivedKeyName,
    algorithm: KeyAlgorithm,
  ): Promise<SigningKey & { readonly publicKey: KeyObject }>;
}

/** A custody failure at run time (a token that disappeared): nothing was signed; signDoc answers 503. */
export class KeyCustodyUnavailable extends Error {
  override name = 'KeyCustodyUnavailable';
}
