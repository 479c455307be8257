/**
 * PKCS#11 key custody (issue 9 item 2): every private key lives in a token and never leaves it.
 *
 * - Long-lived keys (issuing CA, TSA, OCSP responder; the root CA key stays a file, as it also signs the root
 *   CRL and the S/MIME mail certificate at run time) are token objects made by `qtsp pki init
 *   --pkcs11`: CKA_TOKEN, CKA_PRIVATE, CKA_SENSITIVE true, CKA_EXTRACTABLE false, sign only, labelled
 *   qtsp-<role>. They are found by label once and their handles cached (real HSMs are slow at C_FindObjects).
 * - A signer key is a pair of session objects (CKA_TOKEN false; private half sensitive, not extractable, sign
 *   only), destroyed with C_DestroyObject after its request. RSA-3072 pairs come from a pool of pre-generated,
 *   never-used session pairs (generation takes ~0.4 s in SoftHSM2, longer in hardware).
 * - Signing: we hash (node:crypto, all six hashes) and the token signs the digest: CKM_ECDSA (r||s, turned
 *   into DER for X.509 and CMS), CKM_RSA_PKCS over the DigestInfo (RFC 8017 9.2), CKM_RSA_PKCS_PSS with its
 *   parameters (hash, MGF1 with the same hash, salt as long as the hash: as rsaPssParams in keys.ts).
 *
 * A token failure while running marks the custodian unready (readiness says why) and fails the request with
 * KeyCustodyUnavailable (503, nothing signed); a watchdog probes the token and reconnects when it is back.
 */
