/**
 * bench/journal-cost.ts: the journal on/off line of the signDoc bench, ratio and per cent of the "off" row.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { journalCostLine } from '../../../bench/journal-cost.ts';

test('the line gives both CPU figures, their ratio and the difference in per cent', () => {
  assert.equal(
    journalCostLine('SQLite, B-B, one hash', { qtspCpuMs: 2.1, perSecond: 380 }, { qtspCpuMs: 2, perSecond: 400 }),
    'journal on vs off (SQLite, B-B, one hash): 1.05 x the QTSP CPU per signDoc (2.000 -> 2.100 ms, +5.0 %); 380.0 vs 400.0 signDoc/s',
  );
});

test('a journal run cheaper than the run without it (noise on a busy machine) shows as a minus', () => {
  assert.match(
    journalCostLine('x', { qtspCpuMs: 1.9, perSecond: 1 }, { qtspCpuMs: 2, perSecond: 1 }),
    /0\.95 x .*-5\.0 %\)/,
  );
});
