/**
 * The audit the service runs on itself (journal.auditIntervalSeconds): `qtsp evidence audit` (audit.ts) over the
 * batches sealed since the previous run (the first run: one interval back), so that an altered, deleted or
 * inserted entry, or a broken chain, shows in the metrics within an interval rather than at the next manual
 * audit. The chain of batch roots and time-stamps is checked whole each time (audit.ts); the entries, the part
 * that grows with the traffic, only of the newest batches.
 */
import type { Store } from '../store/types.ts';
import type { Logger } from '../util/logger.ts';
import { runEvery, type PeriodicTask } from '../util/periodic.ts';
import { auditJournal, describeFinding } from './audit.ts';
import type { TokenTrust } from './token-trust.ts';

/** The outcome of the last scheduled audit that ran to its end (one that did not is logged and leaves it). */
export interface SelfAuditResult {
  /** when it started */
  readonly at: Date;
  /** no finding but purges by policy */
  readonly clean: boolean;
  /** findings other than purges by policy */
  readonly findings: number;
}

export interface SelfAudit extends PeriodicTask {
  /** the last outcome; undefined before the first run that ended */
  last(): SelfAuditResult | undefined;
}

export interface SelfAuditOptions {
  /** 0: never */
  readonly intervalSeconds: number;
  /** what the audit trusts, as `qtsp evidence audit` does (read at each run: a ceremony may renew our TSA) */
  readonly trust: () => TokenTrust;
  /** how many findings are named in the log at most */
  readonly logFindings?: number;
}

export function startSelfAudit(store: Store, options: SelfAuditOptions, logger: Logger): SelfAudit {
  let last: SelfAuditResult | undefined;
  if (options.intervalSeconds === 0) return { close: async () => undefined, last: () => undefined };
  const intervalMs = options.intervalSeconds * 1000;
  const run = async () => {
    const at = new Date();
    // batches sealed since the previous run started, so consecutive runs leave no gap between them
    const from = new Date((last?.at.getTime() ?? at.getTime() - intervalMs) - 60_000);
    last = (await auditOnce(store, { at, from, trust: options.trust() }, logger, options.logFindings)) ?? last;
  };
  const periodic = runEvery(intervalMs, run);
  return { close: () => periodic.close(), last: () => last };
}

async function auditOnce(
  store: Store,
  { at, from, trust }: { at: Date; from: Date; trust: TokenTrust },
  logger: Logger,
  logFindings = 20,
): Promise<SelfAuditResult | undefined> {
  try {
    const report = await auditJournal(store, { from, trust });
    const findings = report.findings.filter((f) => f.kind !== 'purged');
    if (report.clean)
      logger.info(
        { event: 'journal.audited', batches: report.batches, entries: report.entries },
        'journal audit clean',
      );
    else
      logger.error(
        {
          event: 'journal.audit_findings',
          findings: findings.length,
          first: findings.slice(0, logFindings).map(describeFinding),
        },
        'the scheduled journal audit found what does not match the seals; run `qtsp evidence audit`',
      );
    return { at, clean: report.clean, findings: findings.length };
  } catch (err) {
    const error = (err as Error).message;
    logger.warn({ event: 'journal.audit_failed', error }, 'scheduled journal audit did not run to its end');
    return undefined;
  }
}