import { createHash, createPublicKey, randomBytes, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { HASH_ALGORITHMS } from '../../crypto/algorithms.ts';
import { ConfigError } from '../../config/load.ts';
import { algorithmIdentifier, integerFromBytes, octetString, sequence } from '../../util/der.ts';
import type { Logger } from '../../util/logger.ts';
import type { KeyAlgorithm, SignatureScheme, SignHash } from '../../crypto/signature.ts';
import {
  pkcs11js,
  pkcs11Code,
  Pkcs11Token,
  pkcs11Reason,
  SETTING,
  type Handle,
  type TokenOptions,
} from './token.ts';
import {
  KeyCustodyUnavailable,
  type LongLivedKeyMaker,
  type CustodyReadiness,
  type EcdsaEncoding,
  type KeyCustody,
  type KeyLocation,
  type LongLivedKeyName,
  type SignerKey,
  type SigningKey,
} from '../types.ts';

/** how long close() waits for operations still running on the token before it closes the sessions */
const CLOSE_WAIT_MS = 5000;

/** CKA_LABEL of each long-lived key pair (private and public half alike). */
export const LONG_LIVED_LABELS: Readonly<Record<LongLivedKeyName, string>> = {
  'issuing-ca': 'qtsp-issuing-ca',
  tsa: 'qtsp-tsa',
  'ocsp-responder': 'qtsp-ocsp-responder',
};

/** DER ECParameters namedCurve (RFC 5480 2.1.1) for CKA_EC_PARAMS, and the SPKI prefix up to the point. */
const CURVES = {
  'P-256': {
    params: Buffer.from('06082a8648ce3d030107', 'hex'),
    spkiPrefix: Buffer.from('3059301306072a8648ce3d020106082a8648ce3d030107034200', 'hex'),
    size: 32,
  },
  'P-384': {
    params: Buffer.from('06052b81040022', 'hex'),
    spkiPrefix: Buffer.from('3076301006072a8648ce3d020106052b81040022036200', 'hex'),
    size: 48,
  },
} as const;

const RSA_BITS = 3072;
const RSA_EXPONENT = Buffer.from([1, 0, 1]);

/**
 * Hash and MGF1 identifiers for CK_RSA_PKCS_PSS_PARAMS. SHA-3: PKCS#11 3.0 values (pkcs11t.h), which
 * pkcs11js (written against 2.40) does not name. A token that lacks them refuses PSS with SHA-3 (SoftHSM 2.6
 * does): probed at start, and then not offered (supports()).
 */
const PSS_HASH: Readonly<Record<SignHash, { hashAlg: number; mgf: number }>> = {
  sha256: { hashAlg: pkcs11js.CKM_SHA256, mgf: pkcs11js.CKG_MGF1_SHA256 },
  sha384: { hashAlg: pkcs11js.CKM_SHA384, mgf: pkcs11js.CKG_MGF1_SHA384 },
  sha512: { hashAlg: pkcs11js.CKM_SHA512, mgf: pkcs11js.CKG_MGF1_SHA512 },
  'sha3-256': { hashAlg: 0x2b0, mgf: 0x7 },
  'sha3-384': { hashAlg: 0x2c0, mgf: 0x8 },
  'sha3-512': { hashAlg: 0x2d0, mgf: 0x9 },
};

const HASH_BY_NODE_NAME = new Map([...HASH_ALGORITHMS.values()].map((h) => [h.node, h]));

function hashInfo(hash: SignHash) {
  const h = HASH_BY_NODE_NAME.get(hash);
  if (!h) throw new TypeError(`unknown hash ${hash}`);
  return h;
}

/** DigestInfo (RFC 8017 9.2 step 2) with NULL parameters, as OpenSSL writes it for SHA-2 and SHA-3 alike. */
function digestInfo(hash: SignHash, digest: Buffer): Buffer {
  return sequence(algorithmIdentifier(hashInfo(hash).oid, true), octetString(digest));
}

/** What the token signs, and how, for a scheme and a hash. */
function signOperation(
  scheme: SignatureScheme,
  hash: SignHash,
  digest: Buffer,
): { mechanism: pkcs11js.Mechanism; input: Buffer } {
  switch (scheme) {
    case 'ecdsa':
      return { mechanism: { mechanism: pkcs11js.CKM_ECDSA }, input: digest };
    case 'rsa-pkcs1-v1_5':
      return { mechanism: { mechanism: pkcs11js.CKM_RSA_PKCS }, input: digestInfo(hash, digest) };
    case 'rsa-pss': {
      const { hashAlg, mgf } = PSS_HASH[hash];
      return {
        mechanism: {
          mechanism: pkcs11js.CKM_RSA_PKCS_PSS,
          parameter: { type: pkcs11js.CK_PARAMS_RSA_PSS, hashAlg, mgf, saltLen: digest.length } as pkcs11js.RsaPSS,
        },
        input: digest,
      };
    }
  }
}

/** ECDSA-Sig-Value (RFC 5480 2.2 / X9.62) from r||s as CKM_ECDSA returns it. */
export function ecdsaRawToDer(raw: Buffer): Buffer {
  const half = raw.length / 2;
  return sequence(integerFromBytes(raw.subarray(0, half)), integerFromBytes(raw.subarray(half)));
}

/** Templates of a sign-only key pair; `persistent` = token objects (long-lived), else session objects. */
function keyPairTemplates(
  algorithm: KeyAlgorithm,
  persistent: boolean,
  label: string,
  id: Buffer,
): { mechanism: pkcs11js.Mechanism; publicTemplate: pkcs11js.Template; privateTemplate: pkcs11js.Template } {
  const common = [
    { type: pkcs11js.CKA_TOKEN, value: persistent },
    { type: pkcs11js.CKA_LABEL, value: label },
    { type: pkcs11js.CKA_ID, value: id },
  ];
  const privateTemplate = [
    ...common,
    { type: pkcs11js.CKA_PRIVATE, value: true },
    { type: pkcs11js.CKA_SENSITIVE, value: true },
    { type: pkcs11js.CKA_EXTRACTABLE, value: false },
    { type: pkcs11js.CKA_SIGN, value: true },
    { type: pkcs11js.CKA_SIGN_RECOVER, value: false },
    { type: pkcs11js.CKA_DECRYPT, value: false },
    { type: pkcs11js.CKA_UNWRAP, value: false },
    { type: pkcs11js.CKA_DERIVE, value: false },
  ];
  const publicCommon = [
    ...common,
    { type: pkcs11js.CKA_PRIVATE, value: false },
    { type: pkcs11js.CKA_VERIFY, value: true },
    { type: pkcs11js.CKA_ENCRYPT, value: false },
    { type: pkcs11js.CKA_WRAP, value: false },
  ];
  if (algorithm === 'RSA-3072') {
    return {
      mechanism: { mechanism: pkcs11js.CKM_RSA_PKCS_KEY_PAIR_GEN },
      publicTemplate: [
        ...publicCommon,
        { type: pkcs11js.CKA_MODULUS_BITS, value: RSA_BITS },
        { type: pkcs11js.CKA_PUBLIC_EXPONENT, value: RSA_EXPONENT },
      ],
      privateTemplate,
    };
  }
  return {
    mechanism: { mechanism: pkcs11js.CKM_EC_KEY_PAIR_GEN },
    publicTemplate: [...publicCommon, { type: pkcs11js.CKA_EC_PARAMS, value: CURVES[algorithm].params }],
    privateTemplate,
  };
}

interface TokenKeyPair {
  readonly algorithm: KeyAlgorithm;
  readonly privateHandle: Handle;
  readonly publicHandle: Handle;
  readonly publicKey: KeyObject;
  /** connection epoch it was made in: session objects of an earlier one died with their sessions */
  readonly epoch: number;
}

/** The public key of a token key pair as a KeyObject: EC from CKA_EC_POINT, RSA from modulus and exponent. */
function readPublicKey(token: Pkcs11Token, session: Handle, publicHandle: Handle, algorithm: KeyAlgorithm): KeyObject {
  const p = token.pkcs11;
  if (algorithm === 'RSA-3072') {
    const [n, e] = p.C_GetAttributeValue(session, publicHandle, [
      { type: pkcs11js.CKA_MODULUS },
      { type: pkcs11js.CKA_PUBLIC_EXPONENT },
    ]);
    return createPublicKey({
      key: { kty: 'RSA', n: n!.value.toString('base64url'), e: e!.value.toString('base64url') },
      format: 'jwk',
    });
  }
  const [point] = p.C_GetAttributeValue(session, publicHandle, [{ type: pkcs11js.CKA_EC_POINT }]);
  // CKA_EC_POINT is the DER OCTET STRING of the uncompressed point (PKCS#11 2.40 curr 2.3.3); 0x04 0x41/0x61
  const der = point!.value;
  const uncompressed = der[0] === 0x04 && der[1] === der.length - 2 ? der.subarray(2) : der;
  return createPublicKey({
    key: Buffer.concat([CURVES[algorithm].spkiPrefix, uncompressed]),
    format: 'der',
    type: 'spki',
  });
}

/** The key algorithm of a token public key: CKA_KEY_TYPE, and the curve from CKA_EC_PARAMS. */
function readKeyAlgorithm(token: Pkcs11Token, session: Handle, publicHandle: Handle): KeyAlgorithm {
  const p = token.pkcs11;
  const [type] = p.C_GetAttributeValue(session, publicHandle, [{ type: pkcs11js.CKA_KEY_TYPE }]);
  const keyType = type!.value.readUIntLE(0, Math.min(6, type!.value.length));
  if (keyType === pkcs11js.CKK_RSA) return 'RSA-3072';
  if (keyType === pkcs11js.CKK_EC) {
    const [params] = p.C_GetAttributeValue(session, publicHandle, [{ type: pkcs11js.CKA_EC_PARAMS }]);
    for (const [name, curve] of Object.entries(CURVES))
      if (curve.params.equals(params!.value)) return name as KeyAlgorithm;
  }
  throw new ConfigError(
    `setting ${SETTING.tokenLabel}: a long-lived key in token ${JSON.stringify(token.label)} is neither P-256, P-384 nor RSA`,
  );
}

function findObject(token: Pkcs11Token, session: Handle, objectClass: number, label: string): Handle | undefined {
  const p = token.pkcs11;
  p.C_FindObjectsInit(session, [
    { type: pkcs11js.CKA_CLASS, value: objectClass },
    { type: pkcs11js.CKA_TOKEN, value: true },
    { type: pkcs11js.CKA_LABEL, value: label },
  ]);
  try {
    const found = p.C_FindObjects(session, 2);
    if (found.length > 1)
      throw new ConfigError(
        `setting ${SETTING.tokenLabel}: token ${JSON.stringify(token.label)} holds more than one key labelled ${label}`,
      );
    return found[0];
  } finally {
    p.C_FindObjectsFinal(session);
  }
}

export interface Pkcs11CustodyOptions extends Omit<TokenOptions, 'pin'> {
  /** file holding the user PIN (keys.pinFile); read at start, never logged */
  readonly pinFile: string;
  /** the configuration declares the token a QSCD (keys.tokenIsQscd) */
  readonly qscd: boolean;
  /** RSA-3072 session key pairs kept ready */
  readonly rsaPoolSize: number;
  /** how often the token is probed (ms) */
  readonly probeIntervalMs?: number;
  /** false for `qtsp pki init`: the long-lived keys do not exist yet */
  readonly requireLongLivedKeys?: boolean;
  readonly logger?: Logger;
}

/** A key in the token, signing through the custodian's session pool. */
class TokenSigningKey implements SigningKey {
  readonly algorithm: KeyAlgorithm;
  readonly scheme: SignatureScheme;
  readonly #custody: Pkcs11Custody;
  readonly #handle: () => Handle;

  constructor(custody: Pkcs11Custody, algorithm: KeyAlgorithm, scheme: SignatureScheme, handle: () => Handle) {
    this.#custody = custody;
    this.algorithm = algorithm;
    this.scheme = scheme;
    this.#handle = handle;
  }

  async sign(hash: SignHash, data: Uint8Array, encoding: EcdsaEncoding = 'der'): Promise<Buffer> {
    return this.#custody.signWithHandle(this.#handle(), this.scheme, hash, data, encoding);
  }
}

class TokenSignerKey extends TokenSigningKey implements SignerKey {
  readonly publicKey: KeyObject;
  readonly location: KeyLocation;
  #pair: TokenKeyPair | undefined;
  readonly #destroy: (pair: TokenKeyPair) => Promise<void>;

  constructor(
    custody: Pkcs11Custody,
    pair: TokenKeyPair,
    scheme: SignatureScheme,
    destroy: (pair: TokenKeyPair) => Promise<void>,
  ) {
    super(custody, pair.algorithm, scheme, () => {
      if (!this.#pair) throw new TypeError('the signer key was destroyed');
      return this.#pair.privateHandle;
    });
    this.publicKey = pair.publicKey;
    this.location = custody.location;
    this.#pair = pair;
    this.#destroy = destroy;
  }

  async destroy(): Promise<void> {
    const pair = this.#pair;
    this.#pair = undefined;
    if (pair) await this.#destroy(pair);
  }
}

export class Pkcs11Custody implements KeyCustody, LongLivedKeyMaker {
  readonly kind = 'pkcs11';
  readonly qscd: boolean;
  readonly #token: Pkcs11Token;
  readonly #options: Pkcs11CustodyOptions;
  readonly #logger: Logger | undefined;
  /** cached handles and public keys of the long-lived keys, by role */
  #longLived = new Map<LongLivedKeyName, { handle: Handle; publicKey: KeyObject; algorithm: KeyAlgorithm }>();
  readonly #unsupported = new Set<string>();
  #epoch = 0;
  #healthy = true;
  #reason = '';
  #probing: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  // RSA pool
  readonly #rsaReady: TokenKeyPair[] = [];
  readonly #rsaWaiters: { resolve(pair: TokenKeyPair): void; reject(err: Error): void }[] = [];
  #rsaGenerating: Promise<void> | undefined;
  #rsaFailures = 0;
  #closed = false;

  /** Opens the token and finds the long-lived keys: every failure is a ConfigError naming the setting. */
  static async open(options: Pkcs11CustodyOptions): Promise<Pkcs11Custody> {
    const pin = readPin(options.pinFile);
    const token = Pkcs11Token.open({
      module: options.module,
      tokenLabel: options.tokenLabel,
      pin,
      sessions: options.sessions,
    });
    const custody = new Pkcs11Custody(token, options);
    try {
      if (options.requireLongLivedKeys ?? true) await custody.#findLongLivedKeys(true);
      await custody.#probeMechanisms();
    } catch (err) {
      await custody.close();
      throw err;
    }
    custody.#startWatchdog();
    custody.#refillRsa();
    return custody;
  }

  private constructor(token: Pkcs11Token, options: Pkcs11CustodyOptions) {
    this.#token = token;
    this.#options = options;
    this.#logger = options.logger;
    this.qscd = options.qscd;
  }

  get location(): KeyLocation {
    return { kind: 'pkcs11', tokenLabel: this.#token.label, tokenSerial: this.#token.serial };
  }

  /** the token, for `qtsp pki init --pkcs11` and tests */
  get token(): Pkcs11Token {
    return this.#token;
  }

  readiness(): CustodyReadiness {
    return this.#healthy
      ? { ready: true, reasons: [] }
      : { ready: false, reasons: [`key custody: PKCS#11 token ${JSON.stringify(this.#token.label)} ${this.#reason}`] };
  }

  /** Whether the token signs with this scheme and hash (PSS with SHA-3 needs a PKCS#11 3.0 token). */
  supports(scheme: SignatureScheme, hash: SignHash): boolean {
    return !this.#unsupported.has(`${scheme}/${hash}`);
  }

  // -------------------------------------------------------------------------------------------------------
  // long-lived keys

  longLivedKey(name: LongLivedKeyName): SigningKey & { readonly publicKey: KeyObject } {
    const found = this.#longLived.get(name);
    if (!found)
      throw new ConfigError(
        `setting ${SETTING.tokenLabel}: token ${JSON.stringify(this.#token.label)} has no key labelled ${LONG_LIVED_LABELS[name]}; run \`qtsp pki init --pkcs11\``,
      );
    const key = new TokenSigningKey(
      this,
      found.algorithm,
      found.algorithm === 'RSA-3072' ? 'rsa-pkcs1-v1_5' : 'ecdsa',
      () => this.#longLived.get(name)!.handle,
    );
    return Object.assign(key, { publicKey: found.publicKey });
  }

  /** `qtsp pki init --pkcs11`: a new long-lived key pair as token objects; an existing pair of that label is replaced. */
  async generateLongLivedKey(
    name: LongLivedKeyName,
    algorithm: KeyAlgorithm,
  ): Promise<SigningKey & { readonly publicKey: KeyObject }> {
    const label = LONG_LIVED_LABELS[name];
    await this.#token.withSession(async (session) => {
      for (const objectClass of [pkcs11js.CKO_PRIVATE_KEY, pkcs11js.CKO_PUBLIC_KEY]) {
        for (
          let old = findObject(this.#token, session, objectClass, label);
          old;
          old = findObject(this.#token, session, objectClass, label)
        )
          this.#token.pkcs11.C_DestroyObject(session, old);
      }
      const pair = await this.#generate(session, algorithm, true, label);
      this.#longLived.set(name, { handle: pair.privateHandle, publicKey: pair.publicKey, algorithm });
    });
    return this.longLivedKey(name);
  }

  /** Finds the long-lived keys by label (once; again after a reconnect). */
  async #findLongLivedKeys(atStart: boolean): Promise<void> {
    await this.#token.withSession((session) => {
      const found = new Map<LongLivedKeyName, { handle: Handle; publicKey: KeyObject; algorithm: KeyAlgorithm }>();
      for (const name of Object.keys(LONG_LIVED_LABELS) as LongLivedKeyName[]) {
        const label = LONG_LIVED_LABELS[name];
        const privateHandle = findObject(this.#token, session, pkcs11js.CKO_PRIVATE_KEY, label);
        const publicHandle = findObject(this.#token, session, pkcs11js.CKO_PUBLIC_KEY, label);
        if (!privateHandle || !publicHandle) {
          if (atStart)
            throw new ConfigError(
              `setting ${SETTING.tokenLabel}: token ${JSON.stringify(this.#token.label)} has no key pair labelled ${label}; run \`qtsp pki init --pkcs11\``,
            );
          throw new Error(`the key pair ${label} is missing`);
        }
        const algorithm = readKeyAlgorithm(this.#token, session, publicHandle);
        found.set(name, {
          handle: privateHandle,
          publicKey: readPublicKey(this.#token, session, publicHandle, algorithm),
          algorithm,
        });
      }
      this.#longLived = found;
    });
  }

  // -------------------------------------------------------------------------------------------------------
  // signer keys

  async createSignerKey(algorithm: KeyAlgorithm, scheme: SignatureScheme): Promise<SignerKey> {
    this.#requireHealthy();
    let pair: TokenKeyPair;
    try {
      pair =
        algorithm === 'RSA-3072'
          ? await this.#takeRsa()
          : await this.#token.withSession((session) => this.#generate(session, algorithm, false, 'qtsp-signer'));
    } catch (err) {
      throw this.#failure(err, 'key generation');
    }
    return new TokenSignerKey(this, pair, scheme, (p) => this.#destroyPair(p));
  }

  /** C_GenerateKeyPair (asynchronous: off the event loop) and the public key read back. */
  async #generate(session: Handle, algorithm: KeyAlgorithm, persistent: boolean, label: string): Promise<TokenKeyPair> {
    const epoch = this.#epoch;
    const { mechanism, publicTemplate, privateTemplate } = keyPairTemplates(
      algorithm,
      persistent,
      label,
      randomBytes(16),
    );
    const handles = await this.#token.pkcs11.C_GenerateKeyPairAsync(
      session,
      mechanism,
      publicTemplate,
      privateTemplate,
    );
    try {
      return {
        algorithm,
        privateHandle: handles.privateKey,
        publicHandle: handles.publicKey,
        publicKey: readPublicKey(this.#token, session, handles.publicKey, algorithm),
        epoch,
      };
    } catch (err) {
      this.#destroyHandles(session, [handles.privateKey, handles.publicKey]);
      throw err;
    }
  }

  /** step 9: both halves destroyed; a pair of an earlier connection died with its session already. */
  async #destroyPair(pair: TokenKeyPair): Promise<void> {
    if (pair.epoch !== this.#epoch || this.#closed) return;
    try {
      await this.#token.withSession((session) =>
        this.#destroyHandles(session, [pair.privateHandle, pair.publicHandle]),
      );
    } catch (err) {
      // a token gone meanwhile took its session objects with it
      this.#logger?.warn(
        { event: 'keys.destroy_failed', reason: pkcs11Reason(err) },
        'PKCS#11: destroying a signer key failed',
      );
    }
  }

  #destroyHandles(session: Handle, handles: readonly Handle[]): void {
    for (const handle of handles) {
      try {
        this.#token.pkcs11.C_DestroyObject(session, handle);
      } catch (err) {
        if (pkcs11Code(err) !== pkcs11js.CKR_OBJECT_HANDLE_INVALID) throw err;
      }
    }
  }

  /** A never-used RSA pair: from the pool, or generated now when the pool is empty. */
  #takeRsa(): Promise<TokenKeyPair> {
    while (this.#rsaReady.length) {
      const pair = this.#rsaReady.shift()!;
      if (pair.epoch === this.#epoch) {
        this.#refillRsa();
        return Promise.resolve(pair);
      }
    }
    return new Promise((resolve, reject) => {
      this.#rsaWaiters.push({ resolve, reject });
      this.#refillRsa();
    });
  }

  /** One generation at a time (each holds a libuv thread for ~0.4 s) until waiters are served and the pool is full. */
  #refillRsa(): void {
    if (this.#rsaGenerating || this.#closed || !this.#healthy) return;
    const missing = this.#rsaWaiters.length + this.#options.rsaPoolSize - this.#rsaReady.length;
    if (missing <= 0) return;
    this.#rsaGenerating = this.#token
      .withSession((session) => this.#generate(session, 'RSA-3072', false, 'qtsp-signer'))
      .then(
        (pair) => {
          this.#rsaGenerating = undefined;
          if (this.#closed) {
            this.#rsaReady.push(pair); // close() destroys it with the rest of the pool
            return;
          }
          this.#rsaFailures = 0;
          const waiter = this.#rsaWaiters.shift();
          if (waiter) waiter.resolve(pair);
          else this.#rsaReady.push(pair);
          this.#refillRsa();
        },
        (err: unknown) => {
          this.#rsaGenerating = undefined;
          if (this.#closed) return;
          this.#rsaFailures++;
          this.#logger?.error(
            { event: 'keys.generation_failed', provider: 'pkcs11', reason: pkcs11Reason(err) },
            'PKCS#11: RSA key generation failed',
          );
          if (this.#rsaFailures >= 3 || !this.#healthy)
            for (const w of this.#rsaWaiters.splice(0)) w.reject(err instanceof Error ? err : new Error(String(err)));
          this.#checkSoon();
          if (this.#rsaFailures < 3) this.#refillRsa();
        },
      );
  }

  /** Resolves when the RSA pool holds `count` pairs (tests, benchmarks). */
  async rsaFilled(count = this.#options.rsaPoolSize): Promise<void> {
    while (this.#rsaReady.length < Math.min(count, this.#options.rsaPoolSize) && !this.#closed)
      await new Promise((r) => setTimeout(r, 50));
  }

  /**
   * Every key object this application sees in the token, token and session objects alike (a session object is
   * invisible to other processes, pkcs11-tool included): what tests check is left after signing.
   */
  async visibleObjects(): Promise<{ label: string; token: boolean; objectClass: number }[]> {
    return this.#token.withSession((session) => {
      const p = this.#token.pkcs11;
      p.C_FindObjectsInit(session, []);
      const handles: Handle[] = [];
      try {
        for (let batch = p.C_FindObjects(session, 100); batch.length; batch = p.C_FindObjects(session, 100))
          handles.push(...batch);
      } finally {
        p.C_FindObjectsFinal(session);
      }
      return handles.map((handle) => {
        const [label, token, objectClass] = p.C_GetAttributeValue(session, handle, [
          { type: pkcs11js.CKA_LABEL },
          { type: pkcs11js.CKA_TOKEN },
          { type: pkcs11js.CKA_CLASS },
        ]);
        return {
          label: label!.value.toString('utf8'),
          token: token!.value[0] === 1,
          objectClass: objectClass!.value.readUInt32LE(0),
        };
      });
    });
  }

  // -------------------------------------------------------------------------------------------------------
  // signing

  /** Hash here, sign the digest in the token (one session, one operation). */
  async signWithHandle(
    handle: Handle,
    scheme: SignatureScheme,
    hash: SignHash,
    data: Uint8Array,
    encoding: EcdsaEncoding,
  ): Promise<Buffer> {
    this.#requireHealthy();
    const digest = createHash(hash).update(data).digest();
    const { mechanism, input } = signOperation(scheme, hash, digest);
    let signature: Buffer;
    try {
      signature = await this.#token.withSession(async (session) => {
        this.#token.pkcs11.C_SignInit(session, mechanism, handle);
        return this.#token.pkcs11.C_SignAsync(session, input, Buffer.alloc(512));
      });
    } catch (err) {
      throw this.#failure(err, 'signing');
    }
    return scheme === 'ecdsa' && encoding === 'der' ? ecdsaRawToDer(signature) : signature;
  }

  /** Which PSS hashes the token takes: SHA-2 always (PKCS#11 2.40), SHA-3 only if a PKCS#11 3.0 token says so. */
  async #probeMechanisms(): Promise<void> {
    await this.#token.withSession(async (session) => {
      // a throw-away 1024-bit session pair: enough to see whether the token accepts the parameters
      const template = keyPairTemplates('RSA-3072', false, 'qtsp-probe', randomBytes(16));
      const bits = template.publicTemplate.find((a) => a.type === pkcs11js.CKA_MODULUS_BITS)!;
      bits.value = 1024;
      const pair = await this.#token.pkcs11.C_GenerateKeyPairAsync(
        session,
        template.mechanism,
        template.publicTemplate,
        template.privateTemplate,
      );
      try {
        for (const hash of ['sha3-256', 'sha3-384', 'sha3-512'] as const) {
          const { mechanism, input } = signOperation('rsa-pss', hash, Buffer.alloc(hashInfo(hash).length));
          try {
            this.#token.pkcs11.C_SignInit(session, mechanism, pair.privateKey);
            this.#token.pkcs11.C_Sign(session, input, Buffer.alloc(128));
          } catch {
            this.#unsupported.add(`rsa-pss/${hash}`);
          }
        }
      } finally {
        this.#destroyHandles(session, [pair.privateKey, pair.publicKey]);
      }
    });
  }

  // -------------------------------------------------------------------------------------------------------
  // health

  #requireHealthy(): void {
    if (this.#closed) throw new KeyCustodyUnavailable('the key custody is closed');
    if (!this.#healthy) throw new KeyCustodyUnavailable(`the PKCS#11 token ${this.#reason}`);
  }

  /** A failed operation: checks the token at once, and reports the failure as custody unavailable (503). */
  #failure(err: unknown, what: string): Error {
    if (err instanceof KeyCustodyUnavailable) return err;
    this.#logger?.error(
      { event: 'keys.pkcs11_failed', operation: what, reason: pkcs11Reason(err) },
      'PKCS#11 operation failed',
    );
    this.#checkSoon();
    return new KeyCustodyUnavailable(`PKCS#11 ${what} failed (${pkcs11Reason(err)})`);
  }

  #startWatchdog(): void {
    this.#timer = setInterval(() => this.#checkSoon(), this.#options.probeIntervalMs ?? 2000);
    this.#timer.unref();
  }

  #checkSoon(): void {
    if (this.#closed || this.#probing) return;
    this.#probing = this.#check().finally(() => (this.#probing = undefined));
  }

  /** Healthy: the token answers and every cached long-lived handle still names its key. Unhealthy: try to reconnect. */
  async #check(): Promise<void> {
    try {
      this.#token.probe();
      if (this.#healthy) {
        await this.#token.withSession((session) => {
          for (const { handle } of this.#longLived.values())
            this.#token.pkcs11.C_GetAttributeValue(session, handle, [{ type: pkcs11js.CKA_CLASS }]);
        });
        return;
      }
    } catch (err) {
      if (this.#healthy) this.#markUnhealthy(`does not answer (${pkcs11Reason(err)})`);
    }
    if (!this.#healthy || this.#closed) await this.#reconnect();
  }

  #markUnhealthy(reason: string): void {
    this.#healthy = false;
    this.#reason = reason;
    this.#logger?.error(
      { event: 'keys.unavailable', token: this.#token.label, reason },
      'PKCS#11 token unavailable; signDoc answers 503',
    );
    for (const w of this.#rsaWaiters.splice(0)) w.reject(new KeyCustodyUnavailable(`the PKCS#11 token ${reason}`));
  }

  async #reconnect(): Promise<void> {
    if (this.#closed) return;
    try {
      this.#token.reconnect(readPin(this.#options.pinFile));
      this.#epoch++;
      this.#rsaReady.length = 0; // died with the old sessions
      if (this.#options.requireLongLivedKeys ?? true) await this.#findLongLivedKeys(false);
      this.#healthy = true;
      this.#reason = '';
      this.#logger?.info({ event: 'keys.available', token: this.#token.label }, 'PKCS#11 token answers again');
      this.#refillRsa();
    } catch (err) {
      if (this.#healthy) this.#markUnhealthy(`does not answer (${pkcs11Reason(err)})`);
      else this.#reason = `does not answer (${err instanceof ConfigError ? err.message : pkcs11Reason(err)})`;
    }
  }

  /** Stops the watchdog and closes the sessions: the session objects (pooled RSA pairs) go with them. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    for (const w of this.#rsaWaiters.splice(0)) w.reject(new KeyCustodyUnavailable('the key custody is closed'));
    await this.#probing;
    await this.#rsaGenerating; // never close a session under a running generation
    // pooled pairs: destroyed explicitly too, not only by closing their sessions
    const pooled = this.#rsaReady.splice(0);
    await this.#token
      .withSession((session) =>
        this.#destroyHandles(
          session,
          pooled.flatMap((p) => [p.privateHandle, p.publicHandle]),
        ),
      )
      .catch(() => undefined);
    await this.#token.idle(CLOSE_WAIT_MS); // signer keys of requests still under way are destroyed on their sessions first
    this.#token.close();
  }
}

/** The PIN file's first line; a failure names the setting, never the content. */
function readPin(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new ConfigError(`setting ${SETTING.pinFile}: cannot read the PIN file ${file}`);
  }
  const pin = text.split(/\r?\n/)[0]!.trim();
  if (!pin) throw new ConfigError(`setting ${SETTING.pinFile}: the PIN file ${file} is empty`);
  return pin;
}
