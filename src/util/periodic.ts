/** A background job that runs a task at an interval: the purge, the journal's sealing and its renewal check. */

export interface PeriodicTask {
  /** stops the timer and waits for a run under way */
  close(): Promise<void>;
}

/**
 * Runs `task` every `intervalMs`, counted from the end of the previous run, so two runs never overlap; the timer
 * keeps no process alive. The task handles its own failures (each job logs them and tries again next time).
 */
export function runEvery(intervalMs: number, task: () => Promise<void>): PeriodicTask {
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  const schedule = () => {
    timer = setTimeout(() => {
      running = task().finally(() => {
        running = undefined;
        if (timer) schedule();
      });
    }, intervalMs);
    timer.unref();
  };
  schedule();
  return {
    async close() {
      clearTimeout(timer);
      timer = undefined;
      await running;
    },
  };
}
