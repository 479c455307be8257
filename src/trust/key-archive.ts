/**
 * The long-term public key archive (spec 4.7): a git repository of the operating party, read over smart
 * HTTP with isomorphic-git. HEAD holds one file per active IDP, named by the URL-encoded issuer URL, with
 * its JWK Set; every commit is signed by the operating party.
 *
 * We keep a bare clone in <dataDir>/key-archive. A pull fetches into refs/remotes/origin/* and moves our own
 * branch (VERIFIED_REF) only when every new commit carries a valid OpenPGP signature by one of the configured
 * operating-party keys and the new head descends from the old one. Anything else is refused as a whole: our
 * branch stays where it was, the refusal is logged as a security event and shown in readiness. Keys are
 * only ever read from VERIFIED_REF, so nothing fetched is trusted before it is verified.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import * as fs from 'node:fs';
import { STATUS_CODES } from 'node:http';
import git, { type HttpClient } from 'isomorphic-git';
import * as openpgp from 'openpgp';
import type { JWK } from 'jose';
import { httpRequest, type HttpAgent as Agent } from '../util/http-client.ts';
import type { Logger } from '../util/logger.ts';

/** Our branch: the newest state whose whole history we verified. */
export const VERIFIED_REF = 'refs/heads/main';
const REMOTE = 'origin';
const MAX_PACK_BYTES = 64 * 1024 * 1024;

// ---- reading JWK Sets (shared with the jwks_uri path) ----

/** The RS256 keys of a JWK Set by kid: RSA >= 2048 bits, alg RS256 or none, use sig or none (spec 5.7, 5.13). */
export function rs256Keys(jwks: unknown): Map<string, KeyObject> {
  const keys = new Map<string, KeyObject>();
  const list = (jwks as { keys?: unknown } | undefined)?.keys;
  if (!Array.isArray(list)) return keys;
  for (const jwk of list as JWK[]) {
    if (jwk?.kty !== 'RSA' || typeof jwk.kid !== 'string') continue;
    if (jwk.alg !== undefined && jwk.alg !== 'RS256') continue;
    if (jwk.use !== undefined && jwk.use !== 'sig') continue;
    try {
      const key = createPublicKey({ key: { kty: 'RSA', n: jwk.n!, e: jwk.e! }, format: 'jwk' });
      if ((key.asymmetricKeyDetails?.modulusLength ?? 0) >= 2048) keys.set(jwk.kid, key);
    } catch {
      // a malformed key in the set is skipped, never fatal for the others
    }
  }
  return keys;
}

/** File name of an issuer's JWK Set in the archive (spec 4.7: the URL-encoded issuer URL). */
export function archiveFileName(issuer: string): string {
  return encodeURIComponent(issuer);
}

// ---- commit signatures ----

