/**
 * RSA key pairs for tests that hand keys to jose. jose exports a KeyObject as JWK to sign or verify; on Node 20
 * that export holds the key's lock while it allocates, and a garbage collection at that moment that finalizes
 * the generation job of the same key takes the lock again: the process hangs for good (seen on a busy machine,
 * main thread in ~KeyGenJob under ExportJWKRsaKey). Keys read back from PEM share nothing with that job.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';

export function rsaKeyPair(modulusLength = 2048): { privateKey: KeyObject; publicKey: KeyObject } {
  const { privateKey: pem } = generateKeyPairSync('rsa', {
    modulusLength,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const privateKey = createPrivateKey(pem);
  return { privateKey, publicKey: createPublicKey(privateKey) };
}
