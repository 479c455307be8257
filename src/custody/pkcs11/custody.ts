/**
 * PKCS#11 key custody: every private key lives in a token and never leaves it (objects.ts says how each is made).
 *
 * - Long-lived keys (issuing CA, TSA, the OCSP responders of the issuing CA and of the root; the root CA key
 *   stays a file of the ceremony directory, which the service never reads) are found by label once and their
 *   handles cached (real HSMs are slow at C_FindObjects).
 * - A signer key is a pair of session objects, destroyed after its request. RSA-3072 pairs come from a pool of
 *   pre-generated, never-used session pairs (key-pool.ts), as their generation is slow in any token.
 * - Signing: mechanisms.ts.
 *
 * A token failure while running marks the custodian unready (readiness says why) and fails the request with
 * KeyCustodyUnavailable (503, nothing signed); a watchdog probes the token and reconnects when it is back.
 */
import { createHash, randomBytes, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError } from '../../config/load.ts';
import type { KeyAlgorithm, SignatureScheme, SignHash } from '../../crypto/signature.ts';
import type { Logger } from '../../util/logger.ts';
import { KeyPool, KeyPoolClosedError } from '../key-pool.ts';
import {
  KeyCustodyUnavailable,
  requireKeyAlgorithm,
  type CustodyReadiness,
  type EcdsaEncoding,
  type KeyCustody,
  type KeyGenerations,
  type KeyLocation,
  type LongLivedSigningKey,
  type LongLivedKeyMaker,
  type LongLivedKeyName,
  type SignerKey,
  type SigningKey,
} from '../types.ts';
import { ecdsaRawToDer, hashInfo, signOperation } from './mechanisms.ts';
import {
  destroyHandles,
  destroyLabelled,
  findObject,
  generateTokenKeyPair,
  keyPairTemplates,
  LONG_LIVED_LABELS,
  readKeyAlgorithm,
  readPublicKey,
  type TokenKeyPair,
} from './objects.ts';
import { pkcs11js, Pkcs11Token, pkcs11Reason, SETTING, type Handle, type TokenOptions } from './token.ts';

/** how long close() waits for operations still running on the token before it closes the sessions */
const CLOSE_WAIT_MS = 5000;
/** how often a token that is away is asked again (one cheap reconnect attempt at a time) */
const RECONNECT_MS = 250;
const SIGNER_LABEL = 'qtsp-signer';

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

/** A long-lived key found again after a reconnect is not the one in use: a ceremony replaced it. */
class LongLivedKeyReplaced extends Error {
  override name = 'LongLivedKeyReplaced';
}

interface LongLivedHandle {
  readonly handle: Handle;
  readonly publicKey: KeyObject;
  readonly algorithm: KeyAlgorithm;
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

export class Pkcs11Custody implements KeyCustody, LongLivedKeyMaker, KeyGenerations {
  readonly kind = 'pkcs11';
  readonly qscd: boolean;
  readonly #token: Pkcs11Token;
  readonly #options: Pkcs11CustodyOptions;
  readonly #logger: Logger | undefined;
  /** cached handles and public keys of the long-lived keys, by role */
  #longLived = new Map<LongLivedKeyName, LongLivedHandle>();
  /** cached handles of tagged generations (KeyGenerations), by label */
  #tagged = new Map<string, LongLivedHandle>();
  /** long-lived keys that were current before refreshLongLivedKeys (their handles stay valid until a reconnect) */
  #superseded: LongLivedHandle[] = [];
  /** the connection (#epoch) #longLived's handles were found in */
  #foundIn = 0;
  readonly #unsupported = new Set<string>();
  /** the connection: session objects of an earlier one died with their sessions */
  #epoch = 0;
  #healthy = true;
  #reason = '';
  #probing: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  readonly #rsa: KeyPool<TokenKeyPair>;
  #closed = false;
  #closing: Promise<void> | undefined;

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
    custody.#rsa.fill();
    return custody;
  }

