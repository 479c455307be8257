/**
 * The SQLite store's checkpoint thread (sqlite-checkpointer.ts starts it): its own connection copies the
 * committed WAL frames into the database file with a PASSIVE checkpoint, which takes no write lock, every
 * CHECKPOINT_INTERVAL_MS while other connections commit, less often while they do not (nextCheckpointWait).
 * Any message asks it to stop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { CHECKPOINT_INTERVAL_MS, type CheckpointResult, nextCheckpointWait } from './sqlite-checkpoint-wait.ts';
import { nameThread } from './thread-name.ts';

/** what the checkpoint thread is started with */
export interface CheckpointThreadData {
  readonly file: string;
}

const port = parentPort!;
const { file } = workerData as CheckpointThreadData;

nameThread('qtsp-checkpoint');
const db = new Database(file);
db.pragma('synchronous = FULL'); // the database file is fsynced before the WAL may be reused
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
// changes whenever another connection has committed since this one last asked (SQLite's PRAGMA data_version)
const dataVersion = db.prepare('PRAGMA data_version').pluck();
let version = dataVersion.get();
let wait = CHECKPOINT_INTERVAL_MS;
let timer = setTimeout(run, wait);

function run(): void {
  const result = checkpoint.get() as CheckpointResult;
  const now = dataVersion.get();
  wait = nextCheckpointWait(wait, now !== version, result);
  version = now;
  timer = setTimeout(run, wait);
}

port.on('message', () => {
  clearTimeout(timer);
  db.close(); // not the last connection: the writer's close folds what is left
  port.postMessage('closed');
  port.close();
});
port.postMessage('ready');
