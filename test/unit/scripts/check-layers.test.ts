/**
 * scripts/check-layers.mjs (run by `npm test`) enforces the layer picture of docs/architecture.md. A check that
 * cannot fail would prove nothing, so each rule is broken here on purpose: on small trees with a picture of their
 * own, and on a copy of src/ with the real picture.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';

const PICTURE = [
  '# Layers',
  '<!-- layers: checked by scripts/check-layers.mjs -->',
  '```text',
  '  +--------------------------+',
  '  | top.ts                   |',
  '  +--------------------------+',
  '  | a/          b/           |',
  '  +--------------------------+',
  '  | plug/*/                  |',
  '  +--------------------------+',
  '  | plug/       c/           |',
  '  +--------------------------+',
  '  | bottom.ts                |',
  '  +--------------------------+',
  '```',
  '',
].join('\n');

function run(args: string[]): { status: number | null; output: string } {
  const result = spawnSync(process.execPath, ['scripts/check-layers.mjs', ...args], { encoding: 'utf8' });
  return { status: result.status, output: result.stdout + result.stderr };
}

/** Runs the check on a tree of `files` (paths under src/) with PICTURE as its layer document. */
function check(files: Record<string, string>): { status: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), 'check-layers-'));
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, 'src', path)), { recursive: true });
      writeFileSync(join(dir, 'src', path), text);
    }
    writeFileSync(join(dir, 'layers.md'), PICTURE);
    return run([join(dir, 'src'), join(dir, 'layers.md')]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('src/ follows the picture of docs/architecture.md', () => {
  const result = run([]);
  assert.equal(result.status, 0, result.output);
});

test('an import of src/sandbox/ from src/signing/ is refused, with the real picture', () => {
  const dir = mkdtempSync(join(tmpdir(), 'check-layers-src-'));
  try {
    cpSync('src', join(dir, 'src'), { recursive: true });
    appendFileSync(
      join(dir, 'src/signing/sign-doc.ts'),
      "\nexport type Leak = typeof import('../sandbox/index.ts');\n",
    );
    const result = run([join(dir, 'src'), 'docs/architecture.md']);
    assert.equal(result.status, 1, result.output);
    assert.match(
      result.output,
      /signing\/sign-doc\.ts imports sandbox\/index\.ts: signing\/ may import only rows below/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an import of the error body (src/errors.ts) below signing/ is refused, with the real picture', () => {
  const dir = mkdtempSync(join(tmpdir(), 'check-layers-src-'));
  try {
    cpSync('src', join(dir, 'src'), { recursive: true });
    appendFileSync(join(dir, 'src/timestamping/tsa.ts'), "\nexport { badGateway } from '../errors.ts';\n");
    const result = run([join(dir, 'src'), 'docs/architecture.md']);
    assert.equal(result.status, 1, result.output);
    assert.match(
      result.output,
      /timestamping\/tsa\.ts imports errors\.ts: timestamping\/ is below signing\/, so it throws domain errors/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('imports down the rows pass, by every kind of specifier', () => {
  const result = check({
    'top.ts': "import { a } from './a/a.ts';\nexport const top = a;\n",
    'a/a.ts': "import type { C } from '../c/c.ts';\nexport { bottom as a } from '../bottom.ts';\nexport type A = C;\n",
    'c/c.ts': "const m = await import('../bottom.ts');\nexport type C = typeof m;\n",
    'bottom.ts': 'export const bottom = 1;\n',
  });
  assert.equal(result.status, 0, result.output);
});

test('an import of a row above fails, naming the file, the target and both units', () => {
  const result = check({
    'c/c.ts': "import type { A } from '../a/a.ts';\nexport type C = A;\n",
    'a/a.ts': 'export type A = string;\n',
  });
  assert.equal(result.status, 1);
  assert.match(
    result.output,
    /c\/c\.ts imports a\/a\.ts: c\/ may import only rows below it, and a\/ is in a row above it/,
  );
});

test('an import within the same row fails', () => {
  const result = check({
    'a/a.ts': "export { b } from '../b/b.ts';\n",
    'b/b.ts': 'export const b = 1;\n',
  });
  assert.equal(result.status, 1);
  assert.match(
    result.output,
    /a\/a\.ts imports b\/b\.ts: a\/ may import only rows below it, and b\/ is in its own row/,
  );
});

test('a worker entry written as new URL(..., import.meta.url) counts as an import', () => {
  const result = check({
    'c/c.ts': "export const entry = new URL('../a/thread.ts', import.meta.url);\n",
    'a/thread.ts': 'export {};\n',
  });
  assert.equal(result.status, 1);
  assert.match(result.output, /c\/c\.ts imports a\/thread\.ts/);
});

test('a unit without a row fails', () => {
  const result = check({ 'stray/x.ts': 'export const x = 1;\n' });
  assert.equal(result.status, 1);
  assert.match(result.output, /stray\/ has no row in the layer picture/);
});

test('a backend folder (plug/*/) is imported by nobody outside itself, its siblings included', () => {
  const result = check({
    'plug/registry.ts': "export const load = (name: string) => import(['.', name, 'backend.ts'].join('/'));\n",
    'plug/one/backend.ts':
      "import { load } from '../registry.ts';\nimport { own } from './own.ts';\nexport { load, own };\n",
    'plug/one/own.ts': 'export const own = 1;\n',
    'plug/two/backend.ts': "export { own } from '../one/own.ts';\n",
    'a/a.ts': "export { own } from '../plug/one/own.ts';\n",
  });
  assert.equal(result.status, 1);
  assert.match(result.output, /plug\/two\/backend\.ts imports plug\/one\/own\.ts: plug\/\*\/ backends are loaded/);
  assert.match(result.output, /a\/a\.ts imports plug\/one\/own\.ts: plug\/\*\/ backends are loaded/);
  assert.doesNotMatch(result.output, /plug\/one\/backend\.ts imports/);
  assert.doesNotMatch(result.output, /imports plug\/registry\.ts/);
});

test('files of one unit importing each other in a circle fail', () => {
  const result = check({
    'a/b.ts': "import { c } from './c.ts';\nexport const b = c;\n",
    'a/c.ts': "import type { b } from './b.ts';\nexport const c = 2;\nexport type B = typeof b;\n",
  });
  assert.equal(result.status, 1);
  assert.match(result.output, /files import each other: a\/b\.ts -> a\/c\.ts -> a\/b\.ts/);
});
