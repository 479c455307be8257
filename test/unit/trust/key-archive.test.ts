/**
 * The long-term public key archive (spec 4.7) over real smart HTTP (the sandbox's `git http-backend` behind
 * its CGI bridge, HTTPS) and real git objects: clone, signed updates, and every update we must refuse as a
 * whole. GnuPG with git is the independent oracle for the commit signatures, in both directions.
 */
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import { tlsAgent, type HttpAgent } from '../../../src/util/http-client.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import git from 'isomorphic-git';
import { decodeProtectedHeader } from 'jose';
import type * as openpgp from 'openpgp';
import { pino } from 'pino';
import type { Sandbox } from '../../../src/sandbox/index.ts';
import { keyArchivePaths } from '../../../src/sandbox/key-archive/repository.ts';
import { loadOrCreateOperatorSigner } from '../../../src/sandbox/key-archive/signer.ts';
import {
  archiveFileName,
  KeyArchive,
  keySetAt,
  loadSignerKeys,
  verifyCommitSignature,
  VERIFIED_REF,
} from '../../../src/trust/key-archive.ts';
import type { Logger } from '../../../src/util/logger.ts';
import { startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';

const QTSP_ID = 'sp:sandbox.qtsp.localhost:6f1c4c52-0b0e-4c4e-9d6b-2b9b8f0d7a31';

let started: TestSandbox;
let dataDir: string;
let sandbox: Sandbox;
let agent: HttpAgent;
let signerKeys: openpgp.PublicKey[];
let logs: Record<string, unknown>[] = [];
const logger = pino(
  { level: 'info' },
  { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) },
) as unknown as Logger;
let n = 0;

function run(
  cmd: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string } = {},
): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      cmd,
      args,
      { cwd: options.cwd, env: { ...process.env, ...options.env }, encoding: 'utf8' },
      (err, stdout, stderr) => {
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: stdout + stderr });
      },
    );
    if (options.input !== undefined) child.stdin!.end(options.input);
  });
}

async function openArchive(gitdir = join(dataDir, `clone-${++n}`), url = sandbox.keyArchiveUrl): Promise<KeyArchive> {
  return KeyArchive.open({ url, gitdir, signerKeys, agent, timeoutMs: 5000, pullIntervalMs: 0, logger });
}

async function currentKid(): Promise<string> {
  return decodeProtectedHeader(await sandbox.mintAccessToken({})).kid!;
}

const sandboxGitdir = () => keyArchivePaths(join(dataDir, 'sandbox')).gitdir;

before(async () => {
  started = await startTestSandbox('qtsp-archive-', QTSP_ID);
  ({ dataDir, sandbox } = started);
  agent = tlsAgent({ ca: fs.readFileSync(sandbox.tlsCaFile) });
  signerKeys = await loadSignerKeys(sandbox.keyArchiveSignerKeyFile);
});

after(async () => {
  agent?.destroy();
  await started?.close();
});

afterEach(async () => {
  await sandbox.controls.reset();
  logs = [];
});

describe('key archive: clone and signed updates', () => {
  it('clones over smart HTTP; HEAD holds the JWK Set of each active IDP under its URL-encoded issuer', async () => {
    const archive = await openArchive();
    assert.deepEqual(archive.readiness().ready, false, 'no verified state before the first pull');
    const outcome = await archive.pull();
    assert.equal(outcome.status, 'updated');
    assert.equal(archive.verifiedHead(), await sandbox.controls.keyArchive.head());
    const { tree } = await git.readTree({ fs, gitdir: archive.gitdir, oid: archive.verifiedHead()! });
    assert.deepEqual(
      tree.map((e) => e.path),
      sandbox.banks.map((b) => archiveFileName(b.issuer)).sort(),
    );
    assert.match(tree[0]!.path, /^https%3A%2F%2F127\.0\.0\.1%3A\d+$/);
    const found = archive.key(sandbox.issuer, await currentKid());
    assert.ok(found, 'the AS key is in the archive');
    assert.equal(found.commit, archive.verifiedHead());
    assert.equal(archive.key(sandbox.issuer, 'no-such-kid'), undefined);
    assert.deepEqual(archive.readiness(), { ready: true, reasons: [] });
    assert.equal((await archive.pull()).status, 'unchanged');
  });

  it('a key rotation is a new signed commit: the pull moves HEAD, names the issuer, and history keeps the old key', async () => {
    const archive = await openArchive();
    await archive.pull();
    const before = archive.verifiedHead()!;
    const oldKid = await currentKid();
    const changes: (readonly string[])[] = [];
    archive.onChange((issuers) => changes.push(issuers));
    const newKid = await sandbox.controls.rotateAsKey({ keepOld: false });
    const outcome = await archive.pull();
    assert.equal(outcome.status, 'updated');
    assert.deepEqual(changes, [[sandbox.issuer]]);
    assert.ok(archive.key(sandbox.issuer, newKid));
    assert.equal(archive.key(sandbox.issuer, oldKid), undefined, 'the removed key is gone from HEAD');
    assert.ok((await keySetAt(archive.gitdir, before, sandbox.issuer))?.has(oldKid), 'and still in history');
  });
});

