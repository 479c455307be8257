// Runs every test file under test/ with node's test runner (through tsx). `node --test test/` on Node 20
// finds no .ts file and still exits 0, so we list the files ourselves and refuse to run zero of them.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

function find(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return find(path);
    return name.endsWith('.test.ts') ? [path] : [];
  });
}

const only = process.argv.slice(2);
const files = (only.length ? only : find('test')).sort();
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
console.log(`running ${files.length} test files`);
const result = spawnSync(process.execPath, ['--import', 'tsx', '--test', ...files], {
  stdio: 'inherit',
  env: { ...process.env, NODE_ENV: 'test' },
});
process.exit(result.status ?? 1);
