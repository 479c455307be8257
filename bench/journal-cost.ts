/**
 * What the sealed journal costs signDoc (docs/evidence.md): the QTSP's CPU per call with the journal on and
 * off (config journal.enabled), both measured in one bench run, as one line beside the bench's other ratios.
 */

/** one measured row: QTSP CPU per successful call (ms) and calls per second */
export interface JournalCostRow {
  readonly qtspCpuMs: number;
  readonly perSecond: number;
}

/** the line sign-doc.bench.ts prints: both figures, their ratio and the difference in per cent of "off" */
export function journalCostLine(what: string, on: JournalCostRow, off: JournalCostRow): string {
  const ratio = on.qtspCpuMs / off.qtspCpuMs;
  const percent = (ratio - 1) * 100;
  const sign = percent >= 0 ? '+' : '-';
  return (
    `journal on vs off (${what}): ${ratio.toFixed(2)} x the QTSP CPU per signDoc (${off.qtspCpuMs.toFixed(3)} -> ` +
    `${on.qtspCpuMs.toFixed(3)} ms, ${sign}${Math.abs(percent).toFixed(1)} %); ${on.perSecond.toFixed(1)} vs ` +
    `${off.perSecond.toFixed(1)} signDoc/s`
  );
}
