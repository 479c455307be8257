/**
 * The operating party's OpenPGP key that signs every commit of the long-term public key archive (spec 4.7),
 * persisted under <dataDir>/sandbox/ (private key 0600, public key for the QTSP's configuration), and a
 * "foreign" key that signs commits which must be refused. Ed25519 (legacy EdDSA encoding, which GnuPG 2.2
 * reads too) keeps generation and signing in the millisecond range.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import * as openpgp from 'openpgp';

export interface PgpSigner {
  readonly armoredPrivateKey: string;
  readonly armoredPublicKey: string;
  /** uppercase hex fingerprint of the primary key */
  readonly fingerprint: string;
  /** ASCII-armored detached signature over exactly these bytes (what `git commit -S` stores in gpgsig) */
  sign(payload: string): Promise<string>;
}

const OPERATOR = { name: 'Sandbox Platform key archive', email: 'key-archive@platform.sandbox.localhost' };

async function signer(armoredPrivateKey: string, armoredPublicKey: string): Promise<PgpSigner> {
  const privateKey = await openpgp.readPrivateKey({ armoredKey: armoredPrivateKey });
  return {
    armoredPrivateKey,
    armoredPublicKey,
    fingerprint: privateKey.getFingerprint().toUpperCase(),
    async sign(payload) {
      // git signs the commit bytes as they are (a binary signature, type 0x00), not as canonical text
      const message = await openpgp.createMessage({ binary: new TextEncoder().encode(payload) });
      return openpgp.sign({ message, signingKeys: privateKey, detached: true, format: 'armored' });
    },
  };
}

async function generate(user: { name: string; email: string }): Promise<{ privateKey: string; publicKey: string }> {
  const { privateKey, publicKey } = await openpgp.generateKey({
    type: 'ecc',
    curve: 'ed25519Legacy',
    userIDs: [user],
    format: 'armored',
  });
  return { privateKey, publicKey };
}

/** The operating party's key: loaded from its files, or created (and saved) on the first start. */
export async function loadOrCreateOperatorSigner(privateFile: string, publicFile: string): Promise<PgpSigner> {
  if (existsSync(privateFile) && existsSync(publicFile)) {
    return signer(readFileSync(privateFile, 'utf8'), readFileSync(publicFile, 'utf8'));
  }
  const { privateKey, publicKey } = await generate(OPERATOR);
  mkdirSync(dirname(privateFile), { recursive: true });
  writeFileSync(privateFile, privateKey, { mode: 0o600 });
  writeFileSync(publicFile, publicKey);
  return signer(privateKey, publicKey);
}

/** A key the QTSP does not trust (same user id, so only the key itself tells them apart). */
export async function createForeignSigner(): Promise<PgpSigner> {
  const { privateKey, publicKey } = await generate(OPERATOR);
  return signer(privateKey, publicKey);
}
