/**
 * The journal's gauges and what the status page reads: values left out when they could not be read (not a
 * false 0), combined across worker processes as each declares, signDoc's last hour from kept samples, and the
 * page escaping what it shows under a CSP that allows its one style block.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Registry } from 'prom-client';
import {
  aggregateProcesses,
  createMetrics,
  operationalGauges,
  type MetricsJson,
  type OperationalSnapshot,
} from '../../../src/http/metrics.ts';
import { signDocWindow } from '../../../src/http/signdoc-window.ts';
import { STATUS_PAGE_CSP, statusPage } from '../../../src/http/status-page.ts';

const base: OperationalSnapshot = { topics: {}, storeUp: true, redisUp: true, ready: true };

async function scrape(snapshot: OperationalSnapshot): Promise<string> {
  const registry = new Registry();
  await operationalGauges(registry, async () => snapshot).update();
  return registry.metrics();
}

async function json(snapshot: OperationalSnapshot): Promise<MetricsJson> {
  const registry = new Registry();
  await operationalGauges(registry, async () => snapshot).update();
  return registry.getMetricsAsJSON();
}

const journal = (over: Partial<NonNullable<OperationalSnapshot['journal']>> = {}) => ({
  seal: {
    lastBatch: { batchNo: 7, throughSeq: 70, sealedAt: new Date(1_700_000_000_000), secondTimeStamp: true },
    unsealed: 3,
    oldestUnsealedAt: new Date(Date.now() - 42_000),
  },
  secondTsa: true,
  audit: { at: new Date(1_700_000_100_000), clean: true, findings: 0 },
  renewalsDue: 0,
  ...over,
});

describe('operational gauges', () => {
  it('leave out what could not be read instead of a false 0, also after a value was set', async () => {
    const registry = new Registry();
    let snapshot: OperationalSnapshot = { ...base, idpListAgeSeconds: 5, journal: journal() };
    const gauges = operationalGauges(registry, async () => snapshot);
    await gauges.update();
    assert.match(await registry.metrics(), /^qtsp_journal_audit_clean 1$/m);
    snapshot = { ...base, journal: { secondTsa: false } };
    await gauges.update();
    const text = await registry.metrics();
    for (const name of [
      'qtsp_idp_list_age_seconds',
      'qtsp_journal_unsealed_entries',
      'qtsp_journal_last_batch_number',
      'qtsp_journal_audit_clean',
      'qtsp_journal_audit_timestamp_seconds',
      'qtsp_journal_renewals_due',
    ])
      assert.doesNotMatch(text, new RegExp(`^${name} `, 'm'), name);
    assert.match(text, /^qtsp_journal_second_tsa_enabled 0$/m);
    assert.doesNotMatch(await scrape(base), /^qtsp_journal_\w+ /m, 'journal off: no journal series');
  });

  it('show the sealed journal: the newest batch, what waits, the audit, the renewals due', async () => {
    const text = await scrape({ ...base, journal: journal({ renewalsDue: 1 }) });
    assert.match(text, /^qtsp_journal_last_batch_number 7$/m);
    assert.match(text, /^qtsp_journal_last_batch_timestamp_seconds 1700000000$/m);
    assert.match(text, /^qtsp_journal_unsealed_entries 3$/m);
    const age = Number(/^qtsp_journal_oldest_unsealed_age_seconds (\S+)$/m.exec(text)?.[1]);
    assert.ok(age >= 42 && age < 100, String(age));
    assert.match(text, /^qtsp_journal_second_tsa_enabled 1$/m);
    assert.match(text, /^qtsp_journal_audit_clean 1$/m);
    assert.match(text, /^qtsp_journal_audit_timestamp_seconds 1700000100$/m);
    assert.match(text, /^qtsp_journal_renewals_due 1$/m);
  });

  it('combine across workers: the store counts once (max), an audit with findings wins (min), failures add up', async () => {
    const clean = await json({ ...base, journal: journal() });
    const dirty = await json({
      ...base,
      journal: journal({ audit: { at: new Date(1_600_000_000_000), clean: false, findings: 2 } }),
    });
    const a = createMetrics();
    const b = createMetrics();
    a.sealFailures.inc({ tsa: 'second' }, 2);
    b.sealFailures.inc({ tsa: 'second' }, 3);
    const text = await aggregateProcesses([
      { worker: '0', metrics: [...clean, ...(await a.registry.getMetricsAsJSON())] },
      { worker: '1', metrics: [...dirty, ...(await b.registry.getMetricsAsJSON())] },
    ]).metrics();
    assert.match(text, /^qtsp_journal_unsealed_entries 3$/m);
    assert.match(text, /^qtsp_journal_audit_clean 0$/m);
    assert.match(text, /^qtsp_journal_audit_findings 2$/m);
    assert.match(text, /^qtsp_journal_audit_timestamp_seconds 1600000000$/m);
    assert.match(text, /^qtsp_journal_seal_failures_total\{tsa="second"\} 5$/m);
    assert.match(text, /^qtsp_journal_seal_failures_total\{tsa="ours"\} 0$/m);
  });
});

/** metrics of a process that answered `ok` 200s and `failed` 503s, every 200 within 0.05 s, every 503 in 2.5 s */
async function counters(ok: number, failed: number): Promise<MetricsJson> {
  const m = createMetrics();
  m.requests.inc({ status: '200' }, ok);
  m.requests.inc({ status: '503' }, failed);
  for (let i = 0; i < ok; i++) m.duration.observe({ status: '200' }, 0.04);
  for (let i = 0; i < failed; i++) m.duration.observe({ status: '503' }, 2);
  return m.registry.getMetricsAsJSON();
}

