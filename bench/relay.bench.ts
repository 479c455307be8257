/**
 * What the outbox relay costs the process that signs: `node --import tsx bench/relay.bench.ts`.
 *
 * A real SQLite store and a local redis-server, no delivery worker. CONCURRENCY loops each write one outbox
 * entry the size of a mediation record (a durable write, as signDoc's step 10) and then pause, for a given
 * rate; the relay runs as in `qtsp serve`. Rows, alternating within one process so the machine's drift hits
 * each alike:
 *   no relay       the writes alone: the baseline
 *   read           every wake names no entry, so each pass reads the outbox (how the relay worked before the
 *                  hand-over)
 *   hand-over      each wake names the entry just committed (what signDoc does): no read
 * each with the relay's gathering time (GATHER_MS and others), each row with a relay of its own (its timer
 * reads the outbox every delivery.relayIntervalMs, as in the service). Reported per entry: the main thread's CPU
 * (/proc/self/task/<pid>/stat), the whole process's CPU, the rate reached. The relay's cost is a row's CPU
 * minus the 'no relay' row's. Figures only; it never fails on timing.
 *
 * Environment: BENCH_RELAY_ENTRIES (entries per row, default 2000), BENCH_RELAY_RATES (entries/s, default
 * 400,2000), BENCH_RELAY_GATHER (ms, default 10 and GATHER_MS), BENCH_RELAY_ROUNDS (default 2).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { loadConfig } from '../src/config/load.ts';
import { DeliveryQueues, redisConnection } from '../src/delivery/queue.ts';
import { GATHER_MS, OutboxRelay } from '../src/delivery/relay.ts';
import { openSqliteStore } from '../src/store/open.ts';
import type { Store } from '../src/store/types.ts';
import { startRedisServer } from '../src/util/redis-server.ts';
import { mainThreadCpuMs } from './proc-cpu.ts';

const ENTRIES = Number(process.env.BENCH_RELAY_ENTRIES ?? 2000);
const RATES = (process.env.BENCH_RELAY_RATES ?? '400,2000').split(',').map(Number);
const GATHERS = [...new Set((process.env.BENCH_RELAY_GATHER ?? `10,${GATHER_MS}`).split(',').map(Number))];
const ROUNDS = Number(process.env.BENCH_RELAY_ROUNDS ?? 2);
const CONCURRENCY = 8;
const TOPICS = ['mediation', 'notification'];

type Mode = 'no relay' | 'read' | 'hand-over';
const filler = randomBytes(700).toString('base64'); // a mediation record's envelope is about 1 KB of JSON

/** `count` entries from CONCURRENCY loops at about `rate` per second in all; resolves when the relay is idle */
async function writeEntries(store: Store, relay: OutboxRelay, mode: Mode, count: number, rate: number): Promise<void> {
  const pauseMs = (CONCURRENCY * 1000) / rate;
  let next = 0;
  const loop = async () => {
    while (next++ < count) {
      const started = performance.now();
      const id = randomUUID();
      const entries = [{ id, topic: 'mediation', payload: { reference_id: id, filler } }];
      await store.addOutbox(entries);
      if (mode === 'read') relay.wake();
      else if (mode === 'hand-over') relay.wake(entries);
      await sleep(Math.max(0, pauseMs - (performance.now() - started)));
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  await relay.idle();
}

const dir = mkdtempSync(join(tmpdir(), 'qtsp-relay-bench-'));
const redis = await startRedisServer({ dir: join(dir, 'redis') });
const store = await openSqliteStore(join(dir, 'qtsp.sqlite'));
const config = loadConfig({ redis: { prefix: `qtsp-relay-bench-${randomUUID().slice(0, 8)}` } }, {});
const connection = redisConnection(redis.url, { blocking: false, onError: () => undefined });
const queues = new DeliveryQueues(connection, TOPICS, config, () => undefined);
try {
  while (!queues.ready) await sleep(20);
  const relay = (gatherMs: number) =>
    new OutboxRelay({
      store,
      queues,
      topics: TOPICS,
      intervalMs: config.delivery.relayIntervalMs,
      requeueAfterMs: config.delivery.requeueAfterMs,
      gatherMs,
      logger: pino({ level: 'silent' }),
    });
  /** one row: a relay of its own (none for 'no relay'), started after the last row's entries are all queued */
  const row = async (mode: Mode, gatherMs: number, count: number, rate: number) => {
    const r = relay(gatherMs);
    r.start(); // its first pass reads: the outbox holds the last 'no relay' row's entries
    await r.idle();
    const main0 = mainThreadCpuMs();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    if (mode === 'no relay') await r.stop(); // no relay while the entries are written
    await writeEntries(store, r, mode, count, rate);
    const wallMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    await r.stop();
    return {
      main: ((mainThreadCpuMs() - main0) * 1000) / count,
      process: (cpu.user + cpu.system) / count,
      rate: (count * 1000) / wallMs,
    };
  };
  // warm-up: prepared statements, the queues' setup, the JIT
  for (const mode of ['read', 'hand-over'] as const) await row(mode, GATHER_MS, 1000, 2000);
  console.log(
    `outbox relay: ${ENTRIES} entries per row, ${CONCURRENCY} writers, a real SQLite store and redis-server; CPU per entry (the relay's own: minus 'no relay')`,
  );
  for (const rate of RATES) {
    for (let round = 1; round <= ROUNDS; round++) {
      const baseline = await row('no relay', GATHER_MS, ENTRIES, rate);
      console.log(
        `${String(rate).padStart(5)}/s round ${round}  ${'no relay'.padEnd(9)} ${''.padStart(6)}: main thread ${baseline.main.toFixed(0).padStart(4)} us, process ${baseline.process.toFixed(0).padStart(4)} us per entry, ${baseline.rate.toFixed(0)}/s`,
      );
      for (const gatherMs of GATHERS) {
        for (const mode of ['read', 'hand-over'] as const) {
          const m = await row(mode, gatherMs, ENTRIES, rate);
          const own = `(relay: ${(m.main - baseline.main).toFixed(0).padStart(4)} us main thread, ${(m.process - baseline.process).toFixed(0).padStart(4)} us process)`;
          console.log(
            `${String(rate).padStart(5)}/s round ${round}  ${mode.padEnd(9)} ${`${gatherMs} ms`.padStart(6)}: main thread ${m.main.toFixed(0).padStart(4)} us, process ${m.process.toFixed(0).padStart(4)} us per entry, ${m.rate.toFixed(0)}/s  ${own}`,
          );
        }
      }
    }
  }
} finally {
  await queues.close();
  connection.disconnect();
  await store.close();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}
