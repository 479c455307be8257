/**
 * scripts/check-functions.mjs, run by `npm run lint`: a function in src/ over 60 lines, first line to last with
 * comments and blank lines, is named with its file and line; one of 60 lines passes.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('../../../scripts/check-functions.mjs', import.meta.url));

/** a function of exactly `lines` lines: its first line, blank and comment lines, its last */
function functionOf(name: string, lines: number, shape: 'declaration' | 'arrow' | 'method'): string {
  const inner = Array.from({ length: lines - 2 }, (_, i) => (i % 2 ? '' : `  // line ${i}`)).join('\n');
  if (shape === 'arrow') return `export const ${name} = (): void => {\n${inner}\n};\n`;
  if (shape === 'method') return `export const o = {\n  ${name}() {\n${inner}\n  },\n};\n`;
  return `export function ${name}(): void {\n${inner}\n}\n`;
}

describe('scripts/check-functions.mjs', () => {
  let root: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'qtsp-check-functions-'));
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  const check = (files: Record<string, string>) => {
    const dir = mkdtempSync(join(root, 'tree-'));
    mkdirSync(join(dir, 'src', 'a'), { recursive: true });
    for (const [path, text] of Object.entries(files)) writeFileSync(join(dir, 'src', path), text);
    const res = spawnSync(process.execPath, [SCRIPT], { cwd: dir, encoding: 'utf8' });
    return { code: res.status, out: res.stdout + res.stderr };
  };

  it('passes functions of 60 lines', () => {
    const res = check({ 'a/ok.ts': functionOf('sixty', 60, 'declaration') + functionOf('arrow', 60, 'arrow') });
    assert.equal(res.code, 0, res.out);
  });

  it('names each function over 60 lines, declarations, arrows and methods alike', () => {
    const res = check({
      'a/long.ts': functionOf('tooLong', 61, 'declaration'),
      'b.ts': functionOf('longArrow', 70, 'arrow') + functionOf('longMethod', 62, 'method'),
    });
    assert.equal(res.code, 1, res.out);
    assert.match(res.out, /src\/a\/long\.ts:1 tooLong \(61 lines\)/);
    assert.match(res.out, /src\/b\.ts:1 longArrow \(70 lines\)/);
    assert.match(res.out, /src\/b\.ts:\d+ longMethod \(62 lines\)/);
  });
});
