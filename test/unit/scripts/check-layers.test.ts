/**
 * scripts/check-layers.mjs (run by `npm test`) fails on the cycles it exists for, naming them, and passes on
 * src/. A check that cannot fail would prove nothing, so it is run here on small trees that have each cycle.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

function check(files: Record<string, string>): { status: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), 'check-layers-'));
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    const run = spawnSync(process.execPath, ['scripts/check-layers.mjs', dir], { encoding: 'utf8' });
    return { status: run.status, output: run.stdout + run.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('src/ has no import cycle', () => {
  const run = spawnSync(process.execPath, ['scripts/check-layers.mjs'], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
});

test('two folders importing each other fail, by `import type` and `export ... from` too', () => {
  const run = check({
    'a/x.ts': "import type { Y } from '../b/y.ts';\nexport type X = Y;\n",
    'b/y.ts': "export { x } from '../a/z.ts';\nexport type Y = string;\n",
    'a/z.ts': 'export const x = 1;\n',
  });
  assert.equal(run.status, 1);
  assert.match(run.output, /folders import each other: a -> b -> a/);
});

test('a cycle through three folders fails', () => {
  const run = check({
    'a/a.ts': "import '../b/b.ts';\n",
    'b/b.ts': "import '../c/c.ts';\n",
    'c/c.ts': "const m = await import('../a/a.ts');\nexport { m };\n",
  });
  assert.equal(run.status, 1);
  assert.match(run.output, /folders import each other: a -> b -> c -> a/);
});

test('files of one folder importing each other fail; a top-level file is a unit of its own', () => {
  const run = check({
    'top.ts': "import { b } from './a/b.ts';\nexport const top = b;\n",
    'bottom.ts': 'export const bottom = 1;\n',
    'a/b.ts': "import { bottom } from '../bottom.ts';\nimport { c } from './c.ts';\nexport const b = bottom + c;\n",
    'a/c.ts': "import type { b } from './b.ts';\nexport const c = 2;\nexport type B = typeof b;\n",
  });
  assert.equal(run.status, 1);
  assert.match(run.output, /files import each other: a\/b\.ts -> a\/c\.ts -> a\/b\.ts/);
  assert.doesNotMatch(run.output, /folders import each other/);
});

test('one-way imports pass', () => {
  const run = check({
    'a/a.ts': "import { b } from '../b/b.ts';\nexport const a = b;\n",
    'b/b.ts': "import { c } from './c.ts';\nexport const b = c;\n",
    'b/c.ts': 'export const c = 1;\n',
  });
  assert.equal(run.status, 0, run.output);
});
