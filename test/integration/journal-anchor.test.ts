/**
 * The journal's chain outside the database (journal/anchor.ts, anchor-repo.ts, http/journal-routes.ts): a
 * running QTSP publishes each sealed batch on its publication listener and as one commit in a repository that
 * Debian's `git clone` reads, whose history only grows. `qtsp evidence audit --anchor` compares the store with
 * roots kept elsewhere (a file saved from the listener, a clone, the listener's URL): clean when they agree; a
 * dropped last batch (which the audit alone does not see) and a batch re-sealed over a rewritten entry with our
 * own TSA (a consistent chain, clean for the audit alone) are each named. An anchor that cannot be read is an
 * error with exit status 2 and no stack trace. The publisher refuses to publish over a re-sealed store.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { encodeEntry } from '../../src/store/journal.ts';
import { sqlitePath } from '../../src/store/open.ts';
import type { Store } from '../../src/store/types.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'qtsp-journal-anchor-'));
let env: TestEnvironment;
let store: Store;

before(async () => {
  // sealed only when the test asks (sealJournal), so that every batch is the test's
  env = await startEnvironment({ journal: { sealIntervalSeconds: 0 } });
  store = env.qtsp.deps.store;
});
after(async () => {
  await env?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** a few operator events, then a seal (which publishes): one more batch */
async function sealBatch(label: string): Promise<number> {
  for (let i = 0; i < 3; i++)
    await store.journal.append({ kind: 'test.note', ref: null, at: new Date(), data: { label, i } });
  await env.qtsp.sealJournal();
  return (await store.journal.lastBatch())!.batchNo;
}

const get = async (path: string) => {
  const res = await fetch(`${env.qtsp.publicationUrl}${path}`);
  return { status: res.status, text: await res.text() };
};

const git = async (...args: string[]) => (await run('git', args, { encoding: 'utf8' })).stdout;
const audit = (...args: string[]) => qtsp(['evidence', 'audit', '--data-dir', env.dataDir, ...args]);

/** SQL behind the service's back, on its SQLite file */
function sql(statement: string, ...params: unknown[]): void {
  const db = new Database(sqlitePath(env.dataDir));
  try {
    db.pragma('busy_timeout = 10000');
    db.prepare(statement).run(...params);
  } finally {
    db.close();
  }
}

