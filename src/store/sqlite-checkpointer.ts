/**
 * The SQLite store's WAL checkpoints, on a thread and connection of their own (sqlite-checkpoint-thread.ts,
 * started by the writer thread). SQLite's automatic checkpoint runs inside the COMMIT that crosses its
 * threshold (by default 1,000 pages), on the committing connection: on the writer thread it copies those
 * pages into the database file and fsyncs it while every write queued behind it waits. A PASSIVE checkpoint
 * from another connection copies what is committed without taking the write lock, so the writer keeps
 * committing meanwhile; the writer's automatic checkpoint stays armed at a far higher threshold in case this
 * thread stops.
 */
import { startModuleWorker } from '../util/ts-worker.ts';
import type { CheckpointThreadData } from './sqlite-checkpoint-thread.ts';

/** the writer connection's own automatic checkpoint (pages): only reached when the checkpointer is not running */
export const WRITER_AUTOCHECKPOINT_PAGES = 10_000;

export interface Checkpointer {
  /** stops the checkpoints and closes the connection (before the writer closes its own, the last one) */
  close(): Promise<void>;
}

/**
 * Starts checkpointing `file` (WAL mode, already open by the writer). `onStopped` runs if the thread fails
 * or exits on its own: the writer then checkpoints inline again.
 */
export async function startCheckpointer(file: string, onStopped: (err: Error) => void): Promise<Checkpointer> {
  const worker = startModuleWorker(new URL('./sqlite-checkpoint-thread.ts', import.meta.url), {
    name: 'sqlite-checkpoint',
    workerData: { file } satisfies CheckpointThreadData,
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
