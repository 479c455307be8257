/**
 * server.heapGrowthPercent (util/heap-growth.ts): the setting reaches V8. In a child process, the old
 * generation may grow by about the set percentage of the live heap before the next full collection.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ConfigError, loadConfig } from '../../src/config/load.ts';
import { applyHeapGrowth } from '../../src/util/heap-growth.ts';

const PROBE = fileURLToPath(new URL('../helpers/heap-limit-probe.ts', import.meta.url));

async function growthBeforeFullCollection(percent: number): Promise<{ liveMb: number; grownMb: number }> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', '--import', 'tsx', PROBE, String(percent)], { timeout: 60_000 });
  return JSON.parse(stdout) as { liveMb: number; grownMb: number };
}

test('400 lets the old generation grow more than four times the live heap before the next full collection; 10 about a tenth', async () => {
  const wide = await growthBeforeFullCollection(400);
  const narrow = await growthBeforeFullCollection(10);
  assert.ok(wide.liveMb > 20, `a live heap to grow from: ${wide.liveMb} MB`);
  // V8 adds its young generation's capacity and a minimum step to the limit: bounds, not equalities
  assert.ok(wide.grownMb >= 4.5 * wide.liveMb, `400 %: grew ${wide.grownMb} MB on ${wide.liveMb.toFixed(0)} MB live`);
  assert.ok(narrow.grownMb <= 1.2 * narrow.liveMb, `10 %: grew ${narrow.grownMb} MB on ${narrow.liveMb.toFixed(0)} MB live`);
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
