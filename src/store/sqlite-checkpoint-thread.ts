/**
 * The SQLite store's checkpoint thread (sqlite-checkpointer.ts starts it): its own connection copies the
 * committed WAL frames into the database file every `intervalMs`, with a PASSIVE checkpoint, which takes no
 * write lock. Any message asks it to stop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { nameThread } from './thread-name.ts';

/** what the checkpoint thread is started with */
export interface CheckpointThreadData {
  readonly file: string;
  readonly intervalMs: number;
}

const port = parentPort!;
const { file, intervalMs } = workerData as CheckpointThreadData;

nameThread('qtsp-checkpoint');
const db = new Database(file);
db.pragma('synchronous = FULL'); // the database file is fsynced before the WAL may be reused
const timer = setInterval(() => db.pragma('wal_checkpoint(PASSIVE)'), intervalMs);
port.on('message', () => {
  clearInterval(timer);
  db.close(); // not the last connection: the writer's close folds what is left
  port.postMessage('closed');
  port.close();
});
port.postMessage('ready');
