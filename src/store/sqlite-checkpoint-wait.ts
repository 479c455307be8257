/**
 * When the SQLite store's checkpoint thread (sqlite-checkpoint-thread.ts) copies the WAL into the database file:
 * often while writes come in, less often while none do.
 */

/** how often committed WAL frames are copied into the database file while writes come in */
export const CHECKPOINT_INTERVAL_MS = 200;

/**
 * the longest wait between checkpoints: with nothing committed since the last one the wait doubles up to this,
 * since every timer wakes a thread (a cost of its own on a virtual machine) for nothing to copy
 */
export const CHECKPOINT_IDLE_INTERVAL_MS = 1_000;

/** what a PASSIVE checkpoint answers (PRAGMA wal_checkpoint): frames in the WAL, and how many are in the file */
export interface CheckpointResult {
  readonly log: number;
  readonly checkpointed: number;
}

/**
 * The wait before the next checkpoint: the busy interval while other connections commit or frames are left
 * to copy (a reader kept a PASSIVE checkpoint from finishing), else twice the last wait, at most the idle one.
 */
export function nextCheckpointWait(lastWaitMs: number, committedSince: boolean, result: CheckpointResult): number {
  if (committedSince || result.checkpointed < result.log) return CHECKPOINT_INTERVAL_MS;
  return Math.min(lastWaitMs * 2, CHECKPOINT_IDLE_INTERVAL_MS);
}
