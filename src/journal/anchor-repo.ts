/**
 * The anchor repository: a bare git repository (<dataDir>/journal-anchor/batches.git, served read-only over
 * smart HTTP on the publication listener) with one commit per sealed batch, adding that batch's record
 * (anchor.ts) as batches/<thousands>/<number>.json. Auditors clone it and pull: git refuses a pull that is not
 * a fast-forward, so a rewritten history shows at their end, and their clone is an anchor for
 * `qtsp evidence audit --anchor DIR`.
 *
 * Commits only ever go on top of the branch, never replace it. Before each round the newest published record is
 * compared with the store's batch of that number: when they differ (the store was re-sealed or truncated, or
 * the repository is another store's), nothing more is published and `journal.anchor_mismatch` is logged.
 * Commits are deterministic (fixed author, the batch's seal time, no signature), so every instance over one
 * store builds the same commits, and one process per data directory writes (the serving one, or a cluster's
 * primary). `git gc --auto` packs the loose objects from time to time (Debian git, which also serves the
 * repository).
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { join } from 'node:path';
import git from 'isomorphic-git';
import type { JournalBatch, Store } from '../store/types.ts';
import type { Logger } from '../util/logger.ts';
import { runEvery } from '../util/periodic.ts';
import { anchorRecord, anchorText } from './anchor.ts';

const BRANCH = 'refs/heads/main';
const AUTHOR = { name: 'QTSP journal', email: 'journal@qtsp.invalid' };
const PAGE = 100;

export interface AnchorRepoPaths {
  /** GIT_PROJECT_ROOT of the smart-HTTP bridge */
  readonly root: string;
  readonly gitdir: string;
  /** the repository's path under root, as served */
  readonly repoName: string;
}

export function anchorRepoPaths(dataDir: string): AnchorRepoPaths {
  const root = join(dataDir, 'journal-anchor');
  return { root, gitdir: join(root, 'batches.git'), repoName: 'batches.git' };
}

/** the path of a batch's record: a folder per thousand batches keeps each tree small */
export function batchFilePath(batchNo: number): string {
  return `batches/${String(Math.floor(batchNo / 1000)).padStart(6, '0')}/${String(batchNo).padStart(9, '0')}.json`;
}

type TreeEntry = { mode: string; path: string; oid: string; type: 'blob' | 'tree' | 'commit' };

/** the tree `tree` (undefined: empty) with `content` at `path`, written; its oid */
async function treeWith(gitdir: string, tree: string | undefined, path: string[], content: string): Promise<string> {
  const [name, ...rest] = path as [string, ...string[]];
  const entries: TreeEntry[] = tree ? (await git.readTree({ fs, gitdir, oid: tree })).tree : [];
  const at = entries.findIndex((e) => e.path === name);
  const entry: TreeEntry =
    rest.length === 0
      ? {
          mode: '100644',
          path: name,
          type: 'blob',
          oid: await git.writeBlob({ fs, gitdir, blob: Buffer.from(content) }),
        }
      : { mode: '040000', path: name, type: 'tree', oid: await treeWith(gitdir, entries[at]?.oid, rest, content) };
  if (at >= 0) entries[at] = entry;
  else entries.push(entry);
  return git.writeTree({ fs, gitdir, tree: entries });
}

async function head(gitdir: string): Promise<string | undefined> {
  try {
    return await git.resolveRef({ fs, gitdir, ref: BRANCH });
  } catch {
    return undefined;
  }
}

/** the number of the newest batch published, from the head commit's message ("Batch N: ...") */
async function newestPublished(gitdir: string, oid: string): Promise<number> {
  const { commit } = await git.readCommit({ fs, gitdir, oid });
  const n = /^Batch (\d+):/.exec(commit.message)?.[1];
  if (!n) throw new Error(`the anchor repository's head ${oid} is not a batch commit`);
  return Number(n);
}

async function commitBatch(gitdir: string, parent: string | undefined, b: JournalBatch): Promise<string> {
  const parentTree = parent ? (await git.readCommit({ fs, gitdir, oid: parent })).commit.tree : undefined;
  const tree = await treeWith(gitdir, parentTree, batchFilePath(b.batchNo).split('/'), anchorText(anchorRecord(b)));
  const when = { ...AUTHOR, timestamp: Math.floor(b.sealedAt.getTime() / 1000), timezoneOffset: 0 };
  return git.commit({
    fs,
    gitdir,
    ref: BRANCH,
    tree,
    parent: parent ? [parent] : [],
    message: `Batch ${b.batchNo}: entries ${b.firstSeq}..${b.throughSeq}\n\nroot ${b.root.toString('hex')}\n`,
    author: when,
    committer: when,
  });
}

