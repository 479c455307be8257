/**
 * The long-term public key archive as the operating party keeps it (spec 4.7): a bare git repository whose
 * HEAD holds one file per active IDP, named by the URL-encoded issuer URL, containing its JWK Set; every
 * commit signed with the operating party's OpenPGP key. The sandbox plays the collection service: sync()
 * commits the current key sets whenever they changed. For tests it can also commit what an attacker or a
 * broken collector would push (unsigned, or signed with a foreign key).
 *
 * Commits go through one queue so concurrent syncs never race on the branch.
 */
import * as fs from 'node:fs';
import { join } from 'node:path';
import git from 'isomorphic-git';
import type { JWK } from 'jose';
import * as openpgp from 'openpgp';
import { createForeignSigner, loadOrCreateOperatorSigner, type PgpSigner } from './signer.ts';

export type JwkSet = { keys: JWK[] };
/** issuer URL -> its JWK Set */
export type ArchiveContent = ReadonlyMap<string, JwkSet>;
export type CommitSigner = 'operator' | 'foreign' | 'none';

const BRANCH = 'refs/heads/main';
const COLLECTOR = { name: 'Sandbox key collection service', email: 'key-archive@platform.sandbox.localhost' };

export interface SandboxKeyArchivePaths {
  /** GIT_PROJECT_ROOT of the CGI bridge */
  readonly root: string;
  /** the bare repository, served as <root>/<repoName> */
  readonly gitdir: string;
  readonly repoName: string;
  readonly signerPrivateKey: string;
  readonly signerPublicKey: string;
}

export function keyArchivePaths(sandboxDir: string): SandboxKeyArchivePaths {
  const root = join(sandboxDir, 'key-archive');
  return {
    root,
    repoName: 'keys.git',
    gitdir: join(root, 'keys.git'),
    signerPrivateKey: join(sandboxDir, 'key-archive-signer.key.asc'),
    signerPublicKey: join(sandboxDir, 'key-archive-signer.pub.asc'),
  };
}

export class SandboxKeyArchive {
  private queue: Promise<unknown> = Promise.resolve();
  private foreign?: Promise<PgpSigner>;
  private closed = false;

  private constructor(
    readonly paths: SandboxKeyArchivePaths,
    readonly operator: PgpSigner,
    private readonly desired: () => ArchiveContent,
  ) {}

  /** Opens (or creates) the repository and commits the current key sets. */
  static async open(sandboxDir: string, desired: () => ArchiveContent): Promise<SandboxKeyArchive> {
    const paths = keyArchivePaths(sandboxDir);
    const operator = await loadOrCreateOperatorSigner(paths.signerPrivateKey, paths.signerPublicKey);
    if (!fs.existsSync(join(paths.gitdir, 'HEAD'))) {
      await git.init({ fs, gitdir: paths.gitdir, bare: true, defaultBranch: 'main' });
    }
    const archive = new SandboxKeyArchive(paths, operator, desired);
    await archive.sync();
    return archive;
  }

  async head(): Promise<string | undefined> {
    try {
      return await git.resolveRef({ fs, gitdir: this.paths.gitdir, ref: BRANCH });
    } catch {
      return undefined;
    }
  }

  /** Commits the current key sets, signed by the operating party, if they differ from HEAD. */
  sync(): Promise<string | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    return this.enqueue(async () => {
      const tree = await this.writeContent(this.desired());
      const head = await this.head();
      if (head && (await git.readCommit({ fs, gitdir: this.paths.gitdir, oid: head })).commit.tree === tree)
        return undefined;
      return this.commit(tree, head, 'operator', 'Key sets of the active IDPs');
    });
  }

  /**
   * What must never be trusted: the current key sets plus `extraKeys` for each issuer, committed unsigned or
   * signed with a foreign key (or by the operator, to test the good path explicitly).
   */
  commitKeys(options: { signedBy: CommitSigner; extraKeys?: readonly JWK[]; message?: string }): Promise<string> {
    return this.enqueue(async () => {
      const content = new Map<string, JwkSet>();
      for (const [iss, set] of this.desired()) content.set(iss, { keys: [...set.keys, ...(options.extraKeys ?? [])] });
      const tree = await this.writeContent(content);
      return this.commit(tree, await this.head(), options.signedBy, options.message ?? 'Key sets of the active IDPs');
    });
  }

  /**
   * Back to normal: the branch returns to the parent of the oldest commit the operating party's key does not
   * verify (dropping it and everything pushed on top), then the current key sets are committed.
   */
  restore(): Promise<string | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    return this.enqueue(async () => {
      const head = await this.head();
      let target = head;
      for (let oid = head; oid; ) {
        const parent: string | undefined = (await git.readCommit({ fs, gitdir: this.paths.gitdir, oid })).commit
          .parent[0];
        if (!(await this.signedByOperator(oid))) target = parent;
        oid = parent;
      }
      if (target === head) return;
      if (target) await git.writeRef({ fs, gitdir: this.paths.gitdir, ref: BRANCH, value: target, force: true });
      else await fs.promises.rm(join(this.paths.gitdir, BRANCH), { force: true }); // nothing good is left: start over
    }).then(() => this.sync());
  }

  /** Waits for queued commits; later calls commit nothing (callers that did not await reset() stay harmless). */
  async close(): Promise<void> {
    this.closed = true;
    await this.queue;
  }

  private enqueue<T>(job: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error('the sandbox key archive is closed'));
    const run = this.queue.then(job, job);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async writeContent(content: ArchiveContent): Promise<string> {
    const gitdir = this.paths.gitdir;
    const entries = [];
    for (const [issuer, set] of content) {
      const blob = await git.writeBlob({
        fs,
        gitdir,
        blob: new TextEncoder().encode(`${JSON.stringify(set, null, 2)}\n`),
      });
      entries.push({ mode: '100644', path: encodeURIComponent(issuer), oid: blob, type: 'blob' as const });
    }
    return git.writeTree({ fs, gitdir, tree: entries });
  }

  private async commit(
    tree: string,
    parent: string | undefined,
    signedBy: CommitSigner,
    message: string,
  ): Promise<string> {
    if (signedBy === 'foreign') this.foreign ??= createForeignSigner();
    const signer = signedBy === 'operator' ? this.operator : signedBy === 'foreign' ? await this.foreign : undefined;
    return git.commit({
      fs,
      gitdir: this.paths.gitdir,
      ref: BRANCH,
      tree,
      parent: parent ? [parent] : [],
      message: `${message}\n`,
      author: COLLECTOR,
      ...(signer
        ? {
            signingKey: signer.armoredPrivateKey,
            onSign: async ({ payload }: { payload: string }) => ({ signature: await signer.sign(payload) }),
          }
        : {}),
    });
  }

  private async signedByOperator(oid: string): Promise<boolean> {
    const { commit, payload } = await git.readCommit({ fs, gitdir: this.paths.gitdir, oid });
    if (!commit.gpgsig) return false;
    try {
      await openpgp.verify({
        message: await openpgp.createMessage({ binary: new TextEncoder().encode(payload) }),
        signature: await openpgp.readSignature({ armoredSignature: commit.gpgsig }),
        verificationKeys: await openpgp.readKey({ armoredKey: this.operator.armoredPublicKey }),
        expectSigned: true,
      });
      return true;
    } catch {
      return false;
    }
  }
}