/** The operating party's OpenPGP public key(s), armored; several keys allow a rollover of the signer. */
export async function loadSignerKeys(file: string): Promise<openpgp.PublicKey[]> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read the key archive signer key ${file}: ${(err as Error).message}`);
  }
  try {
    return await openpgp.readKeys({ armoredKeys: text });
  } catch (err) {
    throw new Error(`${file} is not an armored OpenPGP public key: ${(err as Error).message}`);
  }
}

/**
 * What git signs: the raw commit object without its signature header. Rebuilt from the raw bytes rather
 * than taken from isomorphic-git's `payload`, which is only right for OpenPGP signatures; latin1 keeps every
 * byte as it is.
 */
function signedPayload(raw: Uint8Array): { payload: Uint8Array; signature?: string } {
  const text = Buffer.from(raw).toString('latin1');
  const end = text.indexOf('\n\n');
  const headers = (end < 0 ? text : text.slice(0, end + 1)).split('\n');
  const kept: string[] = [];
  const sig: string[] = [];
  let inSig = false;
  for (const line of headers) {
    if (line.startsWith('gpgsig ') || line.startsWith('gpgsig-sha256 ')) {
      inSig = true;
      sig.push(line.slice(line.indexOf(' ') + 1));
    } else if (inSig && line.startsWith(' ')) {
      sig.push(line.slice(1));
    } else {
      inSig = false;
      kept.push(line);
    }
  }
  const payload = kept.join('\n') + (end < 0 ? '' : text.slice(end + 1));
  return { payload: Buffer.from(payload, 'latin1'), ...(sig.length ? { signature: sig.join('\n') } : {}) };
}

export type CommitCheck =
  | { readonly oid: string; readonly ok: true; readonly signerKeyId: string; readonly committedAt: number }
  | { readonly oid: string; readonly ok: false; readonly reason: string };

/** Verifies that this commit carries a valid OpenPGP signature by one of `keys`. */
export async function verifyCommitSignature(
  gitdir: string,
  oid: string,
  keys: readonly openpgp.PublicKey[],
): Promise<CommitCheck> {
  const { object } = await git.readObject({ fs, gitdir, oid, format: 'content' });
  const { payload, signature } = signedPayload(object as Uint8Array);
  if (!signature) return { oid, ok: false, reason: `commit ${oid} is not signed` };
  if (!signature.includes('BEGIN PGP SIGNATURE'))
    return { oid, ok: false, reason: `commit ${oid} carries a signature that is not OpenPGP` };
  try {
    const result = await openpgp.verify({
      message: await openpgp.createMessage({ binary: payload }),
      signature: await openpgp.readSignature({ armoredSignature: signature }),
      verificationKeys: [...keys],
      expectSigned: true,
    });
    const { commit } = await git.readCommit({ fs, gitdir, oid });
    return {
      oid,
      ok: true,
      signerKeyId: result.signatures[0]!.keyID.toHex().toUpperCase(),
      committedAt: commit.committer.timestamp,
    };
  } catch (err) {
    return {
      oid,
      ok: false,
      reason: `commit ${oid} is not signed by the operating party's key (${(err as Error).message})`,
    };
  }
}

// ---- reading history ----

export interface ArchiveCommit {
  readonly oid: string;
  readonly committedAt: number;
  readonly parents: readonly string[];
}

/** The commits of the first-parent line from `from` back to the root, newest first. */
export async function* firstParentHistory(gitdir: string, from: string): AsyncGenerator<ArchiveCommit> {
  let oid: string | undefined = from;
  while (oid) {
    const { commit } = await git.readCommit({ fs, gitdir, oid });
    yield { oid, committedAt: commit.committer.timestamp, parents: commit.parent };
    oid = commit.parent[0];
  }
}

/** The issuer's RS256 keys as the archive held them at this commit (undefined: no file for the issuer). */
export async function keySetAt(
  gitdir: string,
  commit: string,
  issuer: string,
): Promise<Map<string, KeyObject> | undefined> {
  let blob: Uint8Array;
  try {
    ({ blob } = await git.readBlob({ fs, gitdir, oid: commit, filepath: archiveFileName(issuer) }));
  } catch {
    return undefined;
  }
  try {
    return rs256Keys(JSON.parse(new TextDecoder().decode(blob)));
  } catch {
    return new Map();
  }
}

export async function resolveVerifiedHead(gitdir: string): Promise<string | undefined> {
  try {
    return await git.resolveRef({ fs, gitdir, ref: VERIFIED_REF });
  } catch {
    return undefined;
  }
}

/** isomorphic-git's HttpClient over our HTTPS client: the configured CA bundle, a hard timeout, a size cap. */
function gitHttpClient(agent: Agent, timeoutMs: number): HttpClient {
  return {
    async request({ url, method, headers, body }) {
      let payload: Buffer | undefined;
      if (body) {
        const chunks: Uint8Array[] = [];
        for await (const chunk of body) chunks.push(chunk);
        payload = Buffer.concat(chunks);
      }
      const res = await httpRequest(url, {
        method: method ?? 'GET',
        headers: headers ?? {},
        ...(payload ? { body: payload } : {}),
        agent,
        timeoutMs,
        maxResponseBytes: MAX_PACK_BYTES,
      });
      const flat: Record<string, string> = {};
      for (const [k, v] of Object.entries(res.headers))
        if (v !== undefined) flat[k] = Array.isArray(v) ? v.join(', ') : v;
      async function* one(): AsyncGenerator<Uint8Array> {
        yield new Uint8Array(res.body);
      }
      return {
        url,
        method: method ?? 'GET',
        statusCode: res.status,
        statusMessage: STATUS_CODES[res.status] ?? '',
        headers: flat,
        body: one(),
      };
    },
  };
}

