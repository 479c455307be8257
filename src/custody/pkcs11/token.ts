/**
 * One PKCS#11 token, as the custodian uses it: the module loaded and initialised once per process, the slot
 * found by token label, the user logged in, and a pool of sessions (a PKCS#11 session runs one operation at a
 * time). Slow calls (key generation, signing) go through pkcs11js's asynchronous
 * variants, which run on libuv's thread pool and keep the event loop free; the library is initialised with
 * CKF_OS_LOCKING_OK because those calls then come from several threads (PKCS#11 2.40 base 5.4, C_Initialize).
 *
 * The PIN is read by the caller from a file and handed to login only: it is never logged, never kept in a
 * message and never stored on this object (a reconnect gets it from the caller again).
 */
import pkcs11js from 'pkcs11js';
import { ConfigError } from '../../config/load.ts';

export type Handle = Buffer;
export type Pkcs11 = pkcs11js.PKCS11;
export { pkcs11js };

export interface TokenOptions {
  /** path of the PKCS#11 module (keys.pkcs11Module) */
  readonly module: string;
  /** CKA token label (keys.tokenLabel) */
  readonly tokenLabel: string;
  readonly pin: string;
  /** sessions in the pool: operations run in parallel up to this many */
  readonly sessions: number;
}

/** The settings a start failure names (they are configuration paths; the message never carries the PIN). */
export const SETTING = { module: 'keys.pkcs11Module', tokenLabel: 'keys.tokenLabel', pinFile: 'keys.pinFile' } as const;

/** PKCS#11 return value of an error thrown by pkcs11js, or undefined for anything else. */
export function pkcs11Code(err: unknown): number | undefined {
  const code = (err as { code?: unknown })?.code;
  return err instanceof Error && typeof code === 'number' ? code : undefined;
}

/** The CKR_ name of an error, for logs (pkcs11js puts it first in the message); never data or the PIN. */
export function pkcs11Reason(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return /^CKR_[A-Z_]+/.exec(message)?.[0] ?? 'PKCS#11 call failed';
}

/**
 * A module is initialised once per process (a second C_Initialize answers CKR_CRYPTOKI_ALREADY_INITIALIZED):
 * tokens of the same module share it, and the last one to close finalises it.
 */
const modules = new Map<string, { pkcs11: Pkcs11; users: number; settings: string }>();

/**
 * Environment variables a module reads once, in C_Initialize (SoftHSM2: its configuration, hence its token
 * directory). A module in use keeps what it read then: a token opened under other values would be looked for
 * among the earlier tokens (one whose directory is gone answers CKR_GENERAL_ERROR), so it is refused.
 */
const READ_AT_INITIALIZE = ['SOFTHSM2_CONF'] as const;

const initSettings = () => READ_AT_INITIALIZE.map((name) => `${name}=${process.env[name] ?? ''}`).join(' ');

function acquireModule(path: string): Pkcs11 {
  const known = modules.get(path);
  if (known) {
    const settings = initSettings();
    if (settings !== known.settings)
      throw new ConfigError(
        `setting ${SETTING.module}: the PKCS#11 module ${path} is in use in this process with ${known.settings}; ` +
          `a token under ${settings} can be opened once every token of the module is closed`,
      );
    known.users++;
    return known.pkcs11;
  }
  const pkcs11 = new pkcs11js.PKCS11();
  try {
    pkcs11.load(path);
  } catch {
    throw new ConfigError(`setting ${SETTING.module}: cannot load the PKCS#11 module ${path}`);
  }
  try {
    pkcs11.C_Initialize({ flags: pkcs11js.CKF_OS_LOCKING_OK });
  } catch (err) {
    if (pkcs11Code(err) !== pkcs11js.CKR_CRYPTOKI_ALREADY_INITIALIZED) {
      pkcs11.close();
      throw new ConfigError(
        `setting ${SETTING.module}: the PKCS#11 module ${path} failed to initialise (${pkcs11Reason(err)})`,
      );
    }
  }
  modules.set(path, { pkcs11, users: 1, settings: initSettings() });
  return pkcs11;
}

