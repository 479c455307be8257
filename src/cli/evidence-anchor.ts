/**
 * `qtsp evidence audit --anchor FILE|DIR|URL`: the batches kept outside the database (journal/anchor.ts), read
 * before the audit, and what the store lacks or holds otherwise, printed after its findings.
 */
import {
  AnchorError,
  type AnchorBatch,
  type AnchorFinding,
  describeAnchorFinding,
  loadAnchor,
} from '../journal/anchor.ts';

type Anchor = Map<number, AnchorBatch>;

/** the anchor of `source`; 'unreadable' after saying why on stderr; undefined without --anchor */
export async function readAnchor(
  source: string | undefined,
  timeoutMs: number,
): Promise<Anchor | 'unreadable' | undefined> {
  if (source === undefined) return undefined;
  try {
    return await loadAnchor(source, timeoutMs);
  } catch (err) {
    if (!(err instanceof AnchorError)) throw err;
    process.stderr.write(`--anchor: ${err.message}\n`);
    return 'unreadable';
  }
}

/** the audit's JSON report with the anchor's comparison, when one was given */
export function withAnchor<T extends object>(
  report: T,
  anchor: Anchor | undefined,
  findings: readonly AnchorFinding[] | undefined,
): T | (T & { anchor: { batches: number; findings: readonly AnchorFinding[] } }) {
  return anchor && findings ? { ...report, anchor: { batches: anchor.size, findings } } : report;
}

export function printAnchorFindings(anchor: Anchor, findings: readonly AnchorFinding[]): void {
  for (const f of findings) process.stdout.write(`${describeAnchorFinding(f)}\n`);
  const numbers = [...anchor.keys()];
  process.stdout.write(
    `anchor: ${anchor.size} batch(es) (${Math.min(...numbers)}..${Math.max(...numbers)}) compared with the store: ` +
      `${findings.length === 0 ? 'the same' : `${findings.length} finding(s)`}\n`,
  );
}