/**
 * The store's batches after the newest published one, each committed while `more(added)` holds (a first round
 * over a long journal yields to a shutdown); the count, or a mismatch.
 */
async function publishRound(
  store: Store,
  gitdir: string,
  more: (added: number) => boolean,
): Promise<{ added: number; mismatch?: number }> {
  let parent = await head(gitdir);
  let next = 1;
  if (parent) {
    const newest = await newestPublished(gitdir, parent);
    const [stored] = await store.journal.batches(newest, 1);
    const { blob } = await git.readBlob({ fs, gitdir, oid: parent, filepath: batchFilePath(newest) });
    const same = stored?.batchNo === newest && Buffer.from(blob).toString('utf8') === anchorText(anchorRecord(stored));
    if (!same) return { added: 0, mismatch: newest };
    next = newest + 1;
  }
  let added = 0;
  for (;;) {
    const page = await store.journal.batches(next, PAGE);
    for (const b of page) {
      if (!more(added)) return { added };
      parent = await commitBatch(gitdir, parent, b);
      added++;
    }
    next += page.length;
    if (page.length < PAGE) return { added };
  }
}

/**
 * The estimate `git gc --auto` itself makes before it packs (loose objects in objects/17, one 256th of them,
 * against gc.auto's default of 6700), made here first: a process spawned from the service costs the service a
 * copy-on-write fault on each heap page it writes next (its heap is hundreds of MB), so git is spawned only when
 * it would pack, not after every batch.
 */
const LOOSE_IN_SAMPLE_BEFORE_PACKING = Math.ceil(6700 / 256);

function packDue(gitdir: string): boolean {
  try {
    const sample = fs.readdirSync(join(gitdir, 'objects', '17'));
    return sample.filter((name) => /^[0-9a-f]{38}$/.test(name)).length > LOOSE_IN_SAMPLE_BEFORE_PACKING;
  } catch {
    return false; // no such directory: no loose object there yet
  }
}

/** `git gc --auto`: packs loose objects once there are many; spawned asynchronously, its failure only logged */
function packNow(gitdir: string, logger: Logger): Promise<void> {
  return new Promise((resolve) => {
    const child = spawn('git', ['--git-dir', gitdir, 'gc', '--auto', '--quiet'], { stdio: 'ignore' });
    const failed = (why: string) => {
      logger.warn({ event: 'journal.anchor_gc_failed', error: why }, 'git gc of the anchor repository failed');
      resolve();
    };
    child.on('error', (err) => failed(err.message));
    child.on('exit', (code) => (code === 0 ? resolve() : failed(`exit ${code}`)));
  });
}

export interface AnchorPublisher {
  /** publishes every batch sealed and not published yet (a failure is logged) */
  publish(): Promise<void>;
  /** stops the timer and publishes once more */
  close(): Promise<void>;
}

/** Publishes into the anchor repository of `dataDir` every `intervalSeconds` (0: only when asked) and at close. */
export function startAnchorPublisher(
  store: Store,
  dataDir: string,
  intervalSeconds: number,
  logger: Logger,
): AnchorPublisher {
  const { gitdir } = anchorRepoPaths(dataDir);
  let queue: Promise<void> = Promise.resolve();
  // at close: the round under way stops after its current commit, and a last round commits one page at most
  let closing = false;
  const round = async () => {
    try {
      if (!fs.existsSync(join(gitdir, 'HEAD'))) await git.init({ fs, gitdir, bare: true, defaultBranch: 'main' });
      const { added, mismatch } = await publishRound(store, gitdir, (n) => !closing || n < PAGE);
      if (mismatch !== undefined)
        logger.error(
          { event: 'journal.anchor_mismatch', batch: mismatch },
          `the store's batch ${mismatch} differs from the one published: the journal was re-sealed or truncated; ` +
            'nothing more is published (run qtsp evidence audit --anchor)',
        );
      if (added > 0 && packDue(gitdir)) await packNow(gitdir, logger);
    } catch (err) {
      logger.warn({ event: 'journal.anchor_failed', error: (err as Error).message }, 'publishing the anchor failed');
    }
  };
  const publish = () => {
    queue = queue.then(round);
    return queue;
  };
  const periodic = intervalSeconds > 0 ? runEvery(intervalSeconds * 1000, publish) : undefined;
  return {
    publish,
    async close() {
      closing = true;
      await periodic?.close();
      await publish();
    },
  };
}
