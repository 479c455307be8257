/**
 * scripts/ensure-packages.mjs, run as `npm start` and `npm test` run it, with a PATH that hides packages
 * (the machine's own packages stay untouched): root installs the missing ones with apt-get (a stand-in apt-get
 * on that PATH records the calls and "installs" the command), anyone else is told the one command to run.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('../../scripts/ensure-packages.mjs', import.meta.url));
const asRoot = process.getuid?.() === 0;

/** a directory for PATH holding only the named commands (links to the real ones) */
function binDir(root: string, commands: string[]): string {
  const dir = join(root, 'bin');
  spawnSync('mkdir', ['-p', dir]);
  for (const c of commands) {
    const real = spawnSync('sh', ['-c', `command -v ${c}`], { encoding: 'utf8' }).stdout.trim();
    assert.ok(real, `${c} must be installed on the test machine`);
    symlinkSync(real, join(dir, c));
  }
  return dir;
}

/** apt-get stand-in: logs its arguments; `install` puts an executable for each package on the same PATH */
function fakeAptGet(dir: string, log: string): void {
  const script = [
    '#!/bin/sh',
    `echo "$@" >> ${log}`,
    'if [ "$2" = install ] || [ "$1" = install ]; then',
    '  for p in "$@"; do case "$p" in -*|install) ;; *)',
    `    printf '#!/bin/sh\\nexit 0\\n' > ${dir}/$p; /bin/chmod 755 ${dir}/$p;;`,
    '  esac; done',
    'fi',
  ].join('\n');
  writeFileSync(join(dir, 'apt-get'), `${script}\n`, { mode: 0o755 });
}

function ensure(args: string[], path: string, env: Record<string, string> = {}, user?: string) {
  const base = { PATH: path, HOME: tmpdir(), ...env };
  // spawn looks a command up on the PATH of `env`, which hides almost everything: runuser by its full path
  const cmd = user
    ? spawnSync('sh', ['-c', 'command -v runuser'], { encoding: 'utf8' }).stdout.trim()
    : process.execPath;
  const argv = user ? ['-u', user, '--', process.execPath, SCRIPT, ...args] : [SCRIPT, ...args];
  const res = spawnSync(cmd, argv, { env: base, encoding: 'utf8' });
  return { code: res.status, out: res.stdout + res.stderr };
}

/** what `npm start` needs besides Redis: git and the demo relying party's validators (by command) */
const START_TOOLS = ['git', 'openssl', 'xmlsec1', 'pdfsig', 'certutil'];

describe('scripts/ensure-packages.mjs', () => {
  let root: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'qtsp-ensure-'));
    chmodSync(root, 0o755);
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('is silent and succeeds when everything `npm test` needs is installed', () => {
    const res = ensure(['test'], process.env.PATH ?? '');
    assert.equal(res.code, 0, res.out);
    assert.equal(res.out, '');
  });

  it('--check names the missing package and the one command to run, and installs nothing', () => {
    const dir = binDir(join(root, 'check'), START_TOOLS);
    const log = join(root, 'check', 'apt.log');
    fakeAptGet(dir, log);
    const res = ensure(['start', '--check'], dir);
    assert.equal(res.code, 1);
    assert.match(res.out, /redis-server: local Redis/);
    assert.match(res.out, /apt-get update && apt-get install -y --no-install-recommends redis-server\n/);
    assert.throws(() => readFileSync(log), /ENOENT/);
  });

  it('`npm start` needs the validators the demo relying party runs', () => {
    const dir = binDir(join(root, 'validators'), ['git', 'redis-server', 'openssl']);
    const res = ensure(['start', '--check'], dir);
    assert.equal(res.code, 1);
    assert.match(res.out, /apt-get install -y --no-install-recommends xmlsec1 poppler-utils libnss3-tools\n/);
  });

  it('`npm run test:ha` needs Patroni and etcd besides what `npm test` needs; `npm test` does not', () => {
    const dir = binDir(join(root, 'ha'), START_TOOLS);
    const ha = ensure(['ha', '--check'], dir);
    assert.equal(ha.code, 1);
    assert.match(ha.out, /etcd-server: test:ha/);
    assert.match(ha.out, /patroni: test:ha/);
    assert.match(ha.out, /apt-get install -y --no-install-recommends .*etcd-server patroni/);
    const test = ensure(['test', '--check'], dir);
    assert.equal(test.code, 1);
    assert.doesNotMatch(test.out, /patroni|etcd/);
  });

  it('`npm start` needs no redis-server when REDIS_URL names a Redis', () => {
    const dir = binDir(join(root, 'redis-url'), START_TOOLS);
    const res = ensure(['start', '--check'], dir, { REDIS_URL: 'redis://127.0.0.1:6379' });
    assert.equal(res.code, 0, res.out);
  });

  it('`npm start` with the sandbox HSM switch needs SoftHSM2 too', () => {
    const dir = binDir(join(root, 'softhsm'), [...START_TOOLS, 'redis-server']);
    const res = ensure(['start', '--check'], dir, { QTSP_KEYS_PROVIDER: 'softhsm' });
    assert.equal(res.code, 1);
    assert.match(res.out, /apt-get install -y --no-install-recommends softhsm2\n/);
  });

  it('as root: apt-get update, then apt-get install of exactly what is missing, then it is there', {
    skip: !asRoot && 'needs root',
  }, () => {
    const dir = binDir(join(root, 'root'), START_TOOLS);
    const log = join(root, 'root', 'apt.log');
    fakeAptGet(dir, log);
    const res = ensure(['start'], dir);
    assert.equal(res.code, 0, res.out);
    assert.deepEqual(readFileSync(log, 'utf8').trim().split('\n'), [
      'update -q',
      '-q install -y --no-install-recommends redis-server',
    ]);
    const again = ensure(['start'], dir);
    assert.equal(again.code, 0, again.out);
    assert.equal(again.out, '', 'installed: nothing more to do');
  });

  it('as root: an apt-get that does not deliver the package is an error', { skip: !asRoot && 'needs root' }, () => {
    const dir = binDir(join(root, 'broken'), START_TOOLS);
    writeFileSync(join(dir, 'apt-get'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
    const res = ensure(['start'], dir);
    assert.equal(res.code, 1);
    assert.match(res.out, /still missing after apt-get install: redis-server/);
  });

  it('not root: prints the command to run and exits non-zero, without calling apt-get', () => {
    const dir = binDir(join(root, 'user'), START_TOOLS);
    const log = join(root, 'user', 'apt.log');
    fakeAptGet(dir, log);
    // as root the script runs as `nobody`; otherwise we already are an ordinary user
    const res = ensure(['start'], dir, {}, asRoot ? 'nobody' : undefined);
    assert.equal(res.code, 1, res.out);
    assert.match(
      res.out,
      /install them with \(as root\):\n {2}apt-get update && apt-get install -y --no-install-recommends redis-server/,
    );
    assert.throws(() => readFileSync(log), /ENOENT/);
  });

  it('an unknown command is a usage error', () => {
    const res = ensure(['deploy'], process.env.PATH ?? '');
    assert.equal(res.code, 2);
    assert.match(res.out, /usage/);
  });
});
