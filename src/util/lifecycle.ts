/**
 * How a qtsp process stops: on SIGTERM or SIGINT it runs its stop steps once, each step bounded, and the
 * whole stop bounded by lifecycle.shutdownTimeoutMs, so a Redis or PostgreSQL that is already gone cannot hold
 * the exit. A second signal exits at once. With lifecycle.exitWithParent the process
 * also stops when the process that started it ends, SIGKILL included: an orphan is re-parented, so its parent
 * pid changes (polled; Node has no prctl(PR_SET_PDEATHSIG)).
 */
import type { Logger } from './logger.ts';

export class StepTimeoutError extends Error {
  override name = 'StepTimeoutError';
}

/** `promise`, or a StepTimeoutError after `ms`; the step itself may still finish later. */
export function bounded<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StepTimeoutError(`${what}: not done within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Runs the stop steps in order; a step that fails or times out is logged and the next one still runs (the
 * store is flushed even when closing the queues hung). Resolves true when every step succeeded.
 */
export type StopStep = readonly [what: string, run: () => Promise<void> | void, timeoutMs?: number];

export async function runStopSteps(
  steps: readonly StopStep[],
  stepTimeoutMs: number,
  logger: Logger,
): Promise<boolean> {
  let ok = true;
  for (const [what, step, timeoutMs] of steps) {
    try {
      await bounded(Promise.resolve().then(step), timeoutMs ?? stepTimeoutMs, what);
    } catch (err) {
      ok = false;
      logger.error(
        { event: 'shutdown.step_failed', step: what, error: (err as Error).message },
        `stopping: ${what} failed`,
      );
    }
  }
  return ok;
}

/** the parent when this module was loaded, early in the start: a parent that dies while we start still counts */
const STARTED_BY = process.ppid;

/** Calls `onGone` once when this process's parent ends. Returns a function that stops watching. */
export function watchParent(onGone: () => void, intervalMs = 500): () => void {
  const parent = STARTED_BY;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onGone();
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

const DUPLICATE_SIGNAL_MS = 1000;

export interface UntilStoppedOptions {
  readonly shutdownTimeoutMs: number;
  readonly exitWithParent: boolean;
  readonly logger: Logger;
  /** what the process is, for the messages (`qtsp serve`) */
  readonly name: string;
}

/**
 * Waits for SIGTERM, SIGINT or (exitWithParent) the end of the parent, then runs `stop` once. Resolves with
 * the exit code; if `stop` does not finish within shutdownTimeoutMs, or handles keep the process alive after
 * it, the process exits by itself.
 */
export function untilStopped(stop: () => Promise<void>, options: UntilStoppedOptions): Promise<number> {
  const { logger, name } = options;
  return new Promise((resolve) => {
    let stopping = false;
    let stopped = false;
    let since = 0;
    const begin = (why: string) => {
      // `npm start` forwards the terminal's SIGINT, which the child also got: one Ctrl-C arrives twice, within
      // milliseconds. Only a signal a second or more after the first means "exit now".
      if (stopping && Date.now() - since < DUPLICATE_SIGNAL_MS) return;
      if (stopping) {
        logger.warn({ event: 'shutdown.forced', reason: why }, `${name}: ${why} again while stopping; exiting now`);
        process.exit(1);
      }
      stopping = true;
      since = Date.now();
      unwatch();
      process.stdout.write(`\n${why}: stopping\n`);
      logger.info({ event: 'shutdown.begin', reason: why }, `${name} stopping`);
      const deadline = setTimeout(() => {
        if (stopped) process.exit(0); // stopped, but a handle we do not own kept the event loop alive
        logger.error(
          { event: 'shutdown.timeout', timeout_ms: options.shutdownTimeoutMs },
          `${name} did not stop within ${options.shutdownTimeoutMs} ms; exiting`,
        );
        process.exit(1);
      }, options.shutdownTimeoutMs);
      deadline.unref();
      stop().then(
        () => {
          stopped = true;
          logger.info({ event: 'shutdown.done' }, `${name} stopped`);
          setTimeout(() => process.exit(0), 1000).unref(); // a handle we do not own must not keep us running
          resolve(0);
        },
        (err: unknown) => {
          stopped = true;
          logger.error({ event: 'shutdown.failed', error: (err as Error).message }, `${name}: stop failed`);
          resolve(1);
        },
      );
    };
    process.on('SIGINT', () => begin('SIGINT'));
    process.on('SIGTERM', () => begin('SIGTERM'));
    const unwatch = options.exitWithParent ? watchParent(() => begin('parent process ended')) : () => undefined;
  });
}