describe('signDoc of the last hour', () => {
  it('is the counters now minus the newest sample at least an hour old, or since the start', async () => {
    const start = 1_000_000_000_000;
    const w = signDocWindow(start);
    const young = w.lastHour(await counters(10, 0), start + 20 * 60_000);
    assert.equal(young.since.getTime(), start);
    assert.equal(young.total, 10);
    w.add(await counters(100, 1), start + 30 * 60_000);
    w.add(await counters(150, 1), start + 30 * 60_000 + 10_000); // within a minute of the last: not kept
    w.add(await counters(200, 2), start + 50 * 60_000);
    const hour = w.lastHour(await counters(300, 12), start + 95 * 60_000);
    assert.equal(hour.since.getTime(), start + 30 * 60_000);
    assert.deepEqual(Object.fromEntries(hour.byStatus), { '200': 200, '503': 11 });
    assert.equal(hour.total, 211);
    assert.equal(hour.p50, 0.05);
    assert.equal(hour.p99, 2.5);
    assert.ok(hour.mean! > 0.04 && hour.mean! < 0.2, String(hour.mean));
  });
});

describe('the status page', () => {
  it('escapes what it shows, runs no script, and its CSP allows exactly its style block', async () => {
    const metrics = await json({ ...base, journal: journal() });
    const page = statusPage({
      readiness: { ready: false, reasons: ['evidence store (sqlite) does not accept a write: <script>x</script>'] },
      metrics,
      lastHour: signDocWindow(Date.now() - 60_000).lastHour(metrics),
      now: new Date(),
    });
    assert.doesNotMatch(page, /<script/i);
    assert.match(page, /&lt;script&gt;x&lt;\/script&gt;/);
    const style = /<style>([\s\S]*?)<\/style>/.exec(page)![1]!;
    const hash = createHash('sha256').update(style).digest('base64');
    assert.ok(STATUS_PAGE_CSP.includes(`'sha256-${hash}'`), STATUS_PAGE_CSP);
    assert.match(STATUS_PAGE_CSP, /default-src 'none'/);
    for (const id of ['readiness', 'calendar', 'journal', 'deliveries', 'signdoc'])
      assert.match(page, new RegExp(`<section id="${id}">`), id);
  });
});