// ---- the archive as the QTSP uses it ----

export interface ArchiveKey {
  readonly key: KeyObject;
  /** the verified commit whose tree holds the key (our HEAD) */
  readonly commit: string;
}

export type PullOutcome =
  | { readonly status: 'unchanged' | 'updated'; readonly head: string }
  | {
      readonly status: 'refused';
      readonly head: string | undefined;
      readonly remoteHead: string;
      readonly reason: string;
    }
  | { readonly status: 'failed'; readonly head: string | undefined; readonly reason: string };

export interface KeyArchiveOptions {
  /** smart-HTTP URL of the archive (trust.keyArchiveUrl) */
  readonly url: string;
  /** our bare clone (<dataDir>/key-archive) */
  readonly gitdir: string;
  /** the operating party's OpenPGP public key(s) */
  readonly signerKeys: readonly openpgp.PublicKey[];
  readonly agent: Agent;
  readonly timeoutMs: number;
  /** interval of the periodic pull (trust.keyArchivePullSeconds) */
  readonly pullIntervalMs: number;
  readonly logger: Logger;
  readonly now?: () => number;
}

interface IssuerFile {
  readonly blob: string;
  readonly keys: ReadonlyMap<string, KeyObject>;
}

interface Refusal {
  readonly at: number;
  readonly remoteHead: string;
  readonly reason: string;
}

function firstLine(err: unknown): string {
  return String((err as Error)?.message ?? err)
    .split('\n')[0]!
    .trim();
}

/** The URL without user info or query, for logs and readiness. */
function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}

export class KeyArchive {
  private head: string | undefined;
  private issuers = new Map<string, IssuerFile>();
  /** every commit reachable from `head`, each one verified */
  private readonly verified = new Set<string>();
  private refusal: Refusal | undefined;
  private lastFailure: { at: number; reason: string } | undefined;
  private lastSuccessAt: number | undefined;
  /** committer time of the verified HEAD (ms) */
  private headCommittedAt: number | undefined;
  private pending: Promise<PullOutcome> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners: ((issuers: readonly string[]) => void)[] = [];
  private readonly http: HttpClient;
  private readonly now: () => number;

  private constructor(private readonly options: KeyArchiveOptions) {
    this.http = gitHttpClient(options.agent, options.timeoutMs);
    this.now = options.now ?? Date.now;
  }

  /**
   * Opens the local clone (creating an empty one) and re-verifies its whole history: a local state that no
   * longer verifies (tampered on disk, or another signer key configured) is not used.
   */
  static async open(options: KeyArchiveOptions): Promise<KeyArchive> {
    if (!fs.existsSync(`${options.gitdir}/HEAD`)) {
      await git.init({ fs, gitdir: options.gitdir, bare: true, defaultBranch: 'main' });
    }
    await git.addRemote({ fs, gitdir: options.gitdir, remote: REMOTE, url: options.url, force: true });
    const archive = new KeyArchive(options);
    const head = await resolveVerifiedHead(options.gitdir);
    if (head) {
      const problem = await archive.verifyRange(head);
      if (problem)
        archive.securityEvent('key archive: the local clone does not verify and is not used', {
          commit: problem.oid,
          reason: problem.reason,
        });
      else await archive.adopt(head);
    }
    return archive;
  }

  get url(): string {
    return this.options.url;
  }

  get gitdir(): string {
    return this.options.gitdir;
  }

  get signerKeys(): readonly openpgp.PublicKey[] {
    return this.options.signerKeys;
  }

  /** The verified commit keys are read from, if any. */
  verifiedHead(): string | undefined {
    return this.head;
  }

  /** Seconds since the verified HEAD was committed (metrics: an archive that stopped moving); undefined without one. */
  headAgeSeconds(): number | undefined {
    return this.headCommittedAt === undefined ? undefined : (this.now() - this.headCommittedAt) / 1000;
  }

