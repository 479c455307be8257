// Runs every test file under test/ with node's test runner, from a compiled copy of the tree.
//
// Compiled, so that no test process transpiles the sources or starts tsx's module-hooks thread on each load:
// tsc (tsconfig.test.json) emits src/, test/ and the bench modules the tests import as JavaScript into
// .test-build/, and every other file of the repository (the .ts sources too) is linked there at the same
// relative place, so a path a test or module builds from import.meta.url finds what it finds in the checkout.
// bin/ is copied instead, so that bin/qtsp.js there runs the emitted modules: the qtsp processes tests start
// run compiled too, except those that test `npm start` itself.
//
// `node --test test/` on Node 20 finds no file and still exits 0, so we list the files ourselves and refuse
// to run zero of them.
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { spawnSync } from 'node:child_process';

const TREE = '.test-build';
/** top-level folders tsc emits into the tree (tsconfig.test.json), mirrored file by file */
const EMITTED = new Set(['src', 'test', 'bench']);
/** never linked: the repository's history and the tree itself */
const SKIP = new Set(['.git', TREE]);
/** copied, not linked: node runs a linked main module from where the link points */
const COPIED = new Set(['bin']);

/**
 * run only when named: test/container needs podman and builds images (`npm run test:container`); test/ha runs a
 * Patroni cluster, Sentinel and failovers under load (`npm run test:ha`)
 */
const ON_REQUEST = new Set([join('test', 'container'), join('test', 'ha')]);

function find(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (ON_REQUEST.has(path)) return [];
    if (statSync(path).isDirectory()) return find(path);
    return name.endsWith('.test.ts') ? [path] : [];
  });
}

/** a relative symlink at the same place in the tree, unless tsc wrote a file there */
function link(path) {
  const at = join(TREE, path);
  if (lstatSync(at, { throwIfNoEntry: false })) return;
  mkdirSync(dirname(at), { recursive: true });
  symlinkSync(relative(dirname(at), path), at);
}

function mirror(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) mirror(path);
    else link(path);
  }
}

function buildTree() {
  rmSync(TREE, { recursive: true, force: true });
  const tsc = spawnSync(join('node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.test.json'], { stdio: 'inherit' });
  if (tsc.status !== 0) {
    console.error('tsc -p tsconfig.test.json failed');
    process.exit(tsc.status ?? 1);
  }
  for (const entry of readdirSync('.', { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    if (EMITTED.has(entry.name) && entry.isDirectory()) mirror(entry.name);
    else if (COPIED.has(entry.name)) cpSync(entry.name, join(TREE, entry.name), { recursive: true });
    else link(entry.name);
  }
}

const only = process.argv.slice(2);
const files = (only.length ? only : find('test')).sort();
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
buildTree();
const compiled = files.map((file) => join(TREE, file.replace(/\.ts$/, '.js')));
const missing = compiled.filter((file) => !existsSync(file));
if (missing.length > 0) {
  console.error(`not compiled (outside test/?): ${missing.join(', ')}`);
  process.exit(1);
}
console.log(`running ${files.length} test files`);
// A test file whose process hangs (a deadlocked event loop cannot time itself out) is killed by the runner
// after TEST_TIMEOUT_MS and reported as cancelled, naming the file, instead of holding the run until CI's limit.
// A guard against hangs, not a speed check: generous, so a file slowed by a busy machine still finishes.
const timeoutMs = Number(process.env.TEST_TIMEOUT_MS ?? 900_000);
const concurrency = Number(process.env.TEST_CONCURRENCY ?? 2);
const result = spawnSync(
  process.execPath,
  ['--enable-source-maps', '--test', `--test-timeout=${timeoutMs}`, `--test-concurrency=${concurrency}`, ...compiled],
  {
    stdio: 'inherit',
    env: { ...process.env, NODE_ENV: 'test' },
  },
);
process.exit(result.status ?? 1);
