/**
 * server.heapGrowthPercent (util/heap-growth.ts): the setting reaches V8. In a child process, the old
 * generation may grow by about the set percentage of the live heap before the next full collection.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ConfigError, loadConfig } from '../../../src/config/load.ts';
import { applyHeapGrowth } from '../../../src/util/heap-growth.ts';

// the probe as this file is: compiled (npm test) or TypeScript through tsx
const OWN_EXTENSION = extname(fileURLToPath(import.meta.url));
const PROBE = fileURLToPath(new URL(`../../helpers/heap-limit-probe${OWN_EXTENSION}`, import.meta.url));
const LOADER = OWN_EXTENSION === '.ts' ? ['--import', 'tsx'] : [];

async function growthBeforeFullCollection(percent: number): Promise<{ liveMb: number; grownMb: number }> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', ...LOADER, PROBE, String(percent)], {
    timeout: 60_000,
  });
  return JSON.parse(stdout) as { liveMb: number; grownMb: number };
}

// The probe sees the full collection when V8 starts it, which is when incremental marking begins, some way
// below the limit itself, and earlier on a busy machine. Measured with a 37 MB live heap, idle and with four
// busy processes on two cores (CI runs two test files at once): 400 % grew 160-216 MB (4.3-5.8x), 10 % grew
// 24-48 MB (0.6-1.3x), V8's own choice (0) 136-176 MB (3.7-4.7x). A 1.2x bound on 10 % failed in CI; these
// bounds keep a margin to what was seen, and the 10 % bound lies well below V8's own choice, so it fails if
// the flag does not reach V8.
test('the percentage reaches V8: at 10 the old generation grows less than twice the live heap before the next full collection, at 400 more than 3.5 times', async () => {
  const wide = await growthBeforeFullCollection(400);
  const narrow = await growthBeforeFullCollection(10);
  assert.ok(wide.liveMb > 20, `a live heap to grow from: ${wide.liveMb} MB`);
  assert.ok(
    narrow.grownMb < 2 * narrow.liveMb,
    `10 %: grew ${narrow.grownMb} MB on ${narrow.liveMb.toFixed(0)} MB live`,
  );
  assert.ok(wide.grownMb > 3.5 * wide.liveMb, `400 %: grew ${wide.grownMb} MB on ${wide.liveMb.toFixed(0)} MB live`);
});

test('0 leaves V8 its own choice; a negative or fractional percentage is refused', () => {
  assert.doesNotThrow(() => applyHeapGrowth(0));
  assert.throws(() => applyHeapGrowth(-1), RangeError);
  assert.throws(() => applyHeapGrowth(1.5), RangeError);
});

test('QTSP_SERVER_HEAP_GROWTH_PERCENT: default 400, set by the environment, refused out of range', () => {
  assert.equal(loadConfig({}, {}).server.heapGrowthPercent, 400);
  assert.equal(loadConfig({}, { QTSP_SERVER_HEAP_GROWTH_PERCENT: '0' }).server.heapGrowthPercent, 0);
  assert.throws(() => loadConfig({}, { QTSP_SERVER_HEAP_GROWTH_PERCENT: '-5' }), ConfigError);
  assert.throws(() => loadConfig({}, { QTSP_SERVER_HEAP_GROWTH_PERCENT: 'lots' }), ConfigError);
});
