/**
 * The running service's watch over the calendar (calendar.ts): the entries read once and kept, so that a
 * signDoc checks them with one comparison (no file, no parsing); a warning in the log when an object comes
 * within a threshold of its end or its key's usage end (calendar.warnDays), once per object, end and threshold;
 * an error once either has ended. reload() reads the files again (after a ceremony renewed something).
 */
import type { Logger } from '../util/logger.ts';
import { daysLeft, deadlineOf, endedForSigning, endedReason, type CalendarEntry } from './calendar.ts';

export interface CalendarWatchOptions {
  /** reads the calendar from the files */
  readonly read: () => CalendarEntry[];
  /** days before an end at which a warning is logged, e.g. [90, 30, 7] */
  readonly warnDays: readonly number[];
  /** how often the thresholds are checked (ms) */
  readonly intervalMs: number;
  readonly logger: Logger;
}

export interface CalendarWatch {
  /** the entries as last read */
  entries(): readonly CalendarEntry[];
  /** the entries a signature depends on that have ended now; no I/O, one comparison while none has */
  endedForSigning(): CalendarEntry[];
  /** reads the files again and checks the thresholds; keeps the last entries when the files cannot be read */
  reload(): void;
  stop(): void;
}

/**
 * Logs an entry's end once it has passed (or its key's usage end), else a warning at the first threshold it is
 * within; `once` keeps each message to one per key.
 */
function logEnd(
  entry: CalendarEntry,
  now: Date,
  thresholds: readonly number[],
  once: (key: string, log: () => void) => void,
  logger: Logger,
): void {
  const { at, what } = deadlineOf(entry);
  const days = daysLeft(at, now);
  const end = { object: entry.object, [what === 'key usage period' ? 'keyUsageEndsAt' : 'endsAt']: at.toISOString() };
  if (at <= now) {
    once(`${entry.object} ${at.toISOString()} ended`, () =>
      logger.error({ event: 'pki.expired', ...end, renew: entry.renewWhenEnded ?? entry.renew }, endedReason(entry)),
    );
    return;
  }
  const threshold = thresholds.find((t) => days < t);
  if (threshold === undefined) return;
  once(`${entry.object} ${at.toISOString()} ${threshold}`, () =>
    logger.warn(
      { event: 'pki.expiry_warning', ...end, daysLeft: days, thresholdDays: threshold, renew: entry.renew },
      `${entry.object} (${entry.title}): ${what} ends ${at.toISOString()}, in ${days} days; renew: ${entry.renew}`,
    ),
  );
}

export function watchCalendar(options: CalendarWatchOptions): CalendarWatch {
  const { logger } = options;
  const thresholds = [...options.warnDays].sort((a, b) => a - b);
  const said = new Set<string>();
  let entries: CalendarEntry[] = options.read();
  let firstSigningEnd = earliestSigningEnd(entries);

  const check = () => {
    const now = new Date();
    for (const entry of entries) logEnd(entry, now, thresholds, once, logger);
  };
  const once = (key: string, log: () => void) => {
    if (said.has(key)) return;
    said.add(key);
    log();
  };

  check();
  const timer = setInterval(check, options.intervalMs);
  timer.unref();
  return {
    entries: () => entries,
    endedForSigning: () => (Date.now() < firstSigningEnd ? [] : endedForSigning(entries, new Date())),
    reload() {
      try {
        entries = options.read();
        firstSigningEnd = earliestSigningEnd(entries);
      } catch (err) {
        logger.error({ event: 'pki.calendar_unreadable', error: (err as Error).message }, 'PKI files unreadable');
      }
      check();
    },
    stop: () => clearInterval(timer),
  };
}

/** the first end (or key usage end) among the entries a signature depends on */
function earliestSigningEnd(entries: readonly CalendarEntry[]): number {
  return Math.min(...entries.filter((e) => e.signing).map((e) => deadlineOf(e).at.getTime()));
}
