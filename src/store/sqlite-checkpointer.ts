/**
 * The SQLite store's WAL checkpoints, on a thread and connection of their own (started by the writer thread,
 * sqlite-writer-thread.ts). SQLite's automatic checkpoint runs inside the COMMIT that crosses its threshold,
 * on the committing connection: on the writer thread it copied some 1,000 pages into the database file and
 * fsynced it every few hundred ms under load, 5-7 ms during which every write queued behind it waited.
 * Issue 12's bench, 4 alternating runs each way (B-B, one hash): saturated signDoc/s 224-244 with this thread,
 * 176-221 with the checkpoint inline; the writer thread's CPU per call 0.68-0.76 against 0.78-0.91 ms (the
 * half-load p99 was too noisy on that machine to tell the two apart). A PASSIVE checkpoint from another
 * connection copies what is committed without taking the write lock, so the writer keeps committing
 * meanwhile (https://sqlite.org/wal.html#checkpointing); the writer's automatic checkpoint stays armed at a
 * far higher threshold in case this thread stops.
 *
 * Plain JavaScript evaluated in a worker: it needs only better-sqlite3, not the TypeScript loader.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** how often committed WAL frames are copied into the database file */
export const CHECKPOINT_INTERVAL_MS = 200;

/** the writer connection's own automatic checkpoint (pages): only reached when the checkpointer is not running */
export const WRITER_AUTOCHECKPOINT_PAGES = 10_000;

const SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { writeFileSync } = require('node:fs');
const Database = require(workerData.betterSqlite3);
try { writeFileSync('/proc/thread-self/comm', 'qtsp-checkpoint'); } catch {} // thread name for top -H / ps -L (Linux)
const db = new Database(workerData.file);
db.pragma('synchronous = FULL'); // the database file is fsynced before the WAL may be reused
const timer = setInterval(() => db.pragma('wal_checkpoint(PASSIVE)'), workerData.intervalMs);
parentPort.on('message', () => {
  clearInterval(timer);
  db.close(); // not the last connection: the writer's close folds what is left
  parentPort.postMessage('closed');
  parentPort.close();
});
parentPort.postMessage('ready');
`;

export interface Checkpointer {
  /** stops the checkpoints and closes the connection (before the writer closes its own, the last one) */
  close(): Promise<void>;
}

/**
 * Starts checkpointing `file` (WAL mode, already open by the writer). `onStopped` runs if the thread fails
 * or exits on its own: the writer then checkpoints inline again.
 */
export async function startCheckpointer(
  file: string,
  onStopped: (err: Error) => void,
  intervalMs = CHECKPOINT_INTERVAL_MS,
): Promise<Checkpointer> {
  const worker = new Worker(SOURCE, {
    eval: true,
    execArgv: [],
    name: 'sqlite-checkpoint',
    workerData: { file, intervalMs, betterSqlite3: createRequire(import.meta.url).resolve('better-sqlite3') },
  });
  let closing = false;
  await new Promise<void>((resolve, reject) => {
    worker.once('message', () => resolve());
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`checkpoint thread exited with code ${code}`)));
  });
  worker.removeAllListeners();
  worker.on('error', (err) => closing || onStopped(err));
  worker.on('exit', (code) => closing || onStopped(new Error(`checkpoint thread exited with code ${code}`)));
  worker.unref(); // never what keeps the writer thread alive
  return {
    async close() {
      if (closing) return;
      closing = true;
      const closed = new Promise<void>((resolve) => {
        worker.once('message', () => resolve());
        worker.once('exit', () => resolve());
      });
      worker.postMessage('close');
      await closed;
      await worker.terminate().catch(() => undefined);
    },
  };
}