describe('the journal chain kept outside the database', () => {
  const clone = join(dir, 'clone');
  const anchorFile = join(dir, 'anchor.json');
  let newest = 0;

  it('publishes every sealed batch, paged and one by one, and as commits that git clone reads', async () => {
    for (const label of ['a', 'b', 'c', 'd']) newest = await sealBatch(label);
    assert.ok(newest >= 4);
    const page = await get(`/journal/batches?limit=2`);
    assert.equal(page.status, 200, page.text);
    const first = JSON.parse(page.text) as { batches: { batchNo: number; root: string }[]; next: string | null };
    assert.deepEqual(
      first.batches.map((b) => b.batchNo),
      [1, 2],
    );
    assert.equal(first.next, '/journal/batches?from=3&limit=2');
    const all = JSON.parse((await get('/journal/batches')).text) as { batches: { root: string }[]; next: null };
    assert.equal(all.batches.length, newest);
    assert.equal(all.next, null);
    const stored = await store.journal.batches(1, 100);
    assert.deepEqual(
      all.batches.map((b) => b.root),
      stored.map((b) => b.root.toString('hex')),
    );
    assert.equal((await get('/journal/batches/999999')).status, 404);
    assert.equal((await get('/journal/batches?from=abc')).status, 400);
    assert.equal((await get('/journal/batches?limit=100000')).status, 400);
    writeFileSync(anchorFile, (await get('/journal/batches')).text);

    await git('clone', '--quiet', `${env.qtsp.publicationUrl}/journal/batches.git`, clone);
    const subjects = (await git('-C', clone, 'log', '--reverse', '--format=%s')).trim().split('\n');
    assert.equal(subjects.length, newest);
    for (const [i, s] of subjects.entries()) assert.match(s, new RegExp(`^Batch ${i + 1}: entries \\d+\\.\\.\\d+$`));
    // each commit adds one file and changes none; each file is the listener's record of its batch
    const changes = (await git('-C', clone, 'log', '--format=', '--name-status')).trim().split('\n');
    assert.equal(changes.length, newest);
    for (const line of changes) assert.match(line, /^A\tbatches\/\d{6}\/\d{9}\.json$/);
    const file = readFileSync(join(clone, 'batches', '000000', '000000002.json'), 'utf8');
    assert.equal(file, (await get('/journal/batches/2')).text);
  });

  it('the history only grows: a pull after the next seal is a fast-forward over the commits already cloned', async () => {
    const before = (await git('-C', clone, 'rev-parse', 'HEAD')).trim();
    newest = await sealBatch('e');
    await git('-C', clone, 'pull', '--quiet', '--ff-only');
    const now = (await git('-C', clone, 'rev-parse', 'HEAD')).trim();
    assert.notEqual(now, before);
    await git('-C', clone, 'merge-base', '--is-ancestor', before, now); // throws when it is not
    assert.equal((await git('-C', clone, 'rev-list', '--count', 'HEAD')).trim(), String(newest));
    writeFileSync(anchorFile, (await get('/journal/batches')).text);
  });

  it('the repository is read-only over HTTP: a forced push of a rewritten history and paths out of it are refused', async () => {
    const forged = join(dir, 'forged');
    await git('clone', '--quiet', clone, forged);
    await git(
      '-C',
      forged,
      '-c',
      'user.name=x',
      '-c',
      'user.email=x@x',
      'commit',
      '--quiet',
      '--amend',
      '-m',
      'Batch 1',
    );
    await assert.rejects(
      git('-C', forged, 'push', '--force', `${env.qtsp.publicationUrl}/journal/batches.git`, 'HEAD:main'),
    );
    for (const path of ['/journal/batches.git/..%2F..%2Fpki/info/refs', '/journal/batches.git/%E0%A4%A/info/refs'])
      assert.equal((await get(`${path}?service=git-upload-pack`)).status, 403, path);
    const head = (
      await git('--git-dir', join(env.dataDir, 'journal-anchor', 'batches.git'), 'rev-parse', 'main')
    ).trim();
    assert.equal(head, (await git('-C', clone, 'rev-parse', 'HEAD')).trim());
  });

  it('a clean store agrees with the anchor: a saved file, a clone and the URL of the listener', async () => {
    for (const anchor of [anchorFile, clone, `${env.qtsp.publicationUrl}/journal/batches?limit=2`]) {
      const result = await audit('--anchor', anchor);
      assert.equal(result.code, 0, `${anchor}: ${result.output}`);
      assert.match(result.stdout, new RegExp(`anchor: ${newest} batch\\(es\\) \\(1\\.\\.${newest}\\).*the same`));
    }
  });

  it('names a dropped last batch, which the audit alone does not see', async () => {
    sql('DELETE FROM journal_batches WHERE batch_no = ?', newest);
    assert.equal((await audit()).code, 0, 'the audit alone sees entries not sealed yet, no finding');
    const result = await audit('--anchor', anchorFile);
    assert.equal(result.code, 1, result.output);
    assert.match(result.stdout, new RegExp(`batch ${newest}: missing from the store.*truncated tail`));
    const json = JSON.parse((await audit('--anchor', anchorFile, '--json')).stdout) as {
      anchor: { findings: { kind: string; batchNo: number }[] };
    };
    assert.deepEqual(json.anchor.findings, [
      {
        kind: 'truncated',
        batchNo: newest,
        fields: [],
        anchorRoot: JSON.parse(readFileSync(anchorFile, 'utf8')).batches.at(-1).root,
      },
    ]);
  });

  it('names a batch re-sealed over a rewritten entry with our own TSA; the publisher refuses to go on', async () => {
    const target = (await store.journal.batches(3, 1))[0]!;
    const seq = target.leaves.at(-1)!.seq;
    const rewritten = encodeEntry({ kind: 'test.note', ref: null, at: new Date(), data: { label: 'forged' } });
    sql('UPDATE journal_entries SET body = ?, leaf_hash = ? WHERE seq = ?', rewritten.body, rewritten.leafHash, seq);
    sql('DELETE FROM journal_batches WHERE batch_no >= 3');
    const head = (
      await git('--git-dir', join(env.dataDir, 'journal-anchor', 'batches.git'), 'rev-parse', 'main')
    ).trim();
    await env.qtsp.sealJournal(); // the re-seal, with the service's own TSA: a consistent chain again
    assert.equal((await audit()).code, 0, 'the re-sealed chain is consistent for the audit alone');

    for (const anchor of [anchorFile, clone]) {
      const result = await audit('--anchor', anchor);
      assert.equal(result.code, 1, result.output);
      assert.match(result.stdout, /batch 3: re-sealed: the store's [a-zA-Z, ]*root[a-zA-Z, ]* differ/);
    }
    // nothing was published over the re-sealed store: the repository's branch did not move
    const after = (
      await git('--git-dir', join(env.dataDir, 'journal-anchor', 'batches.git'), 'rev-parse', 'main')
    ).trim();
    assert.equal(after, head);
    await git('-C', clone, 'pull', '--quiet', '--ff-only');
    assert.equal((await git('-C', clone, 'rev-parse', 'HEAD')).trim(), head);
  });

  it('an anchor that cannot be read or is malformed: exit 2 with its reason, no stack trace', async () => {
    const bad = (name: string, text: string) => {
      const path = join(dir, name);
      writeFileSync(path, text);
      return path;
    };
    const record = JSON.parse(readFileSync(anchorFile, 'utf8')).batches[0];
    const cases: [string, RegExp][] = [
      [join(dir, 'no-such-file.json'), /no-such-file\.json: ENOENT/],
      [bad('not-json.json', 'roots, honest'), /not JSON/],
      [bad('bad-root.json', JSON.stringify({ ...record, root: 'zz' })), /root is missing or malformed/],
      [bad('bad-list.json', JSON.stringify({ batches: [{ ...record, batchNo: -1 }] })), /batchNo is missing/],
      [bad('empty.json', JSON.stringify({ batches: [] })), /holds no batch/],
      [mkdtempSync(join(dir, 'empty-dir-')), /no batch record/],
      [`${env.qtsp.publicationUrl}/journal/nothing-here`, /HTTP 404/],
    ];
    for (const [anchor, reason] of cases) {
      const result = await audit('--anchor', anchor);
      assert.equal(result.code, 2, `${anchor}: ${result.output}`);
      assert.match(result.stderr, reason, anchor);
      assert.match(result.stderr, /^--anchor: /);
      assert.doesNotMatch(result.output, /\n\s+at /, 'no stack trace');
    }
    assert.ok(readdirSync(dir).length > 0);
  });
});
