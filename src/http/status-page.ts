/**
 * The status page of the operations listener (GET /): what an on-call person looks at first, server-rendered
 * from what /health/ready and /metrics answer (so a cluster's primary shows the whole instance): readiness with
 * its reasons, the calendar as days left per object, the journal, the deliveries, and signDoc of the last hour
 * (signdoc-window.ts). No personal data: counts, object names and times only. No script; one inline style
 * allowed by its hash (CSP), the calendar bars drawn as inline SVG (attributes, not styles).
 */
import { createHash } from 'node:crypto';
import { html, Html } from '../util/html.ts';
import type { MetricsJson } from './metrics.ts';
import { seriesOf, sumBy, gaugeValue } from './metric-values.ts';
import type { SignDocWindow } from './signdoc-window.ts';

const STYLE = `body{font-family:system-ui,sans-serif;max-width:60rem;margin:1.5rem auto;padding:0 1rem;color:#1d2733}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:1.6rem;border-bottom:1px solid #c8d0da}
table{border-collapse:collapse}td,th{text-align:left;padding:.2rem .8rem .2rem 0;vertical-align:top}
.ok{color:#146c2e;font-weight:600}.bad{color:#a01818;font-weight:600}.warn{color:#8a5a00;font-weight:600}
.muted{color:#5b6775}svg text{font-size:12px;font-family:system-ui,sans-serif}`;

/** Content-Security-Policy of the page: nothing loads, nothing runs; only its own style block applies. */
export const STATUS_PAGE_CSP =
  `default-src 'none'; style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'; ` +
  "img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export interface StatusInputs {
  /** what /health/ready answers */
  readonly readiness: { readonly ready: boolean; readonly reasons: readonly string[] };
  readonly metrics: MetricsJson;
  readonly lastHour: SignDocWindow;
  readonly now: Date;
}

export function statusPage(inputs: StatusInputs): string {
  const { readiness, now } = inputs;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>QTSP status</title><style>${new Html(STYLE)}</style></head>
<body><h1>QTSP status</h1><p class="muted">as of ${iso(now)} (the service's clock)</p>
<section id="readiness"><h2>Readiness</h2>
<p class="${readiness.ready ? 'ok' : 'bad'}">${readiness.ready ? 'ready' : 'not ready'}</p>
${reasonList(readiness.reasons)}
</section>
${calendarSection(inputs.metrics)}${journalSection(inputs.metrics)}${deliveriesSection(inputs.metrics)}
${signDocSection(inputs.lastHour, now)}
</body></html>`.text;
}

const reasonList = (reasons: readonly string[]) =>
  reasons.length ? html`<ul>${reasons.map((r) => html`<li>${r}</li>`)}</ul>` : html`<p>no reason given</p>`;

const iso = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');
const fromUnix = (s: number | undefined) => (s === undefined ? 'unknown' : iso(new Date(s * 1000)));

/** how long, in words a person reads at a glance */
function duration(seconds: number): string {
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86_400)} days`;
}

/** colour of a bar: ended, within 7, 30, 90 days, or later (the thresholds of docs/operations.md) */
function colourOf(days: number): { fill: string; word: string } {
  if (days <= 0) return { fill: '#5c0a0a', word: 'ended' };
  if (days < 7) return { fill: '#c62828', word: 'within 7 days' };
  if (days < 30) return { fill: '#ef6c00', word: 'within 30 days' };
  if (days < 90) return { fill: '#f9a825', word: 'within 90 days' };
  return { fill: '#2e7d32', word: 'later' };
}

const SCALE_DAYS = 400;
const BAR_X = 190;
const BAR_WIDTH = 560;

function calendarSection(metrics: MetricsJson): Html {
  // the deadline the days count down to: the end, or the key's usage end where that comes first
  const ends = new Map<unknown, number>();
  for (const name of ['qtsp_pki_end_timestamp_seconds', 'qtsp_pki_key_usage_end_timestamp_seconds'])
    for (const s of seriesOf(metrics, name))
      ends.set(s.labels.object, Math.min(ends.get(s.labels.object) ?? Infinity, s.value));
  const rows = [...sumByMin(metrics, 'qtsp_pki_days_left')].sort((a, b) => a[1] - b[1]);
  if (rows.length === 0) return html`<section id="calendar"><h2>Calendar</h2><p>not read</p></section>`;
  return html`<section id="calendar"><h2>Calendar: days left per object</h2>${timeline(rows, ends)}
<p class="muted">the earlier of the object's end and its key's usage end; colours at 90, 30 and 7 days;
scale to ${SCALE_DAYS} days</p></section>`;
}

/** one bar per object, its length the days left, with marks at 7, 30, 90 and 365 days */
function timeline(rows: readonly [string, number][], ends: ReadonlyMap<unknown, number>): Html {
  const x = (days: number) => BAR_X + (Math.min(Math.max(days, 0), SCALE_DAYS) / SCALE_DAYS) * BAR_WIDTH;
  const height = 22 * rows.length + 24;
  const marks = [7, 30, 90, 365].map(
    (d) =>
      html`<line x1="${x(d)}" y1="0" x2="${x(d)}" y2="${height - 16}" stroke="#9aa5b1" stroke-dasharray="3,3"/>
<text x="${x(d) - 8}" y="${height - 4}">${d} d</text>`,
  );
  const bars = rows.map(([object, days], i) => {
    const { fill, word } = colourOf(days);
    const y = 22 * i;
    const width = Math.max(x(days) - BAR_X, 3);
    return html`<g class="object" data-object="${object}"><text x="0" y="${y + 15}">${object}</text>
<rect x="${BAR_X}" y="${y + 4}" width="${width}" height="14" fill="${fill}"><title>${object}: ${word}</title></rect>
<text x="${x(days) + 6}" y="${y + 15}">${Math.floor(days)} days (${word}),
until ${fromUnix(ends.get(object))}</text></g>`;
  });
  return html`<svg role="img" aria-label="days left per object" width="${BAR_X + BAR_WIDTH + 320}" height="${height}">
${marks}${bars}</svg>`;
}

/** the lowest value per object (several instances' series) */
function sumByMin(metrics: MetricsJson, name: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of seriesOf(metrics, name)) {
    const key = String(s.labels.object);
    out.set(key, Math.min(out.get(key) ?? Infinity, s.value));
  }
  return out;
}

