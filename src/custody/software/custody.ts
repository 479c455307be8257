/**
 * Software key custody: keys are node:crypto KeyObjects in this process (the sandbox default of `npm start`).
 * Signer keys (signer-keys.ts): EC generated inline, RSA-3072 from a pool of fresh, never-used keys made in
 * worker threads; destroy() drops the last reference. Long-lived keys are the PKCS#8 files `qtsp pki init`
 * wrote, read once at start. Software keys are never in a QSCD.
 */
import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { SoftwareSigningKey, type EcdsaEncoding, type SignHash, type SigningKey } from '../../crypto/signature.ts';
import type { Logger } from '../../util/logger.ts';
import { createSignerKeys, type SignerKeys } from './signer-keys.ts';
import { signingKeyFor, type KeyAlgorithm, type SignatureScheme } from '../../crypto/keys.ts';
import {
  requireKeyAlgorithm,
  type CustodyReadiness,
  type KeyCustody,
  type KeyLocation,
  type LongLivedKeyName,
  type SignerKey,
} from '../types.ts';

const SOFTWARE: KeyLocation = { kind: 'software' };

class SoftwareSignerKey implements SignerKey {
  readonly algorithm: KeyAlgorithm;
  readonly scheme: SignatureScheme;
  readonly publicKey: KeyObject;
  readonly location = SOFTWARE;
  #key: SoftwareSigningKey | undefined;

  constructor(algorithm: KeyAlgorithm, privateKey: KeyObject, publicKey: KeyObject, scheme: SignatureScheme) {
    // the certificate keeps the generated key's own SPKI; an 'rsa-pss' KeyObject signs only RSASSA-PSS (keys.ts)
    this.#key = new SoftwareSigningKey(signingKeyFor(privateKey, scheme), algorithm);
    this.algorithm = algorithm;
    this.scheme = scheme;
    this.publicKey = publicKey;
  }

  async sign(hash: SignHash, data: Uint8Array, encoding?: EcdsaEncoding): Promise<Buffer> {
    if (!this.#key) throw new TypeError('the signer key was destroyed');
    return this.#key.signSync(hash, data, encoding);
  }

  /** step 9: no reference to the private key survives (never logged, never stored) */
  async destroy(): Promise<void> {
    this.#key = undefined;
  }
}

export interface SoftwareCustodyOptions {
  /** PKCS#8 PEM files of the long-lived keys (as `qtsp pki init` wrote them) */
  readonly keyFiles: Readonly<Record<LongLivedKeyName, string>>;
  readonly rsaPoolSize: number;
  /** worker threads of the RSA pool (default: rsa-threads.ts) */
  readonly threads?: number;
  readonly logger?: Logger;
}

export class SoftwareCustody implements KeyCustody {
  readonly kind = 'software';
  readonly location = SOFTWARE;
  readonly qscd = false; // keys in process memory: never a QSCD
  readonly signerKeys: SignerKeys;
  readonly #keyFiles: SoftwareCustodyOptions['keyFiles'];
  /** each key with the PEM it was read from: a ceremony that renewed a key file is picked up at the next call */
  readonly #longLived = new Map<
    LongLivedKeyName,
    { pem: string; key: SigningKey & { readonly publicKey: KeyObject } }
  >();

  constructor(options: SoftwareCustodyOptions) {
    this.#keyFiles = options.keyFiles;
    this.signerKeys = createSignerKeys({
      rsaPoolSize: options.rsaPoolSize,
      ...(options.threads ? { threads: options.threads } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
    });
  }

  async createSignerKey(algorithm: KeyAlgorithm, scheme: SignatureScheme): Promise<SignerKey> {
    requireKeyAlgorithm(algorithm);
    const keys = await this.signerKeys.take(algorithm); // handed out once, never again
    return new SoftwareSignerKey(algorithm, keys.privateKey, keys.publicKey, scheme);
  }

  longLivedKey(name: LongLivedKeyName): SigningKey & { readonly publicKey: KeyObject } {
    const pem = readFileSync(this.#keyFiles[name], 'utf8');
    const known = this.#longLived.get(name);
    if (known?.pem === pem) return known.key;
    const privateKey = createPrivateKey(pem);
    const key = Object.assign(new SoftwareSigningKey(privateKey), { publicKey: createPublicKey(privateKey) });
    this.#longLived.set(name, { pem, key });
    return key;
  }

  supports(): boolean {
    return true; // node:crypto signs every scheme with every hash we offer
  }

  readiness(): CustodyReadiness {
    return { ready: true, reasons: [] };
  }

  close(): Promise<void> {
    return this.signerKeys.close(); // stops the key generation workers; keys nobody took are dropped
  }
}
