/**
 * Waiting for a pool of never-used keys (src/custody/key-pool.ts) to fill, by watching the counts it exposes:
 * tests and benchmarks that must start from a warm pool.
 */
import type { KeyPool } from '../../src/custody/key-pool.ts';

/** Resolves once the pool holds `count` ready keys (default: as many as it keeps). */
export async function untilHolds(pool: Pick<KeyPool<unknown>, 'size' | 'stats'>, count = pool.size): Promise<void> {
  const wanted = Math.min(count, pool.size);
  while (pool.stats().ready < wanted) await new Promise((resolve) => setTimeout(resolve, 20));
}
