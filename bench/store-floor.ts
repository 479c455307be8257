/**
 * The store floor of a row: what writing the bytes a signDoc writes costs on this machine, without the service's
 * code around it. `storeMark` and `storeWritten` read, from the QTSP's own SQLite file, the rows a run added per
 * call and their bytes (every table, every column, as stored); `storeFloor` then writes that many rows of those
 * sizes per call, each call's rows in one durable transaction (WAL, synchronous=FULL, as the service's writer),
 * on a writer thread of the same kind (bench/store-floor-thread.ts: better-sqlite3, one connection, the calls
 * waiting meanwhile committed together), into tables with a rowid key and nothing else.
 *
 * Left out on purpose, as the service's design and not the required work: its secondary indexes, its random
 * text keys, its updates (the claim's row is written once, with the signature it later gets; the relay's mark is
 * not written) and its several commits per signDoc. Rows that come less often than every other call (a seal's
 * batch) are named but not written.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { startModuleWorker } from '../src/util/ts-worker.ts';
import type { FloorReply, FloorRequest } from './store-floor-thread.ts';

/** the rows a run added to one table, per call */
export interface WrittenTable {
  readonly table: string;
  readonly rowsPerCall: number;
  readonly bytesPerRow: number;
}

export interface StoreFloor {
  readonly cpuMs: number;
  readonly bytesPerCall: number;
  readonly rowsPerCall: number;
  /** tables whose rows the floor leaves out (fewer than one every other call) */
  readonly skipped: readonly string[];
}

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

function tables(db: Database.Database): string[] {
  const rows = db
    .prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'kysely_%'",
    )
    .all() as { name: string }[];
  return rows.map((r) => r.name);
}

/** the highest rowid of each table of the store now */
export function storeMark(file: string): Map<string, number> {
  const db = new Database(file, { readonly: true });
  try {
    const mark = new Map<string, number>();
    for (const t of tables(db)) {
      const { top } = db.prepare(`SELECT ifnull(max(rowid), 0) AS top FROM ${quote(t)}`).get() as { top: number };
      mark.set(t, top);
    }
    return mark;
  } finally {
    db.close();
  }
}

/** the rows added since `mark`, per call, with their bytes as stored (a text's UTF-8, a blob's, a number's text) */
export function storeWritten(file: string, mark: ReadonlyMap<string, number>, calls: number): WrittenTable[] {
  const db = new Database(file, { readonly: true });
  try {
    const out: WrittenTable[] = [];
    for (const t of tables(db)) {
      const columns = (db.prepare(`SELECT name FROM pragma_table_info(?)`).all(t) as { name: string }[]).map(
        (c) => `ifnull(length(CAST(${quote(c.name)} AS BLOB)), 0)`,
      );
      const { n, bytes } = db
        .prepare(`SELECT count(*) AS n, total(${columns.join(' + ')}) AS bytes FROM ${quote(t)} WHERE rowid > ?`)
        .get(mark.get(t) ?? 0) as { n: number; bytes: number };
      if (n > 0) out.push({ table: t, rowsPerCall: n / calls, bytesPerRow: bytes / n });
    }
    return out;
  } finally {
    db.close();
  }
}

/**
 * CPU per call (this whole process: the main thread posting each call's bytes and awaiting its commit, and the
 * writer thread) of `n` calls, `concurrency` at a time, after a warm-up as long as the run.
 */
export async function storeFloor(
  written: readonly WrittenTable[],
  n: number,
  concurrency: number,
): Promise<StoreFloor> {
  const kept = written.filter((w) => w.rowsPerCall >= 0.5);
  const rows = kept.flatMap((w, table) =>
    Array.from({ length: Math.round(w.rowsPerCall) }, () => ({ table, body: randomBytes(Math.round(w.bytesPerRow)) })),
  );
  const dir = mkdtempSync(join(tmpdir(), 'qtsp-store-floor-'));
  const worker = startModuleWorker(new URL('./store-floor-thread.ts', import.meta.url), {
    workerData: { file: join(dir, 'floor.sqlite'), tables: kept.length },
  });
  const waiting = new Map<number, () => void>();
  worker.on('message', (m: FloorReply) => {
    for (const id of m.done) waiting.get(id)?.();
  });
  let nextId = 0;
  // the bytes cross to the writer thread as the service's row values do: copied with each message
  const write = () =>
    new Promise<void>((resolve) => {
      const id = nextId++;
      waiting.set(id, () => {
        waiting.delete(id);
        resolve();
      });
      worker.postMessage({ id, rows } satisfies FloorRequest);
    });
  const run = async (count: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < count) await write();
      }),
    );
  };
  try {
    await run(n);
    const c0 = process.cpuUsage();
    await run(n);
    const cpu = process.cpuUsage(c0);
    return {
      cpuMs: (cpu.user + cpu.system) / 1000 / n,
      bytesPerCall: rows.reduce((sum, r) => sum + r.body.length, 0),
      rowsPerCall: rows.length,
      skipped: written.filter((w) => w.rowsPerCall < 0.5).map((w) => w.table),
    };
  } finally {
    await worker.terminate();
    rmSync(dir, { recursive: true, force: true });
  }
}
