/**
 * The AS's RS256 signing keys (spec 2.10, 5.13): a persisted RSA-2048 key whose kid is its RFC 7638
 * thumbprint, keys added by rotation (tests), and a "foreign" key that is never published, for signatures
 * that must not verify.
 */
import { createPrivateKey, createPublicKey, generateKeyPair as generateKeyPairCb, type KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { promisify } from 'node:util';
import { calculateJwkThumbprint, exportJWK, type JWK } from 'jose';

const generateKeyPair = promisify(generateKeyPairCb);

export interface AsKey {
  readonly kid: string;
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
  readonly publicJwk: JWK;
}

async function asKey(privateKey: KeyObject): Promise<AsKey> {
  const publicKey = createPublicKey(privateKey);
  const jwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(jwk, 'sha256');
  return { kid, privateKey, publicKey, publicJwk: { kty: jwk.kty, n: jwk.n, e: jwk.e, kid, use: 'sig', alg: 'RS256' } };
}

/**
 * A fresh RSA-2048 private key as PKCS#8 PEM. Callers read it back (createPrivateKey): on Node 20 a KeyObject
 * that still shares its lock with its generation job can hang the process when exported as JWK during a garbage
 * collection (the same fault crypto/keys.ts avoids for EC keys).
 */
async function freshRsaPem(): Promise<string> {
  const { privateKey } = await generateKeyPair('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  return privateKey;
}

async function freshRsaKey(): Promise<KeyObject> {
  return createPrivateKey(await freshRsaPem());
}

async function loadOrCreate(file: string): Promise<KeyObject> {
  if (existsSync(file)) return createPrivateKey(readFileSync(file, 'utf8'));
  const pem = await freshRsaPem();
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, pem, { mode: 0o600 });
  return createPrivateKey(pem);
}

export class AsKeyStore {
  private current: AsKey;
  private published: AsKey[];
  private foreign?: Promise<AsKey>;

  private constructor(private readonly primary: AsKey) {
    this.current = primary;
    this.published = [primary];
  }

  static async open(file: string): Promise<AsKeyStore> {
    return new AsKeyStore(await asKey(await loadOrCreate(file)));
  }

  /** The key that signs tokens and introspection responses now. */
  signingKey(): AsKey {
    return this.current;
  }

  /** A key that is never in the JWKS (created on first use). */
  foreignKey(): Promise<AsKey> {
    this.foreign ??= freshRsaKey().then(asKey);
    return this.foreign;
  }

  /** A published key by kid: what a verifier of our JWTs can resolve. */
  publishedKey(kid: string | undefined): AsKey | undefined {
    return this.published.find((k) => k.kid === kid);
  }

  jwks(): { keys: JWK[] } {
    return { keys: this.published.map((k) => ({ ...k.publicJwk })) };
  }

  async rotate(keepOld: boolean): Promise<string> {
    const next = await asKey(await freshRsaKey());
    this.published = keepOld ? [...this.published, next] : [next];
    this.current = next;
    return next.kid;
  }

  /** Back to the persisted key alone. */
  reset(): void {
    this.current = this.primary;
    this.published = [this.primary];
  }
}
