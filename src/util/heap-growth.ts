/**
 * server.heapGrowthPercent (config/schema.ts says why): V8's --heap-growing-percent, set on the running
 * isolate. V8 reads it each time a full collection recomputes the heap's limit, so setting it at start, before
 * any load, governs every full collection of the serving process. Process-wide, so only the commands that
 * are the serving process (`qtsp serve` and its cluster workers) call this; a library user's process is left
 * as it is.
 */
import { setFlagsFromString } from 'node:v8';

export function applyHeapGrowth(percent: number): void {
  if (!Number.isInteger(percent) || percent < 0)
    throw new RangeError(`heap growth percent must be a non-negative integer, not ${percent}`);
  if (percent === 0) return; // V8's own adaptive growth
  setFlagsFromString(`--heap-growing-percent=${percent}`);
}