  private constructor(token: Pkcs11Token, options: Pkcs11CustodyOptions) {
    this.#token = token;
    this.#options = options;
    this.#logger = options.logger;
    this.qscd = options.qscd;
    // one generation at a time: each holds a thread of libuv's small shared pool while the token works
    this.#rsa = new KeyPool<TokenKeyPair>({
      maker: { make: () => this.#makeRsa(), destroy: (pair) => this.#destroyPooled(pair) },
      size: options.rsaPoolSize,
      what: 'RSA-3072',
      reason: pkcs11Reason,
      ...(options.logger ? { logger: options.logger } : {}),
    });
  }

  get location(): KeyLocation {
    return { kind: 'pkcs11', tokenLabel: this.#token.label, tokenSerial: this.#token.serial };
  }

  /** the token the keys are in */
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
        `setting ${SETTING.tokenLabel}: token ${JSON.stringify(this.#token.label)} has no key labelled ` +
          `${LONG_LIVED_LABELS[name]}; run \`qtsp pki init\``,
      );
    const { publicKey } = found;
    const key = new TokenSigningKey(
      this,
      found.algorithm,
      found.algorithm === 'RSA-3072' ? 'rsa-pkcs1-v1_5' : 'ecdsa',
      () => this.#handleOf(name, publicKey),
    );
    return Object.assign(key, { publicKey });
  }

  /**
   * The handle of the key with this public key: the current one of the role (found again after a reconnect), or,
   * once a rollover made another key current, the one it was (kept or tagged): a certificate never signs with a
   * key it does not certify.
   */
  #handleOf(name: LongLivedKeyName, publicKey: KeyObject): Handle {
    const current = this.#longLived.get(name);
    if (current && (current.publicKey === publicKey || current.publicKey.equals(publicKey))) return current.handle;
    const other = [...this.#tagged.values(), ...this.#superseded].find((k) => k.publicKey.equals(publicKey));
    if (other) return other.handle;
    throw new KeyCustodyUnavailable(`the ${LONG_LIVED_LABELS[name]} key of this certificate is no longer in the token`);
  }

  /** `qtsp pki init`: a new long-lived key pair as token objects; an existing pair of that label is replaced. */
  async generateLongLivedKey(
    name: LongLivedKeyName,
    algorithm: KeyAlgorithm,
  ): Promise<SigningKey & { readonly publicKey: KeyObject }> {
    const label = LONG_LIVED_LABELS[name];
    await this.#token.withSession(async (session) => {
      destroyLabelled(this.#token, session, label);
      const pair = await generateTokenKeyPair(this.#token, session, {
        algorithm,
        persistent: true,
        label,
        epoch: this.#epoch,
      });
      this.#longLived.set(name, { handle: pair.privateHandle, publicKey: pair.publicKey, algorithm });
    });
    return this.longLivedKey(name);
  }

  // -------------------------------------------------------------------------------------------------------
  // generations of a long-lived key (an issuing CA rollover): the current one labelled qtsp-<role>, others
  // qtsp-<role>.<tag>

  async generateTaggedKey(
    name: LongLivedKeyName,
    tag: string | undefined,
    algorithm: KeyAlgorithm,
  ): Promise<LongLivedSigningKey> {
    const label = labelOf(name, tag);
    await this.#token.withSession(async (session) => {
      destroyLabelled(this.#token, session, label);
      const pair = await generateTokenKeyPair(this.#token, session, { algorithm, persistent: true, label, epoch: 0 });
      this.#tagged.set(label, { handle: pair.privateHandle, publicKey: pair.publicKey, algorithm });
    });
    return this.#taggedSigningKey(label);
  }

  async taggedKey(name: LongLivedKeyName, tag: string | undefined): Promise<LongLivedSigningKey> {
    const label = labelOf(name, tag);
    if (!this.#tagged.has(label))
      await this.#token.withSession((session) => {
        this.#tagged.set(label, this.#findLongLivedKey(session, label, true));
      });
    return this.#taggedSigningKey(label);
  }

  async retagKey(name: LongLivedKeyName, from: string | undefined, to: string | undefined): Promise<void> {
    const [source, target] = [from, to].map((t) => labelOf(name, t));
    await this.#token.withSession((session) => {
      if (findObject(this.#token, session, pkcs11js.CKO_PRIVATE_KEY, target!))
        throw new Error(`token ${JSON.stringify(this.#token.label)} holds a key labelled ${target} already`);
      for (const objectClass of [pkcs11js.CKO_PRIVATE_KEY, pkcs11js.CKO_PUBLIC_KEY]) {
        const handle = findObject(this.#token, session, objectClass, source!);
        if (!handle) throw new Error(`token ${JSON.stringify(this.#token.label)} has no key labelled ${source}`);
        this.#token.pkcs11.C_SetAttributeValue(session, handle, [{ type: pkcs11js.CKA_LABEL, value: target! }]);
      }
    });
    this.#tagged.delete(source!);
    this.#tagged.delete(target!);
  }

  async destroyTaggedKey(name: LongLivedKeyName, tag: string): Promise<boolean> {
    const label = labelOf(name, tag);
    this.#tagged.delete(label);
    return this.#token.withSession((session) => {
      const present = findObject(this.#token, session, pkcs11js.CKO_PRIVATE_KEY, label) !== undefined;
      destroyLabelled(this.#token, session, label);
      return present;
    });
  }

  /**
   * The reload after a ceremony (trust-services.ts): the keys now labelled current are used from here on; the
   * ones they replace stay reachable by their public key for the certificates not yet switched.
   */
  async refreshLongLivedKeys(): Promise<void> {
    // tagged keys keep their labels (a retired CA generation's tag is never reused): their cached handles stay;
    // handles of an earlier connection are not kept (a reconnect that refused a replaced key left them)
    const before = this.#foundIn === this.#epoch ? [...this.#superseded, ...this.#longLived.values()] : [];
    await this.#findLongLivedKeys(true);
    const current = [...this.#longLived.values()].map((k) => k.handle);
    this.#superseded = before.filter((k, i) => !current.includes(k.handle) && before.indexOf(k) === i);
  }

  #taggedSigningKey(label: string): LongLivedSigningKey {
    const found = this.#tagged.get(label)!;
    const scheme = found.algorithm === 'RSA-3072' ? 'rsa-pkcs1-v1_5' : 'ecdsa';
    const key = new TokenSigningKey(this, found.algorithm, scheme, () => {
      const current = this.#tagged.get(label);
      if (!current) throw new KeyCustodyUnavailable(`the key ${label} is no longer in the token`);
      return current.handle;
    });
    return Object.assign(key, { publicKey: found.publicKey });
  }

  /**
   * Finds the long-lived keys by label: at the start, on a reload (refreshLongLivedKeys), again after a
   * reconnect. After a reconnect a key that is not the one in use (a ceremony renewed it or rolled it over, and
   * this instance has not reloaded) is refused: under the certificate in use it would sign what validators
   * reject. The custody stays unavailable, naming it, until the reload takes it up with its certificate.
   */
  async #findLongLivedKeys(atStart: boolean): Promise<void> {
    await this.#token.withSession((session) => {
      const found = new Map<LongLivedKeyName, LongLivedHandle>();
      for (const name of Object.keys(LONG_LIVED_LABELS) as LongLivedKeyName[]) {
        const key = this.#findLongLivedKey(session, LONG_LIVED_LABELS[name], atStart);
        const inUse = this.#longLived.get(name);
        if (!atStart && inUse && !inUse.publicKey.equals(key.publicKey))
          throw new LongLivedKeyReplaced(
            `holds a new key ${LONG_LIVED_LABELS[name]}, used once the instance reloads the renewed material`,
          );
        found.set(name, key);
      }
      this.#longLived = found;
      this.#foundIn = this.#epoch;
      // tagged keys found before: their handles are found again too (a reconnect invalidates them)
      // (one destroyed meanwhile is forgotten)
      for (const label of [...this.#tagged.keys()]) {
        try {
          this.#tagged.set(label, this.#findLongLivedKey(session, label, false));
        } catch {
          this.#tagged.delete(label);
        }
      }
    });
  }

  #findLongLivedKey(session: Handle, label: string, atStart: boolean): LongLivedHandle {
    const privateHandle = findObject(this.#token, session, pkcs11js.CKO_PRIVATE_KEY, label);
    const publicHandle = findObject(this.#token, session, pkcs11js.CKO_PUBLIC_KEY, label);
    if (!privateHandle || !publicHandle) {
      if (atStart)
        throw new ConfigError(
          `setting ${SETTING.tokenLabel}: token ${JSON.stringify(this.#token.label)} has no key pair labelled ` +
            `${label}; run \`qtsp pki init\``,
        );
      throw new Error(`the key pair ${label} is missing`);
    }
    const algorithm = readKeyAlgorithm(this.#token, session, publicHandle);
    const publicKey = readPublicKey(this.#token, session, publicHandle, algorithm);
    return { handle: privateHandle, publicKey, algorithm };
  }

  // -------------------------------------------------------------------------------------------------------
  // signer keys

  async createSignerKey(algorithm: KeyAlgorithm, scheme: SignatureScheme): Promise<SignerKey> {
    requireKeyAlgorithm(algorithm);
    this.#requireHealthy();
    let pair: TokenKeyPair;
    try {
      pair = algorithm === 'RSA-3072' ? await this.#rsa.take() : await this.#generateSigner(algorithm);
    } catch (err) {
      if (err instanceof KeyPoolClosedError) throw new KeyCustodyUnavailable('the key custody is closed');
      throw this.#failure(err, 'key generation');
    }
    return new TokenSignerKey(this, pair, scheme, (p) => this.#destroyPair(p));
  }

  #generateSigner(algorithm: KeyAlgorithm): Promise<TokenKeyPair> {
    return this.#token.withSession((session) =>
      generateTokenKeyPair(this.#token, session, {
        algorithm,
        persistent: false,
        label: SIGNER_LABEL,
        epoch: this.#epoch,
      }),
    );
  }

  /** A pooled RSA pair; a failure has the token checked at once. */
  async #makeRsa(): Promise<TokenKeyPair> {
    try {
      return await this.#generateSigner('RSA-3072');
    } catch (err) {
      this.#checkSoon();
      throw err;
    }
  }

  /** step 9: both halves destroyed; a pair of an earlier connection died with its session already. */
  async #destroyPair(pair: TokenKeyPair): Promise<void> {
    if (pair.epoch !== this.#epoch || this.#closed) return;
    try {
      await this.#token.withSession((session) =>
        destroyHandles(this.#token, session, [pair.privateHandle, pair.publicHandle]),
      );
    } catch (err) {
      // a token gone meanwhile took its session objects with it
      this.#logger?.warn(
        { event: 'keys.destroy_failed', reason: pkcs11Reason(err) },
        'PKCS#11: destroying a signer key failed',
      );
    }
  }

  /** A pooled pair nobody took (at close): destroyed explicitly too, not only by closing its session. */
  async #destroyPooled(pair: TokenKeyPair): Promise<void> {
    if (pair.epoch !== this.#epoch) return;
    await this.#token
      .withSession((session) => destroyHandles(this.#token, session, [pair.privateHandle, pair.publicHandle]))
      .catch(() => undefined);
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
        for (const hash of ['sha3-256', 'sha3-384', 'sha3-512'] as const)
          if (!this.#signsPss(session, pair.privateKey, hash)) this.#unsupported.add(`rsa-pss/${hash}`);
      } finally {
        destroyHandles(this.#token, session, [pair.privateKey, pair.publicKey]);
      }
    });
  }

  #signsPss(session: Handle, privateKey: Handle, hash: SignHash): boolean {
    const { mechanism, input } = signOperation('rsa-pss', hash, Buffer.alloc(hashInfo(hash).length));
    try {
      this.#token.pkcs11.C_SignInit(session, mechanism, privateKey);
      this.#token.pkcs11.C_Sign(session, input, Buffer.alloc(128));
      return true;
    } catch {
      return false;
    }
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

  /** Probes every probeIntervalMs; while the token is away every RECONNECT_MS, so its return shows within a second. */
  #startWatchdog(): void {
    const interval = this.#options.probeIntervalMs ?? 2000;
    const next = () => {
      if (this.#closed) return;
      this.#timer = setTimeout(
        () => {
          this.#checkSoon();
          void (this.#probing ?? Promise.resolve()).then(next, next);
        },
        this.#healthy ? interval : Math.min(RECONNECT_MS, interval),
      );
      this.#timer.unref();
    };
    next();
  }

  #checkSoon(): void {
    if (this.#closed || this.#probing) return;
    this.#probing = this.#check().finally(() => (this.#probing = undefined));
  }

  /** Healthy: the token answers and every cached long-lived handle still names its key. Else: reconnect. */
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
    this.#rsa.pause(new KeyCustodyUnavailable(`the PKCS#11 token ${reason}`));
  }

  async #reconnect(): Promise<void> {
    if (this.#closed) return;
    try {
      this.#token.reconnect(readPin(this.#options.pinFile));
      this.#epoch++;
      this.#superseded = []; // handles of the old connection
      this.#rsa.discard(); // the pooled pairs died with the old sessions
      if (this.#options.requireLongLivedKeys ?? true) await this.#findLongLivedKeys(false);
      this.#healthy = true;
      this.#reason = '';
      this.#logger?.info({ event: 'keys.available', token: this.#token.label }, 'PKCS#11 token answers again');
      this.#rsa.fill();
    } catch (err) {
      const reason =
        err instanceof LongLivedKeyReplaced
          ? err.message
          : `does not answer (${err instanceof ConfigError ? err.message : pkcs11Reason(err)})`;
      if (this.#healthy) this.#markUnhealthy(reason);
      else this.#reason = reason;
    }
  }

  /**
   * Stops the watchdog and closes the sessions: the session objects (pooled RSA pairs) go with them. A later
   * call resolves when the first is done, also after a bounded stop gave up waiting for it.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    // fails waiting requests at once; never closes a session under a running generation
    const pool = this.#rsa.close();
    await this.#probing;
    await pool;
    await this.#token.idle(CLOSE_WAIT_MS); // signer keys of requests under way are destroyed on their sessions first
    this.#token.close();
  }
}

/** CKA_LABEL of a generation of a long-lived key: qtsp-<role>.<tag>, or qtsp-<role> for the current one */
function labelOf(name: LongLivedKeyName, tag: string | undefined): string {
  if (tag === undefined) return LONG_LIVED_LABELS[name];
  if (!/^[0-9a-z-]+$/.test(tag)) throw new TypeError(`a key generation tag is lowercase letters and digits: ${tag}`);
  return `${LONG_LIVED_LABELS[name]}.${tag}`;
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
