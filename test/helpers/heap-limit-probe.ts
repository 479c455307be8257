/**
 * Child process of test/unit/heap-growth.test.ts (node --expose-gc): applies server.heapGrowthPercent (argv[2]),
 * keeps a live heap, collects it fully, then grows the old generation 1 MB at a time (arrays of that size go
 * straight to the large-object space) until the next full collection starts. How far it grew follows the limit
 * V8 set after the first collection (it starts the next one somewhat below that limit, when incremental
 * marking begins). Prints {liveMb, grownMb} as JSON.
 */
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { applyHeapGrowth } from '../../src/util/heap-growth.ts';
applyHeapGrowth(Number(process.argv[2]));
const live: unknown[] = [];
for (let i = 0; i < 400_000; i++) live.push({ i, s: `live ${i}` });
(globalThis as { gc?: () => void }).gc!(); // the limit is recomputed from this collection's survivors
const liveMb = process.memoryUsage().heapUsed / 2 ** 20;
let majors = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries())
    if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR)
      majors++;
}).observe({ entryTypes: ['gc'] });
const grown: number[][] = [];
let grownMb = 0;
while (majors === 0 && grownMb < 2000) {
  grown.push(new Array(131_072).fill(1.5)); // 1 MB each, straight into the old generation (large-object space)
  grownMb += 1;
  if (grownMb % 8 === 0) await new Promise((r) => setImmediate(r)); // let the observer see a collection
}
process.stdout.write(`${JSON.stringify({ liveMb, grownMb, kept: live.length + grown.length })}\n`);
