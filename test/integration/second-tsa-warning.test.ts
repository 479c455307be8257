/**
 * `qtsp serve` (the production start) says once, at start, when no second TSA of another operator
 * time-stamps the journal's batches (docs/operations.md, settings a real deployment must set), and says
 * nothing when one is set. Both starts stop afterwards at the missing TLS files of an empty data directory.
 */
import { after, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { qtsp } from '../helpers/qtsp-cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'qtsp-second-tsa-warning-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** the service's log on (test processes run silent) and a Redis URL, so no local redis-server is started */
const ENV = { QTSP_LOG_LEVEL: 'info', REDIS_URL: 'redis://127.0.0.1:9' };
const warnings = (output: string) => output.split('\n').filter((l) => l.includes('"journal.second_tsa_unset"'));

it('a production start without a second TSA warns once, in one log line; with one it does not', async () => {
  const without = await qtsp(['serve'], { ...ENV, QTSP_DATA_DIR: join(dir, 'without') });
  assert.notEqual(without.code, 0, 'the empty data directory stops the start');
  assert.match(without.stderr, /configuration error/);
  const lines = warnings(without.output);
  assert.equal(lines.length, 1, without.output);
  assert.equal(JSON.parse(lines[0]!).level, 40, 'a warning');
  assert.match(lines[0]!, /QTSP_JOURNAL_SECOND_TSA_URL/);

  const withSecond = await qtsp(['serve'], {
    ...ENV,
    QTSP_DATA_DIR: join(dir, 'with'),
    QTSP_JOURNAL_SECOND_TSA_URL: 'http://127.0.0.1:9/tsa',
    QTSP_JOURNAL_SECOND_TSA_CHAIN_FILE: join(dir, 'tsa2-chain.pem'),
  });
  assert.notEqual(withSecond.code, 0);
  assert.deepEqual(warnings(withSecond.output), [], withSecond.output);
});