function releaseModule(path: string): void {
  const known = modules.get(path);
  if (!known || --known.users > 0) return;
  modules.delete(path);
  try {
    known.pkcs11.C_Finalize();
  } catch {
    // finalising a module whose token is gone: nothing left to release
  }
  known.pkcs11.close();
}

const trimmed = (text: string) => text.replace(/\0/g, '').trim();

/** The slot holding the token with this label (labels are blank-padded to 32 bytes in CK_TOKEN_INFO). */
function findSlot(pkcs11: Pkcs11, label: string): { slot: Handle; serial: string } {
  const labels: string[] = [];
  for (const slot of pkcs11.C_GetSlotList(true)) {
    const info = pkcs11.C_GetTokenInfo(slot);
    const tokenLabel = trimmed(info.label);
    if (tokenLabel === label) return { slot, serial: trimmed(info.serialNumber) };
    if (tokenLabel) labels.push(tokenLabel);
  }
  const present = labels.length
    ? `tokens present: ${labels.map((l) => JSON.stringify(l)).join(', ')}`
    : 'no initialised token is present';
  throw new ConfigError(`setting ${SETTING.tokenLabel}: no token labelled ${JSON.stringify(label)} (${present})`);
}

interface Waiter {
  resolve(session: Handle): void;
  reject(err: Error): void;
}

export class TokenClosedError extends Error {
  override name = 'TokenClosedError';
  constructor(message = 'the PKCS#11 token connection is closed') {
    super(message);
  }
}

export class Pkcs11Token {
  readonly pkcs11: Pkcs11;
  readonly label: string;
  readonly #options: Omit<TokenOptions, 'pin'>;
  #slot: Handle;
  #serial: string;
  #free: Handle[] = [];
  #all: Handle[] = [];
  readonly #waiters: Waiter[] = [];
  #closed = false;

  /** Loads the module, finds the token, opens the sessions and logs in; a failure names the setting at fault. */
  static open(options: TokenOptions): Pkcs11Token {
    const pkcs11 = acquireModule(options.module);
    try {
      return new Pkcs11Token(pkcs11, options);
    } catch (err) {
      releaseModule(options.module);
      throw err;
    }
  }

  private constructor(pkcs11: Pkcs11, options: TokenOptions) {
    this.pkcs11 = pkcs11;
    this.label = options.tokenLabel;
    this.#options = { module: options.module, tokenLabel: options.tokenLabel, sessions: options.sessions };
    const { slot, serial } = findSlot(pkcs11, options.tokenLabel);
    this.#slot = slot;
    this.#serial = serial;
    this.#openSessions(options.pin);
  }

  get serial(): string {
    return this.#serial;
  }

