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
 * Each variant is a store of its own, run in turn ROUNDS times so that they share the machine's moods:
 *   store              the store as signDoc uses it (journal on)
 *   journal off        config journal.enabled false: no journal entry is written
 *   no indexes         journal on, every secondary index dropped after migrating: what the indexes cost (a bound
 *                      only; the relay, retention and the audit read through them)
 *   bare               both: what remains is the rows themselves, the group commit and the writer thread
 *
 * Environment: BENCH_STORE_WRITES (signDocs per row, default 2000), BENCH_STORE_CONCURRENCY (default 1,8,32),
 * BENCH_STORE_VARIANTS (default "store"; "all" for the four), BENCH_STORE_ROUNDS (default 1).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../src/store/open.ts';
import type { Store } from '../src/store/types.ts';
import { claimFor, signing } from '../test/store/store-contract.ts';
import { mainThreadCpuMs } from './proc-cpu.ts';

const WRITES = Number(process.env.BENCH_STORE_WRITES ?? 2000);
const CONCURRENCIES = (process.env.BENCH_STORE_CONCURRENCY ?? '1,8,32').split(',').map(Number);
const ROUNDS = Number(process.env.BENCH_STORE_ROUNDS ?? 1);

interface Variant {
  readonly name: string;
  readonly journal: boolean;
  readonly indexes: boolean;
}
const VARIANTS: readonly Variant[] = [
  { name: 'store', journal: true, indexes: true },
  { name: 'journal off', journal: false, indexes: true },
  { name: 'no indexes', journal: true, indexes: false },
  { name: 'bare', journal: false, indexes: false },
];
const asked = process.env.BENCH_STORE_VARIANTS ?? 'store';
const variants = asked === 'all' ? VARIANTS : VARIANTS.filter((v) => asked.split(',').includes(v.name));

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

/** the variant's store on a fresh file, migrated, warmed up (prepared statements, file growth) */
async function openVariant(dir: string, v: Variant): Promise<Store> {
  const file = join(dir, `${v.name.replace(/ /g, '-')}.sqlite`);
  await (await openSqliteStore(file, {}, { journal: v.journal })).close();
  if (!v.indexes) {
    const db = new Database(file);
    const named = db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").all();
    for (const { name } of named as { name: string }[]) db.exec(`DROP INDEX "${name}"`);
    db.close();
  }
  const store = await openSqliteStore(file, {}, { journal: v.journal });
  await signDocWrites(store, 200, 8);
  return store;
}

async function row(store: Store, v: Variant, concurrency: number): Promise<string> {
  const elu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  const mainCpu = mainThreadCpuMs();
  const start = performance.now();
  await signDocWrites(store, WRITES, concurrency);
  const wall = performance.now() - start;
  const busy = performance.eventLoopUtilization(elu).active;
  const { user, system } = process.cpuUsage(cpu);
  return [
    v.name.padEnd(11),
    String(concurrency).padStart(11),
    ((WRITES * 1000) / wall).toFixed(0).padStart(10),
    (busy / WRITES).toFixed(3).padStart(27),
    ((mainThreadCpuMs() - mainCpu) / WRITES).toFixed(3).padStart(26),
    ((user + system) / 1000 / WRITES).toFixed(3).padStart(22),
  ].join(' | ');
}

const dir = mkdtempSync(join(tmpdir(), 'qtsp-store-bench-'));
try {
  const stores = new Map<Variant, Store>();
  for (const v of variants) stores.set(v, await openVariant(dir, v));
  console.log(
    `SQLite store, ${WRITES} signDocs per row (claim, evidence, kept signature with its mediation record, the relay's mark)`,
  );
  console.log(
    'variant     | concurrency | signDocs/s | main thread busy ms/signDoc | main thread CPU ms/signDoc | process CPU ms/signDoc',
  );
  for (let round = 0; round < ROUNDS; round++)
    for (const concurrency of CONCURRENCIES)
      for (const [v, store] of stores) console.log(await row(store, v, concurrency));
  for (const store of stores.values()) await store.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
