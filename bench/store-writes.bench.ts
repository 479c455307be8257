/**
 * What the SQLite store's writes cost the main thread (the store keeps fsync off the event loop), in process:
 * `node --import tsx bench/store-writes.bench.ts`.
 *
 * Each "signDoc" is what signDoc and the relay write, with the durability each asks for: the claim on the
 * document (ordered), the evidence (recordSigning: certificate and transaction, ordered), the kept signature
 * with its mediation record (keepSignatures, durable), and the relay's mark (markOutboxQueued, ordered).
 * CONCURRENCY of them run in a closed loop on a real file with synchronous=FULL (real fsyncs on this disk).
 * Reported per signDoc: the main thread's busy time (event-loop utilisation: time blocked in fsync counts, as it
 * does for the requests waiting behind it), the main thread's CPU time (/proc/self/task/<pid>/stat: the main
 * thread alone), the whole process's CPU time (every thread, process.cpuUsage), and the rate. Figures only.
 *
 * Environment: BENCH_STORE_WRITES (signDocs per row, default 2000), BENCH_STORE_CONCURRENCY (default 1,8,32).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { openSqliteStore } from '../src/store/open.ts';
import { mainThreadCpuMs } from './proc-cpu.ts';
import type { Store } from '../src/store/types.ts';
import { randomBytes } from 'node:crypto';
import { claimFor, signing } from '../test/store/store-contract.ts';

const WRITES = Number(process.env.BENCH_STORE_WRITES ?? 2000);
const CONCURRENCIES = (process.env.BENCH_STORE_CONCURRENCY ?? '1,8,32').split(',').map(Number);
async function signDocWrites(store: Store, count: number, concurrency: number): Promise<void> {
  let next = 0;
  const loop = async () => {
    while (next < count) {
      const i = next++;
      const input = signing();
      const id = `ref-${input.certificate.serialHex}-${i}`;
      const hash = randomBytes(32).toString('base64');
      const claim = claimFor(input, [hash]);
      await store.claimDocuments(claim, new Date(Date.now() - 120_000));
      await store.recordSigning(input, 'ordered');
      await store.keepSignatures({
        claim,
        evidenceSerialHex: input.certificate.serialHex,
        signatures: [{ hash, signature: randomBytes(900).toString('base64'), revocation: null }],
        outbox: [{ id, topic: 'mediation', payload: { reference_id: id, type: 'remote_signature_creation' } }],
      });
      await store.markOutboxQueued([id]);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
}

const dir = mkdtempSync(join(tmpdir(), 'qtsp-store-bench-'));
try {
  const store = await openSqliteStore(join(dir, 'qtsp.sqlite'));
  await signDocWrites(store, 200, 8); // warm-up: prepared statements, file growth
  console.log(
    `SQLite store, ${WRITES} signDocs per row (claim, evidence, kept signature with its mediation record, the relay's mark)`,
  );
  console.log(
    'concurrency | signDocs/s | main thread busy ms/signDoc | main thread CPU ms/signDoc | process CPU ms/signDoc',
  );
  for (const concurrency of CONCURRENCIES) {
    const elu = performance.eventLoopUtilization();
    const cpu = process.cpuUsage();
    const mainCpu = mainThreadCpuMs();
    const start = performance.now();
    await signDocWrites(store, WRITES, concurrency);
    const wall = performance.now() - start;
    const busy = performance.eventLoopUtilization(elu).active;
    const { user, system } = process.cpuUsage(cpu);
    const row = [
      String(concurrency).padStart(11),
      ((WRITES * 1000) / wall).toFixed(0).padStart(10),
      (busy / WRITES).toFixed(3).padStart(27),
      ((mainThreadCpuMs() - mainCpu) / WRITES).toFixed(3).padStart(26),
      ((user + system) / 1000 / WRITES).toFixed(3).padStart(22),
    ];
    console.log(row.join(' | '));
  }
  await store.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
