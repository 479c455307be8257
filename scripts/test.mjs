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
// A test file whose process hangs (a deadlocked event loop cannot time itself out) is killed by the runner
// after TEST_TIMEOUT_MS and reported as cancelled, naming the file, instead of holding the run until CI's limit.
// A guard against hangs, not a speed check: generous, so a file slowed by a busy machine still finishes.
const timeoutMs = Number(process.env.TEST_TIMEOUT_MS ?? 900_000);
const concurrency = Number(process.env.TEST_CONCURRENCY ?? 2);
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', `--test-timeout=${timeoutMs}`, `--test-concurrency=${concurrency}`, ...files],
  {
    stdio: 'inherit',
    env: { ...process.env, NODE_ENV: 'test' },
  },
);
process.exit(result.status ?? 1);
