/**
 * The shipped rules (docker/prometheus/qtsp-rules.yml) in a real Prometheus (Debian's package) scraping a
 * running `qtsp serve` every second, read through Prometheus's own HTTP API (/api/v1/alerts):
 * (a) a healthy service raises no alert at all;
 * (b) a store that refuses writes (SQLite at its size cap: SQLITE_FULL, what a full disk gives; readiness
 *     detects it) raises QtspStoreDown;
 * (c) the service's clock moved by libfaketime until a ceremony-renewed object has 20 days left raises
 *     QtspPkiEndsWithin30Days for that object.
 * The rules are loaded as shipped, with their `for:` durations: the test waits for the alerts to fire, with a
 * deadline (QtspStoreDown waits 30 s, the calendar alert 1 min).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { sqlitePath } from '../../src/store/open.ts';
import { startServeFleet, type ServeFleet, type ServeProcess } from '../helpers/instances.ts';
import { MovedClock } from '../helpers/moved-clock.ts';
import { eventually, startPrometheus, type LocalPrometheus, type PromAlert } from '../helpers/prometheus.ts';

const MAX_STORE_BYTES = 4 * 1024 * 1024;

let dir: string;
let clock: MovedClock;
let fleet: ServeFleet;
let serve: ServeProcess;
let dataDir: string;
let prom: LocalPrometheus;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'qtsp-prom-live-'));
  clock = new MovedClock(dir);
  fleet = await startServeFleet();
  const env = fleet.instanceEnv('live', {
    extra: {
      ...clock.env(),
      QTSP_STORE_SQLITE_MAX_BYTES: String(MAX_STORE_BYTES),
      QTSP_STORE_PING_INTERVAL_MS: '1000',
      QTSP_LOG_LEVEL: 'warn',
    },
  });
  dataDir = env.QTSP_DATA_DIR!;
  serve = await fleet.spawn(env);
  prom = await startPrometheus({ dir: join(dir, 'prometheus'), targets: [new URL(serve.opsUrl).host] });
});

after(async () => {
  await prom?.stop();
  await fleet?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const describeAlerts = (alerts: readonly PromAlert[]) =>
  alerts.map((a) => `${a.labels.alertname}${a.labels.object ? `{object=${a.labels.object}}` : ''} ${a.state}`);

describe('the shipped rules in a real Prometheus scraping qtsp serve', () => {
  it('(a) a healthy service: the target is up, the rules run, and no alert is pending or firing', async () => {
    await eventually('the qtsp target up', 60_000, async () =>
      (await prom.targets()).every((t) => t.health === 'up') ? true : undefined,
    );
    await eventually('the store gauge in Prometheus', 60_000, async () =>
      (await prom.query('qtsp_store_up == 1')).length === 1 ? true : undefined,
    );
    // every group evaluated since the gauges arrived, a few rounds
    const since = Date.now();
    await eventually('the rule groups evaluated', 30_000, async () => {
      const groups = await prom.rules();
      return groups.length === 5 && groups.every((g) => Date.parse(g.lastEvaluation) > since + 3000) ? true : undefined;
    });
    const days = await prom.query('qtsp_pki_days_left');
    assert.ok(days.length >= 5, `calendar series: ${JSON.stringify(days)}`);
    assert.deepEqual(describeAlerts(await prom.alerts()), []);
  });

  it('(b) the store refuses writes: QtspStoreDown fires; (c) an object within 30 days: QtspPkiEndsWithin30Days', async () => {
    const ceremony = await prom.query('qtsp_pki_days_left{renewed_by!="service"}');
    const [soonest] = ceremony.sort((a, b) => Number(a.value[1]) - Number(b.value[1]));
    assert.ok(soonest && Number(soonest.value[1]) > 31, JSON.stringify(ceremony));
    const object = soonest.metric.object!;
    // 20 days left for that object on the service's clock
    clock.set(Math.floor(Number(soonest.value[1])) - 20);
    const db = new Database(sqlitePath(dataDir));
    try {
      // another connection grows the file past the service's cap: every write of the service fails with
      // SQLITE_FULL, as on a full disk (a full filesystem cannot be made here without root)
      db.exec('CREATE TABLE IF NOT EXISTS test_filler (x BLOB)');
      const insert = db.prepare('INSERT INTO test_filler VALUES (zeroblob(65536))');
      const bytes = () =>
        (db.pragma('page_count', { simple: true }) as number) * (db.pragma('page_size', { simple: true }) as number);
      while (bytes() <= MAX_STORE_BYTES + 65536) insert.run();
      const firing = await eventually('both alerts firing', 180_000, async () => {
        const alerts = (await prom.alerts()).filter((a) => a.state === 'firing');
        const store = alerts.find((a) => a.labels.alertname === 'QtspStoreDown');
        const calendar = alerts.find(
          (a) => a.labels.alertname === 'QtspPkiEndsWithin30Days' && a.labels.object === object,
        );
        return store && calendar ? { store, calendar, all: alerts } : undefined;
      });
      console.log(`firing alerts (object ${object} moved to 20 days left):`, describeAlerts(firing.all).join(', '));
      assert.equal(firing.store.labels.severity, 'critical');
      assert.equal(firing.store.annotations.runbook, 'docs/operations.md#alerts-of-the-service');
      assert.equal(firing.calendar.labels.severity, 'warning');
      assert.equal(firing.calendar.annotations.runbook, 'docs/operations.md#alerts-of-the-calendar');
      // what Prometheus read is what the service says
      const ready = await fetch(`${serve.opsUrl}/health/ready`);
      assert.equal(ready.status, 503);
      assert.match(JSON.stringify(await ready.json()), /evidence store \(sqlite\) does not accept a write/);
    } finally {
      db.close();
    }
  });
});