describe('key archive: updates refused as a whole', () => {
  it('a commit signed with a foreign key, an unsigned one, and a good commit on top of them: all refused, the last good state serves', async () => {
    const archive = await openArchive();
    await archive.pull();
    const good = archive.verifiedHead()!;
    const kid = await currentKid();

    const foreign = await sandbox.controls.keyArchive.commit({ signedBy: 'foreign', addForeignKey: true });
    let outcome = await archive.pull();
    assert.equal(outcome.status, 'refused');
    assert.match(
      (outcome as { reason: string }).reason,
      new RegExp(`commit ${foreign.commit} is not signed by the operating party's key`),
    );
    assert.equal(archive.verifiedHead(), good);
    assert.equal(await git.resolveRef({ fs, gitdir: archive.gitdir, ref: VERIFIED_REF }), good, 'our ref did not move');
    assert.equal(archive.key(sandbox.issuer, foreign.foreignKid!), undefined, 'the slipped-in key is not trusted');
    assert.ok(archive.key(sandbox.issuer, kid), 'the previous key keeps working');
    const ready = archive.readiness();
    assert.equal(ready.ready, true, 'the last good state keeps serving');
    assert.match(ready.reasons.join('\n'), new RegExp(`security event: update to ${foreign.commit} refused`));
    const event = logs.find((l) => l['event'] === 'security.key_archive_refused');
    assert.ok(event, 'a security event was logged');
    assert.equal(event['level'], 50);
    assert.equal(event['kept_head'], good);

    const unsigned = await sandbox.controls.keyArchive.commit({ signedBy: 'none' });
    outcome = await archive.pull();
    assert.equal(outcome.status, 'refused');
    assert.match((outcome as { reason: string }).reason, new RegExp(`commit ${unsigned.commit} is not signed$`));

    await sandbox.controls.keyArchive.commit({ signedBy: 'operator' }); // a valid commit cannot launder the bad ones below it
    outcome = await archive.pull();
    assert.equal(outcome.status, 'refused');
    assert.equal(archive.verifiedHead(), good);

    await sandbox.controls.reset(); // the operating party drops the bad commits
    outcome = await archive.pull();
    assert.ok(outcome.status === 'unchanged' || outcome.status === 'updated', JSON.stringify(outcome));
    assert.deepEqual(
      archive.readiness(),
      { ready: true, reasons: [] },
      'the refusal clears once the archive is sound again',
    );
  });

  it('a rewritten history (not a fast-forward of our verified head) is refused even when every commit is signed', async () => {
    const archive = await openArchive();
    await sandbox.controls.rotateAsKey(); // at least two commits, so the head has a parent
    await archive.pull();
    const ours = archive.verifiedHead()!;
    const gitdir = sandboxGitdir();
    const { commit } = await git.readCommit({ fs, gitdir, oid: ours });
    const paths = keyArchivePaths(join(dataDir, 'sandbox'));
    const operator = await loadOrCreateOperatorSigner(paths.signerPrivateKey, paths.signerPublicKey);
    const sibling = await git.commit({
      fs,
      gitdir,
      ref: 'refs/heads/main',
      tree: commit.tree,
      parent: commit.parent,
      message: 'rewritten\n',
      author: { name: 'someone', email: 'someone@example.org' },
      signingKey: operator.armoredPrivateKey,
      onSign: async ({ payload }) => ({ signature: await operator.sign(payload) }),
    });
    assert.equal((await verifyCommitSignature(gitdir, sibling, signerKeys)).ok, true, 'the sibling is properly signed');
    const outcome = await archive.pull();
    assert.equal(outcome.status, 'refused');
    assert.match(
      (outcome as { reason: string }).reason,
      /does not descend from our verified commit .* \(history was rewritten\)/,
    );
    assert.equal(archive.verifiedHead(), ours);
  });

  it('a local clone that no longer verifies is not used after a restart; the next good pull recovers', async () => {
    const gitdir = join(dataDir, 'clone-tampered');
    const first = await openArchive(gitdir);
    await first.pull();
    const bad = await sandbox.controls.keyArchive.commit({ signedBy: 'none', addForeignKey: true });
    assert.equal((await first.pull()).status, 'refused'); // the bad objects are now in our object store
    await git.writeRef({ fs, gitdir, ref: VERIFIED_REF, value: bad.commit, force: true }); // someone moves our ref on disk
    logs = [];
    const second = await openArchive(gitdir);
    assert.equal(second.verifiedHead(), undefined);
    assert.equal(second.key(sandbox.issuer, bad.foreignKid!), undefined);
    assert.equal(second.readiness().ready, false);
    assert.ok(logs.some((l) => l['event'] === 'security.key_archive_refused'));
    await sandbox.controls.reset();
    assert.equal((await second.pull()).status, 'updated');
    assert.equal(second.readiness().ready, true);
  });

  it('an unreachable archive: the pull fails, the verified state and readiness stay', async () => {
    const gitdir = join(dataDir, 'clone-offline');
    const online = await openArchive(gitdir);
    await online.pull();
    const head = online.verifiedHead();
    const offline = await openArchive(gitdir, 'https://127.0.0.1:9/key-archive/keys.git');
    const outcome = await offline.pull();
    assert.equal(outcome.status, 'failed');
    assert.equal(offline.verifiedHead(), head, 'the local clone still serves after a restart without the archive');
    assert.equal(offline.readiness().ready, true);
    assert.ok(logs.some((l) => l['event'] === 'key_archive.pull_failed'));
  });
});

