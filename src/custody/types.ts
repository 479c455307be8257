/**
 * Key custody: one interface for every private key we sign with, so that no caller knows where a key lives.
 * Each backend is a folder of its own under custody/ (software: node:crypto KeyObjects in this process, the
 * sandbox default; pkcs11: a hardware security module or SoftHSM2 through PKCS#11, the keys never leave the
 * token), loaded through registry.ts by the name keys.provider gives.
 *
 * Two kinds of keys:
 * - a signer key lives for one signDoc request (steps 7-9 of sign-doc.ts): createSignerKey, sign, destroy;
 * - a long-lived key (issuing CA, TSA, the delegated OCSP responders of the issuing CA and of the root) is made
 *   once by `qtsp pki init` and named.
 */
import type { KeyObject } from 'node:crypto';
import { KEY_ALGORITHMS } from '../crypto/keys.ts';
import type { KeyAlgorithm, SignatureScheme, SignHash, SigningKey } from '../crypto/signature.ts';

export type { EcdsaEncoding, SigningKey } from '../crypto/signature.ts';

/** A key custody backend's name: keys.provider, and the name of the backend's folder under custody/. */
export type CustodyName = string;

/**
 * Where a key lives, as the evidence of each signature records it: the backend (`kind`) and what tells its
 * keys apart, e.g. a PKCS#11 token by its label and serial number (CK_TOKEN_INFO).
 */
export interface KeyLocation {
  readonly kind: CustodyName;
  readonly [detail: string]: string;
}

/** The kind, then each detail in order, joined by ':' ("software", "pkcs11:<label>:<serial>"): evidence, logs. */
export function describeLocation(location: KeyLocation): string {
  const details = Object.entries(location).filter(([name]) => name !== 'kind');
  return [location.kind, ...details.map(([, value]) => value)].join(':');
}

/** One line on where the keys of a custody live, for the `qtsp dev` banner. */
export function describeCustody(custody: Pick<KeyCustody, 'kind' | 'location'>): string {
  return `${describeLocation(custody.location)} (keys.provider ${custody.kind})`;
}

/** The key pair of one signDoc request (spec 2.16): used for one certificate and its signatures, then destroyed. */
export interface SignerKey extends SigningKey {
  readonly publicKey: KeyObject;
  readonly location: KeyLocation;
  /** Both halves are gone afterwards (PKCS#11: C_DestroyObject); idempotent, never throws. */
  destroy(): Promise<void>;
}

/**
 * createSignerKey's first step: an algorithm no custody offers is the caller's mistake (a TypeError naming it),
 * never taken for a failure of the custody.
 */
export function requireKeyAlgorithm(algorithm: KeyAlgorithm): void {
  if (!KEY_ALGORITHMS.includes(algorithm))
    throw new TypeError(
      `no signer keys of algorithm ${JSON.stringify(algorithm)} (offered: ${KEY_ALGORITHMS.join(', ')})`,
    );
}

/**
 * The long-lived keys in custody, by the role they have in the certificates `qtsp pki init` writes: the issuing
 * CA, the TSA, the issuing CA's delegated OCSP responder and the root's (RFC 6960 4.2.2.2). The root CA is not
 * among them: it signs at key ceremonies only, and stays a software key of the ceremony directory (ca/init.ts).
 */
export const LONG_LIVED_KEYS = ['issuing-ca', 'tsa', 'ocsp-responder', 'root-ocsp-responder'] as const;
export type LongLivedKeyName = (typeof LONG_LIVED_KEYS)[number];

export interface CustodyReadiness {
  readonly ready: boolean;
  readonly reasons: string[];
}

export interface KeyCustody {
  readonly kind: CustodyName;
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
  /** whether the custodian can sign now, and why not (readiness endpoint) */
  readiness(): CustodyReadiness;
  close(): Promise<void>;
}

/** `qtsp pki init`: a custodian that makes long-lived key pairs (replacing any of the same name). */
export interface LongLivedKeyMaker {
  generateLongLivedKey(
    name: LongLivedKeyName,
    algorithm: KeyAlgorithm,
  ): Promise<SigningKey & { readonly publicKey: KeyObject }>;
}

/** A long-lived key with its public key, as a custody hands it out. */
export type LongLivedSigningKey = SigningKey & { readonly publicKey: KeyObject };

/**
 * A custody that keeps long-lived keys itself and keeps several generations of one side by side: an issuing CA
 * rollover (ca/rollover.ts) keeps the current key under a generation tag (retired), then makes a new current
 * one; a renewal at a ceremony (ca/renewal.ts) makes a fresh key under a tag, then moves it to the current
 * place and the replaced one under a tag. The current key of a role has no tag. Running instances find the
 * current keys again on reload (refreshLongLivedKeys); a certificate signs with the key it certifies.
 */
export interface KeyGenerations {
  /** a new key pair under `name` and `tag` (undefined: the current one), replacing one of that name and tag */
  generateTaggedKey(
    name: LongLivedKeyName,
    tag: string | undefined,
    algorithm: KeyAlgorithm,
  ): Promise<LongLivedSigningKey>;
  /** the key under `name` and `tag` (undefined: the current one), found once, then cached */
  taggedKey(name: LongLivedKeyName, tag: string | undefined): Promise<LongLivedSigningKey>;
  /** moves a key from one tag to another (undefined: the current key) */
  retagKey(name: LongLivedKeyName, from: string | undefined, to: string | undefined): Promise<void>;
  /** destroys the key pair under `name` and `tag`; true when there was one */
  destroyTaggedKey(name: LongLivedKeyName, tag: string): Promise<boolean>;
  /** finds the current long-lived keys again (another process moved them) */
  refreshLongLivedKeys(): Promise<void>;
}

/** The custody's KeyGenerations, when it keeps long-lived keys itself (a token); undefined for key files. */
export function keyGenerationsOf(custody: object): KeyGenerations | undefined {
  return 'retagKey' in custody ? (custody as unknown as KeyGenerations) : undefined;
}

/** A custody failure at run time (a token that disappeared): nothing was signed; signDoc answers 503. */
export class KeyCustodyUnavailable extends Error {
  override name = 'KeyCustodyUnavailable';
}
