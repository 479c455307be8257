/**
 * signDoc latency with the mediation delivery around it (spec 6.2: a delivery failure must not affect the
 * response): sequential signDoc calls over a kept-alive mutual-TLS connection, in four situations:
 *   up, in-process worker   Redis up; relay and workers in the QTSP process (the `qtsp dev` default)
 *   up, relay only          Redis up; workers elsewhere (`qtsp worker`), only the relay in the QTSP process
 *   down                    the local redis-server stopped
 *   never answers           redis.url points at a socket that accepts and stays silent
 * Run: node --import tsx bench/mediation-latency.bench.ts   (BENCH_CALLS, default 300 per situation)
 * It prints figures; it never fails on timing.
 */
import { createServer, type Socket } from 'node:net';
import { rpAgent } from '../src/rp/http.ts';
import { median, percentile, postSignDoc, sha256b64 } from '../test/helpers/delivery.ts';
import { authorize } from '../test/helpers/signing.ts';
import { startEnvironment, type TestEnvironment } from '../test/helpers/environment.ts';
import type { ConfigInput } from '../src/config/schema.ts';

const CALLS = Number(process.env.BENCH_CALLS ?? 300);
const WARMUP = 30;

async function measure(env: TestEnvironment, calls: number): Promise<number[]> {
  const agent = rpAgent(env.endpoints);
  try {
    const auth = await authorize(env.endpoints, [{ hash: sha256b64('bench document'), label: 'bench' }]);
    const times: number[] = [];
    for (let i = 0; i < WARMUP + calls; i++) {
      const res = await postSignDoc(env, agent, auth.accessToken, auth.hashes);
      if (res.status !== 200) throw new Error(`signDoc answered ${res.status}: ${JSON.stringify(res.body)}`);
      if (i >= WARMUP) times.push(res.ms);
    }
    return times;
  } finally {
    agent.destroy();
  }
}

function report(label: string, times: number[]): void {
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  console.log(
    `${label.padEnd(26)} n=${times.length}  mean ${mean.toFixed(1)} ms  median ${median(times).toFixed(1)} ms  p95 ${percentile(times, 95).toFixed(1)} ms  p99 ${percentile(times, 99).toFixed(1)} ms`,
  );
}

async function situation(
  label: string,
  config: ConfigInput,
  before?: (env: TestEnvironment) => Promise<void>,
): Promise<void> {
  const env = await startEnvironment(config);
  try {
    await before?.(env);
    report(label, await measure(env, CALLS));
    const counts = await env.qtsp.deps.store.outboxCounts('mediation');
    console.log(`${''.padEnd(26)} outbox after the run: ${JSON.stringify(counts)}`);
  } finally {
    await env.close();
  }
}

await situation('up, in-process worker', {});
await situation('up, relay only', { delivery: { inProcessWorker: false } });
await situation('down', {}, async (env) => {
  await env.redis.local!.stop();
});
const sockets = new Set<Socket>();
const hole = createServer((s) => sockets.add(s));
await new Promise<void>((r) => hole.listen(0, '127.0.0.1', () => r()));
await situation('never answers', {
  redis: { url: `redis://127.0.0.1:${(hole.address() as { port: number }).port}`, commandTimeoutMs: 500 },
  delivery: { timeoutMs: 1000 },
});
for (const s of sockets) s.destroy();
hole.close();
