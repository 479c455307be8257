/**
 * How long sealing the journal takes (docs/evidence.md), in process:
 * `node --import tsx bench/journal-seal.bench.ts`.
 *
 * A real SQLite store is filled with signings as signDoc writes them (recordSigning and keepSignatures: two
 * journal entries each, with a signer certificate, a JWT and a signature), then sealJournal seals them as the
 * service's timer does: it reads the entries, builds the RFC 4998 hash tree, has our TSA (LocalTsa over the
 * material `pki init` writes, as `qtsp serve` uses it) time-stamp the root and stores the batch. Reported per
 * round: the entries sealed, the wall time and this process's CPU time of the seal, and entries per second.
 * Filling is not timed. Figures only.
 *
 * Environment: BENCH_SEAL_ENTRIES (entries per round, default 10000; even), BENCH_SEAL_ROUNDS (default 3: the
 * first also compiles the code paths).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { sealJournal } from '../src/journal/seal.ts';
import { openSqliteStore } from '../src/store/open.ts';
import type { Store } from '../src/store/types.ts';
import { testTsa } from '../test/helpers/journal.ts';
import { claimFor, signing } from '../test/store/store-contract.ts';

const ENTRIES = Number(process.env.BENCH_SEAL_ENTRIES ?? 10_000);
const ROUNDS = Number(process.env.BENCH_SEAL_ROUNDS ?? 3);

/** `count` signings, each its evidence and its returned signature: two journal entries per signing */
async function fill(store: Store, count: number, concurrency = 8): Promise<void> {
  let next = 0;
  const loop = async () => {
    while (next < count) {
      next++;
      const input = signing();
      const hash = input.transaction.hashes[0]!;
      const claim = claimFor(input, [hash]);
      await store.claimDocuments(claim, new Date(Date.now() - 120_000));
      await store.recordSigning(input, 'ordered');
      await store.keepSignatures({
        claim,
        evidenceSerialHex: input.certificate.serialHex,
        signatures: [{ hash, signature: randomBytes(900).toString('base64'), revocation: null }],
        outbox: [],
      });
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
}

const dir = mkdtempSync(join(tmpdir(), 'qtsp-seal-bench-'));
try {
  const tsa = testTsa(join(dir, 'pki'));
  const store = await openSqliteStore(join(dir, 'qtsp.sqlite'));
  console.log(
    `sealing the journal: SQLite store, our TSA, ${ENTRIES} new entries per round (signings as signDoc writes them)`,
  );
  console.log('round | entries | batches | seal wall ms | seal CPU ms | entries/s');
  for (let round = 1; round <= ROUNDS; round++) {
    await fill(store, ENTRIES / 2);
    const cpu = process.cpuUsage();
    const start = performance.now();
    const batches = await sealJournal(store, tsa);
    const wall = performance.now() - start;
    const { user, system } = process.cpuUsage(cpu);
    const sealed = batches.reduce((n, b) => n + b.throughSeq - b.firstSeq + 1, 0);
    console.log(
      [
        String(round).padStart(5),
        String(sealed).padStart(7),
        String(batches.length).padStart(7),
        wall.toFixed(0).padStart(12),
        ((user + system) / 1000).toFixed(0).padStart(11),
        ((sealed * 1000) / wall).toFixed(0).padStart(9),
      ].join(' | '),
    );
  }
  await store.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