  /** Seconds since the last successful pull (metrics); undefined before the first one. */
  lastPullAgeSeconds(): number | undefined {
    return this.lastSuccessAt === undefined ? undefined : (this.now() - this.lastSuccessAt) / 1000;
  }

  /** The issuer's key with this kid at our verified HEAD. */
  key(issuer: string, kid: string): ArchiveKey | undefined {
    const key = this.issuers.get(issuer)?.keys.get(kid);
    return key && this.head ? { key, commit: this.head } : undefined;
  }

  /** Called with the issuers whose JWK Set changed when the verified HEAD moves. */
  onChange(listener: (issuers: readonly string[]) => void): void {
    this.listeners.push(listener);
  }

  /** Fetches and, if every new commit verifies, moves our branch. Concurrent calls share one pull. */
  pull(): Promise<PullOutcome> {
    this.pending ??= this.doPull().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  /** Periodic pulls (timer unref'd: it never keeps the process alive). */
  start(): void {
    if (this.timer || this.options.pullIntervalMs <= 0) return;
    this.timer = setInterval(() => void this.pull(), this.options.pullIntervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.pending?.catch(() => undefined);
  }

  /**
   * Readiness (/health/ready): not ready without any verified state; a refused update is reported while we
   * keep serving the last good state (failing readiness on it would let whoever can push a bad commit take
   * every QTSP instance out of service).
   */
  readiness(): { ready: boolean; reasons: string[] } {
    const reasons: string[] = [];
    const where = safeUrl(this.options.url);
    if (!this.head) {
      const why = this.refusal?.reason ?? this.lastFailure?.reason ?? 'not pulled yet';
      reasons.push(`key archive ${where}: no verified state (${why})`);
    }
    if (this.refusal && this.head) {
      const { remoteHead, reason } = this.refusal;
      reasons.push(
        `key archive ${where}: security event: update to ${remoteHead} refused (${reason}); ` +
          `keeping verified commit ${this.head}`,
      );
    }
    return { ready: this.head !== undefined, reasons };
  }

  private async doPull(): Promise<PullOutcome> {
    const { gitdir, url } = this.options;
    let remoteHead: string | null;
    try {
      const result = await git.fetch({
        fs,
        http: this.http,
        gitdir,
        url,
        remote: REMOTE,
        ref: VERIFIED_REF,
        remoteRef: 'HEAD',
        singleBranch: true,
        tags: false,
      });
      remoteHead = result.fetchHead;
    } catch (err) {
      return this.failed(`fetch failed: ${firstLine(err)}`);
    }
    if (!remoteHead) return this.failed('the remote repository is empty');
    if (remoteHead === this.head) {
      this.succeeded();
      return { status: 'unchanged', head: remoteHead };
    }
    if (this.head && !(await git.isDescendent({ fs, gitdir, oid: remoteHead, ancestor: this.head, depth: -1 }))) {
      return this.refuse(
        remoteHead,
        `the new head does not descend from our verified commit ${this.head} (history was rewritten)`,
      );
    }
    const problem = await this.verifyRange(remoteHead);
    if (problem) return this.refuse(remoteHead, problem.reason);
    await git.writeRef({ fs, gitdir, ref: VERIFIED_REF, value: remoteHead, force: true });
    const changed = await this.adopt(remoteHead);
    this.succeeded();
    this.options.logger.info(
      { event: 'key_archive.updated', url: safeUrl(url), head: remoteHead, changed_issuers: changed },
      'key archive updated',
    );
    for (const listener of this.listeners) listener(changed);
    return { status: 'updated', head: remoteHead };
  }

  /** Verifies every commit reachable from `tip` that is not known to be verified; the first failure wins. */
  private async verifyRange(tip: string): Promise<Extract<CommitCheck, { ok: false }> | undefined> {
    const { gitdir, signerKeys } = this.options;
    const fresh: string[] = [];
    const queue = [tip];
    const seen = new Set<string>();
    while (queue.length) {
      const oid = queue.pop()!;
      if (seen.has(oid) || this.verified.has(oid)) continue;
      seen.add(oid);
      let check: CommitCheck;
      try {
        check = await verifyCommitSignature(gitdir, oid, signerKeys);
      } catch (err) {
        return { oid, ok: false, reason: `commit ${oid} cannot be read (${firstLine(err)})` };
      }
      if (!check.ok) return check;
      fresh.push(oid);
      queue.push(...(await git.readCommit({ fs, gitdir, oid })).commit.parent);
    }
    for (const oid of fresh) this.verified.add(oid);
    return undefined;
  }

  /** Loads the key sets of a verified commit; returns the issuers whose file changed. */
  private async adopt(head: string): Promise<string[]> {
    const { gitdir } = this.options;
    const next = new Map<string, IssuerFile>();
    const { tree } = await git.readTree({ fs, gitdir, oid: head });
    for (const entry of tree) {
      if (entry.type !== 'blob') continue;
      let issuer: string;
      try {
        issuer = decodeURIComponent(entry.path);
      } catch {
        continue;
      }
      const previous = this.issuers.get(issuer);
      if (previous?.blob === entry.oid) {
        next.set(issuer, previous);
        continue;
      }
      const { blob } = await git.readBlob({ fs, gitdir, oid: entry.oid });
      let keys = new Map<string, KeyObject>();
      try {
        keys = rs256Keys(JSON.parse(new TextDecoder().decode(blob)));
      } catch {
        this.options.logger.warn(
          { event: 'key_archive.bad_file', issuer, head },
          'a JWK Set in the key archive is not JSON; no keys taken from it',
        );
      }
      next.set(issuer, { blob: entry.oid, keys });
    }
    const changed = [...new Set([...next.keys(), ...this.issuers.keys()])].filter(
      (iss) => next.get(iss)?.blob !== this.issuers.get(iss)?.blob,
    );
    this.issuers = next;
    this.head = head;
    this.headCommittedAt = (await git.readCommit({ fs, gitdir, oid: head })).commit.committer.timestamp * 1000;
    return changed;
  }

  private succeeded(): void {
    this.refusal = undefined;
    this.lastFailure = undefined;
    this.lastSuccessAt = this.now();
  }

  private failed(reason: string): PullOutcome {
    this.lastFailure = { at: this.now(), reason };
    this.options.logger.warn(
      {
        event: 'key_archive.pull_failed',
        url: safeUrl(this.options.url),
        reason,
        head: this.head,
        last_success_at: this.lastSuccessAt,
      },
      'key archive pull failed; keeping the verified state',
    );
    return { status: 'failed', head: this.head, reason };
  }

  private refuse(remoteHead: string, reason: string): PullOutcome {
    this.refusal = { at: this.now(), remoteHead, reason };
    this.securityEvent('key archive update refused; keeping the last verified state', {
      remote_head: remoteHead,
      reason,
    });
    return { status: 'refused', head: this.head, remoteHead, reason };
  }

  private securityEvent(message: string, details: Record<string, unknown>): void {
    this.options.logger.error(
      {
        event: 'security.key_archive_refused',
        security: true,
        url: safeUrl(this.options.url),
        kept_head: this.head ?? null,
        ...details,
      },
      message,
    );
  }
}

/**
 * The archive as the service runs it: open the local clone, pull once at start (a failure leaves it
 * without verified state, which readiness reports, and never stops the start), then pull periodically.
 */
export async function startKeyArchive(
  config: {
    readonly dataDir: string;
    readonly trust: {
      readonly keyArchiveUrl: string;
      readonly keyArchivePullSeconds: number;
      readonly keyArchiveSignerKeyFile: string;
      readonly httpTimeoutMs: number;
    };
  },
  agent: Agent,
  logger: Logger,
  gitdir = `${config.dataDir}/key-archive`,
): Promise<KeyArchive> {
  const archive = await KeyArchive.open({
    url: config.trust.keyArchiveUrl,
    gitdir,
    signerKeys: await loadSignerKeys(config.trust.keyArchiveSignerKeyFile),
    agent,
    timeoutMs: config.trust.httpTimeoutMs,
    pullIntervalMs: config.trust.keyArchivePullSeconds * 1000,
    logger,
  });
  await archive.pull();
  archive.start();
  return archive;
}
