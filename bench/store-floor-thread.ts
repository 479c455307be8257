/**
 * The store floor's writer thread (bench/store-floor.ts): one better-sqlite3 connection in WAL mode with
 * synchronous=FULL, as the service's writer. Each call's rows are inserted in one transaction; the calls that
 * arrived while the thread was busy are committed together (a group commit, as the service's), and each is
 * answered once its COMMIT returned: on disk.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

export interface FloorRequest {
  readonly id: number;
  readonly rows: readonly { readonly table: number; readonly body: Uint8Array }[];
}
export interface FloorReply {
  readonly done: number[];
}

const { file, tables } = workerData as { file: string; tables: number };
const db = new Database(file);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
const inserts = Array.from({ length: tables }, (_, i) => {
  db.exec(`CREATE TABLE t${i} (id INTEGER PRIMARY KEY, body BLOB NOT NULL)`);
  return db.prepare(`INSERT INTO t${i} (body) VALUES (?)`);
});
const commit = db.transaction((calls: readonly FloorRequest[]) => {
  for (const call of calls) for (const row of call.rows) inserts[row.table]!.run(row.body);
});

let pending: FloorRequest[] = [];
const port = parentPort!;
port.on('message', (request: FloorRequest) => {
  pending.push(request);
  if (pending.length === 1) setImmediate(flush); // what arrives before the next turn joins this commit
});

function flush(): void {
  const calls = pending;
  pending = [];
  commit(calls);
  port.postMessage({ done: calls.map((c) => c.id) } satisfies FloorReply);
}