describe('key archive: GnuPG with git as the independent oracle', () => {
  let gnupg: string;
  before(async () => {
    gnupg = fs.mkdtempSync(join(tmpdir(), 'qtsp-gnupg-'));
    const paths = keyArchivePaths(join(dataDir, 'sandbox'));
    const imported = await run('gpg', ['--batch', '--import', paths.signerPrivateKey], { env: { GNUPGHOME: gnupg } });
    assert.equal(imported.code, 0, imported.output);
  });
  after(() => fs.rmSync(gnupg, { recursive: true, force: true }));

  it('git verify-commit accepts the sandbox commits and rejects one signed with a foreign key', async () => {
    const gitdir = sandboxGitdir();
    const good = await run('git', ['--git-dir', gitdir, 'verify-commit', (await sandbox.controls.keyArchive.head())!], {
      env: { GNUPGHOME: gnupg },
    });
    assert.equal(good.code, 0, good.output);
    assert.match(good.output, /Good signature/);
    const foreign = await sandbox.controls.keyArchive.commit({ signedBy: 'foreign' });
    const bad = await run('git', ['--git-dir', gitdir, 'verify-commit', foreign.commit], { env: { GNUPGHOME: gnupg } });
    assert.notEqual(bad.code, 0, bad.output);
  });

  it('our verifier accepts a commit made by `git commit -S` with GnuPG, and rejects it once altered (as gpg does)', async () => {
    const env = {
      GNUPGHOME: gnupg,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@example.org',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@example.org',
    };
    const work = join(dataDir, 'gpg-work');
    assert.equal((await run('git', ['init', '-q', '-b', 'main', work], { env })).code, 0);
    fs.writeFileSync(join(work, archiveFileName(sandbox.issuer)), '{"keys":[]}\n');
    await run('git', ['add', '.'], { cwd: work, env });
    const fingerprint = (await loadSignerKeys(sandbox.keyArchiveSignerKeyFile))[0]!.getFingerprint().toUpperCase();
    const committed = await run(
      'git',
      ['-c', `user.signingkey=${fingerprint}`, 'commit', '-q', '-S', '-m', 'signed by gpg'],
      { cwd: work, env },
    );
    assert.equal(committed.code, 0, committed.output);
    const gitdir = join(work, '.git');
    const oid = (await run('git', ['rev-parse', 'HEAD'], { cwd: work })).output.trim();
    const check = await verifyCommitSignature(gitdir, oid, signerKeys);
    assert.equal(check.ok, true, JSON.stringify(check));

    const raw = (await run('git', ['cat-file', 'commit', oid], { cwd: work })).output;
    const altered = (
      await run('git', ['hash-object', '-t', 'commit', '-w', '--stdin'], {
        cwd: work,
        input: raw.replace('signed by gpg', 'signed by gpq'),
      })
    ).output.trim();
    assert.match(altered, /^[0-9a-f]{40}$/);
    assert.notEqual(
      (await run('git', ['verify-commit', altered], { cwd: work, env })).code,
      0,
      'gpg rejects the altered commit',
    );
    const ours = await verifyCommitSignature(gitdir, altered, signerKeys);
    assert.equal(ours.ok, false, 'and so do we');
  });
});