function journalSection(metrics: MetricsJson): Html {
  const v = (name: string) => gaugeValue(metrics, `qtsp_journal_${name}`);
  const batch = v('last_batch_number');
  if (batch === undefined)
    return html`<section id="journal"><h2>Journal</h2><p>off, or the store did not answer</p></section>`;
  const clean = v('audit_clean');
  const failures = [...sumBy(metrics, 'qtsp_journal_seal_failures_total', 'tsa')].map(([tsa, n]) => `${tsa}: ${n}`);
  const rows: [string, Html | string][] = [
    ['last batch', batch === 0 ? 'none yet' : `${batch}, sealed ${fromUnix(v('last_batch_timestamp_seconds'))}`],
    ['unsealed entries', unsealed(v('unsealed_entries'), v('oldest_unsealed_age_seconds'))],
    ['second TSA', v('second_tsa_enabled') === 1 ? 'on' : 'off'],
    [
      'last audit',
      clean === undefined
        ? 'none yet'
        : html`<span class="${clean === 1 ? 'ok' : 'bad'}">
${clean === 1 ? 'clean' : `${v('audit_findings')} findings`}</span>, ${fromUnix(v('audit_timestamp_seconds'))}`,
    ],
    ['seal failures since start', failures.join(', ') || 'none'],
    ['time-stamp renewals due', String(v('renewals_due') ?? 'not checked yet')],
  ];
  return html`<section id="journal"><h2>Journal</h2>${table(rows)}</section>`;
}

/** how many entries wait to be sealed, and for how long the oldest has */
function unsealed(count: number | undefined, oldestSeconds: number | undefined): string {
  if (count === undefined) return 'unknown';
  return count === 0 ? '0' : `${count} (the oldest for ${duration(oldestSeconds ?? 0)})`;
}

function deliveriesSection(metrics: MetricsJson): Html {
  const topics = new Map<string, Map<string, number>>();
  for (const s of seriesOf(metrics, 'qtsp_outbox_entries')) {
    const topic = String(s.labels.topic);
    topics.set(topic, (topics.get(topic) ?? new Map()).set(String(s.labels.state), s.value));
  }
  const oldest = new Map(
    seriesOf(metrics, 'qtsp_outbox_oldest_undelivered_age_seconds').map((s) => [s.labels.topic, s.value]),
  );
  if (topics.size === 0)
    return html`<section id="deliveries"><h2>Deliveries</h2><p>the outbox did not answer</p></section>`;
  const states = ['pending', 'queued', 'delivered', 'failed'];
  const rows = [...topics].map(
    ([topic, counts]) =>
      html`<tr><td>${topic}</td>${states.map((st) => html`<td>${counts.get(st) ?? 0}</td>`)}<td>${
        oldest.has(topic) ? (oldest.get(topic) === 0 ? 'none' : duration(oldest.get(topic)!)) : 'unknown'
      }</td></tr>`,
  );
  return html`<section id="deliveries"><h2>Deliveries (outbox)</h2><table><tr><th>topic</th>${states.map(
    (st) => html`<th>${st}</th>`,
  )}<th>oldest undelivered</th></tr>${rows}</table></section>`;
}

function signDocSection(w: SignDocWindow, now: Date): Html {
  const minutes = Math.round((now.getTime() - w.since.getTime()) / 60_000);
  const seconds = (s: number | undefined) => (s === undefined ? '-' : s === Infinity ? 'above 10 s' : `≤ ${s} s`);
  const answers = [...w.byStatus].filter(([, n]) => n > 0).sort();
  const rows: [string, string][] = [
    ['answers', `${w.total}${answers.length ? ` (${answers.map(([st, n]) => `${st}: ${n}`).join(', ')})` : ''}`],
    ['mean latency', w.mean === undefined ? '-' : `${w.mean.toFixed(3)} s`],
    ['p50 / p90 / p99', `${seconds(w.p50)} / ${seconds(w.p90)} / ${seconds(w.p99)}`],
  ];
  return html`<section id="signdoc"><h2>signDoc, last hour</h2>
<p class="muted">since ${iso(w.since)} (${minutes} min): the counters now minus their values an hour ago,
or since the start</p>
${table(rows)}</section>`;
}

function table(rows: readonly (readonly [string, Html | string])[]): Html {
  return html`<table>${rows.map(([k, v]) => html`<tr><th>${k}</th><td>${v}</td></tr>`)}</table>`;
}