  /** Opens the pool's sessions and logs in (the login holds for every session of the application: PKCS#11 2.40 5.6). */
  #openSessions(pin: string): void {
    const pkcs11 = this.pkcs11;
    const sessions: Handle[] = [];
    try {
      for (let i = 0; i < this.#options.sessions; i++)
        sessions.push(pkcs11.C_OpenSession(this.#slot, pkcs11js.CKF_SERIAL_SESSION | pkcs11js.CKF_RW_SESSION));
      try {
        pkcs11.C_Login(sessions[0]!, pkcs11js.CKU_USER, pin);
      } catch (err) {
        const code = pkcs11Code(err);
        if (
          code === pkcs11js.CKR_PIN_INCORRECT ||
          code === pkcs11js.CKR_PIN_LEN_RANGE ||
          code === pkcs11js.CKR_PIN_INVALID
        ) {
          throw new ConfigError(
            `setting ${SETTING.pinFile}: the token ${JSON.stringify(this.label)} refused the PIN ` +
              `(${pkcs11Reason(err)})`,
          );
        }
        if (code === pkcs11js.CKR_PIN_LOCKED)
          throw new ConfigError(
            `setting ${SETTING.pinFile}: the user PIN of token ${JSON.stringify(this.label)} is locked`,
          );
        if (code !== pkcs11js.CKR_USER_ALREADY_LOGGED_IN) throw err;
      }
    } catch (err) {
      for (const s of sessions) this.#closeSession(s);
      if (err instanceof ConfigError) throw err;
      throw new ConfigError(
        `setting ${SETTING.tokenLabel}: cannot open sessions on token ${JSON.stringify(this.label)} ` +
          `(${pkcs11Reason(err)})`,
      );
    }
    this.#all = sessions;
    this.#free = [...sessions];
  }

  #closeSession(session: Handle): void {
    try {
      this.pkcs11.C_CloseSession(session);
    } catch {
      // a session of a token that is gone is closed already
    }
  }

  /** Runs `operation` on a session of its own; waits for one when all are busy. */
  async withSession<T>(operation: (session: Handle) => Promise<T> | T): Promise<T> {
    const session = await this.#acquire();
    try {
      return await operation(session);
    } finally {
      this.#release(session);
    }
  }

  #acquire(): Promise<Handle> {
    if (this.#closed) return Promise.reject(new TokenClosedError());
    if (this.#all.length === 0) return Promise.reject(new TokenClosedError('the PKCS#11 token is not connected'));
    const session = this.#free.pop();
    if (session) return Promise.resolve(session);
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  #release(session: Handle): void {
    if (!this.#all.includes(session)) return; // a session of before a reconnect: closed already
    const waiter = this.#waiters.shift();
    if (waiter) waiter.resolve(session);
    else this.#free.push(session);
    if (this.#free.length === this.#all.length) for (const done of this.#idleWaiters.splice(0)) done();
  }

  readonly #idleWaiters: (() => void)[] = [];

  /**
   * Resolves once every session is back in the pool (no operation runs on the token), or after `timeoutMs`.
   * close() must not close a session under a running asynchronous call: the module would then work on a
   * session (and, with C_Finalize, a library state) that is gone.
   */
  async idle(timeoutMs: number): Promise<void> {
    if (this.#free.length === this.#all.length) return;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.#idleWaiters.push(resolve);
      timer = setTimeout(resolve, timeoutMs);
    });
    clearTimeout(timer);
  }

  /** Whether the token answers: its info can be read (a removed token answers CKR_TOKEN_NOT_PRESENT or worse). */
  probe(): void {
    this.pkcs11.C_GetTokenInfo(this.#slot);
  }

  /**
   * After the token came back: the module initialised again (SoftHSM2, like many modules, finds tokens only in
   * C_Initialize), new sessions and a new login. Session objects of before are gone with their sessions, which
   * is what we want of signer keys. Sessions still busy are left to finish; they are not handed out again.
   */
  reconnect(pin: string): void {
    if (this.#closed) throw new TokenClosedError();
    for (const s of this.#all) this.#closeSession(s);
    this.#all = [];
    this.#free = [];
    // whoever waits for a session now would wait for a token that may not come back: they fail at once
    for (const waiter of this.#waiters.splice(0))
      waiter.reject(new TokenClosedError('the PKCS#11 token is not connected'));
    if (modules.get(this.#options.module)?.users === 1) {
      try {
        this.pkcs11.C_Finalize();
      } catch {
        // not initialised any more
      }
      this.pkcs11.C_Initialize({ flags: pkcs11js.CKF_OS_LOCKING_OK });
      modules.get(this.#options.module)!.settings = initSettings();
    }
    const { slot, serial } = findSlot(this.pkcs11, this.label);
    this.#slot = slot;
    this.#serial = serial;
    this.#openSessions(pin);
    for (const waiter of this.#waiters.splice(0)) {
      const session = this.#free.pop();
      if (session) waiter.resolve(session);
      else this.#waiters.push(waiter);
    }
  }

  /** Closes the sessions (session objects vanish with them), and finalises the module when no one else uses it. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const waiter of this.#waiters.splice(0)) waiter.reject(new TokenClosedError());
    try {
      if (this.#all[0]) this.pkcs11.C_Logout(this.#all[0]);
    } catch {
      // not logged in any more (token gone)
    }
    for (const s of this.#all) this.#closeSession(s);
    this.#all = [];
    this.#free = [];
    releaseModule(this.#options.module);
  }
}
