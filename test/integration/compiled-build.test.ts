/**
 * `npm run build` and the compiled `qtsp`, laid out as the container image has it (docker/Dockerfile): a copy
 * of package.json, tsconfig*.json and src/ is built into dist/, then src/ is removed, so nothing can fall back
 * to the sources through tsx. From the build: `qtsp --help`, `qtsp pki init` (the custody registry finds its
 * backends), `qtsp serve` ready on /health/ready (the SQLite writer and checkpoint threads, the RSA key
 * threads, openapi.yaml), `qtsp sign` through the whole flow against it (openssl verifies the signature), and
 * `qtsp worker` delivering.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pkiPaths } from '../../src/ca/material.ts';
import { run, opensslCmsVerify } from '../helpers/openssl.ts';
import { waitFor } from '../helpers/delivery.ts';
import { spawnServe, startSharedPartsOnFreePorts, type ServeProcess, type SharedParts } from '../helpers/instances.ts';

// the checkout itself, also when this file runs from the tree `npm test` compiles (scripts/test.mjs links
// package.json there)
const REPO = dirname(realpathSync(fileURLToPath(new URL('../../package.json', import.meta.url))));

function exec(
  cmd: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { ...options, encoding: 'utf8', maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** every file under dir, relative to it */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
}

/**
 * The image's /app: package.json, openapi.yaml, bin/, node_modules and dist/ built from a copy of src/; the
 * modules of that copy (relative to src/).
 */
async function buildLikeTheImage(app: string): Promise<string[]> {
  for (const f of ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'openapi.yaml'])
    copyFileSync(join(REPO, f), join(app, f));
  cpSync(join(REPO, 'src'), join(app, 'src'), { recursive: true });
  cpSync(join(REPO, 'bin'), join(app, 'bin'), { recursive: true });
  symlinkSync(join(REPO, 'node_modules'), join(app, 'node_modules'), 'dir');
  const build = await exec('npm', ['run', '-s', 'build'], { cwd: app });
  assert.equal(build.code, 0, build.stdout + build.stderr);
  const sources = filesUnder(join(app, 'src'));
  rmSync(join(app, 'src'), { recursive: true });
  return sources;
}

describe('the compiled build (npm run build)', () => {
  let app: string;
  let sources: string[];
  let qtsp: string;
  let shared: SharedParts;
  let port: number;
  let publicationPort: number;
  const started: ServeProcess[] = [];

  before(async () => {
    app = mkdtempSync(join(tmpdir(), 'qtsp-compiled-'));
    qtsp = join(app, 'bin', 'qtsp.js');
    sources = await buildLikeTheImage(app);
    ({ shared, port, publicationPort } = await startSharedPartsOnFreePorts());
  });
  after(async () => {
    for (const s of started) if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
    await shared?.close();
    rmSync(app, { recursive: true, force: true });
  });

  it('emits JavaScript for every module of src/, with import specifiers ending in .js', () => {
    const emitted = filesUnder(join(app, 'dist'));
    assert.ok(sources.includes(join('cli', 'main.ts')));
    assert.deepEqual(
      emitted.filter((f) => f.endsWith('.js')).sort(),
      sources
        .filter((f) => f.endsWith('.ts'))
        .map((f) => f.replace(/\.ts$/, '.js'))
        .sort(),
    );
    assert.deepEqual(
      emitted.filter((f) => f.endsWith('.ts')),
      [],
    );
    const main = readFileSync(join(app, 'dist', 'cli', 'main.js'), 'utf8');
    // each command's module is imported when it runs: `import('./serve.js')`, rewritten like a static import
    assert.match(main, /(from |import\()'\.\/serve\.js'/);
    assert.doesNotMatch(main, /(from |import\()'[^']+\.ts'/);
  });

  it('qtsp --help and qtsp pki init run from the build', async () => {
    const help = await exec(process.execPath, [qtsp, '--help']);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /qtsp serve/);
    const dataDir = join(app, 'pki-init');
    const init = await exec(process.execPath, [
      join(app, 'dist', 'cli', 'main.js'),
      'pki',
      'init',
      '--data-dir',
      dataDir,
    ]);
    assert.equal(init.code, 0, init.stderr);
    assert.match(init.stdout, /created CA material/);
    const pki = pkiPaths(dataDir);
    const chain = await run('openssl', ['verify', '-CAfile', pki.rootCert, pki.issuingCert]);
    assert.ok(chain.ok, chain.output);
  });

  it('qtsp serve from the build gets ready and signs; qtsp sign and qtsp worker run from the build', async () => {
    const env = shared.instanceEnv('compiled', {
      port,
      publicationPort,
      extra: { QTSP_SIGNER_RSA_POOL_SIZE: '1' },
    });
    const serve = await spawnServe(env, qtsp);
    started.push(serve);
    await waitFor(
      'the compiled qtsp serve to be ready',
      async () => {
        const res = await fetch(`${serve.opsUrl}/health/ready`);
        await res.arrayBuffer();
        return res.status === 200;
      },
      60_000,
      200,
    );

    const work = join(app, 'sign');
    mkdirSync(work);
    copyFileSync(join(REPO, 'fixtures', 'documents', 'contract.txt'), join(work, 'contract.txt'));
    const file = join(work, 'contract.txt');
    const sign = await exec(process.execPath, [qtsp, 'sign', file, '--data-dir', join(shared.root, 'shared')]);
    assert.equal(sign.code, 0, sign.stdout + sign.stderr + serve.output().slice(-3000));
    const verified = await opensslCmsVerify(readFileSync(`${file}.p7s`), readFileSync(file), shared.rootCaFile);
    assert.ok(verified.ok, verified.output);

    const worker = startFromBuild(['worker'], shared.instanceEnv('compiled-worker', { port: 0, publicationPort: 0 }));
    try {
      await waitFor(
        'the compiled qtsp worker to deliver',
        () => /qtsp worker delivering/.test(worker.output()),
        60_000,
      );
    } finally {
      worker.child.kill('SIGTERM');
    }
    assert.equal(await worker.exited, 0, worker.output());

    serve.child.kill('SIGTERM');
    assert.deepEqual(await serve.exited, { code: 0, signal: null }, serve.output().slice(-3000));
    assert.ok(!existsSync(join(app, 'src')), 'the sources were gone all along');
  });

  /** `qtsp <args>` of the build as a child process with exactly `env` (plus PATH and HOME), its output collected */
  function startFromBuild(args: readonly string[], env: Record<string, string>) {
    const base = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir() };
    const child = spawn(process.execPath, [qtsp, ...args], {
      env: { ...base, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | string>((resolve) =>
      child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)),
    );
    return { child, output: () => out, exited };
  }
});
