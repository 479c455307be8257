/**
 * The shipped alert rules (docker/prometheus/qtsp-rules.yml) judged by Prometheus's own tool: `promtool check
 * rules` parses them, `promtool test rules` evaluates every alert against the input series of
 * docker/prometheus/qtsp-rules.test.yml (it fires when it must, and is silent on a healthy instance and before
 * its `for:` has passed). Besides: every alert has both cases, every qtsp_* metric a rule reads is one the
 * service exports, every alert is named in docs/operations.md, and promtool fails a rule that no longer fires.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

const DIR = fileURLToPath(new URL('../../docker/prometheus/', import.meta.url));
const RULES = join(DIR, 'qtsp-rules.yml');
const TESTS = join(DIR, 'qtsp-rules.test.yml');
const SOURCES = ['src/http/metrics.ts'].map((f) => fileURLToPath(new URL(`../../${f}`, import.meta.url)));
const OPERATIONS = fileURLToPath(new URL('../../docs/operations.md', import.meta.url));

interface Rule {
  readonly alert?: string;
  readonly record?: string;
  readonly expr: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}
interface AlertTest {
  readonly alertname: string;
  readonly exp_alerts: unknown[] | null;
}

function promtool(args: readonly string[], cwd: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile('promtool', args, { cwd, encoding: 'utf8', timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: `${stdout}${stderr}` }),
    );
  });
}

const rules = (): Rule[] =>
  (parse(readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);
const alerts = () => rules().filter((r) => r.alert);

describe('the shipped Prometheus rules (promtool)', () => {
  let work: string;
  before(() => {
    work = mkdtempSync(join(tmpdir(), 'qtsp-promtool-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('promtool check rules accepts the rule file', async () => {
    const r = await promtool(['check', 'rules', RULES], DIR);
    assert.equal(r.code, 0, r.output);
    assert.match(r.output, new RegExp(`SUCCESS: ${rules().length} rules found`));
  });

  it('promtool test rules passes: every alert fires on its input series and is silent where it must be', async () => {
    const r = await promtool(['test', 'rules', TESTS], DIR);
    assert.equal(r.code, 0, r.output);
    assert.match(r.output, /SUCCESS/);
  });

  it('every alert has a case where it fires and one where it is silent, a severity and a runbook', () => {
    const cases = (parse(readFileSync(TESTS, 'utf8')) as { tests: { alert_rule_test: AlertTest[] }[] }).tests.flatMap(
      (t) => t.alert_rule_test,
    );
    for (const rule of alerts()) {
      const mine = cases.filter((c) => c.alertname === rule.alert);
      assert.ok(
        mine.some((c) => (c.exp_alerts ?? []).length > 0),
        `${rule.alert}: no case where it fires`,
      );
      assert.ok(
        mine.some((c) => (c.exp_alerts ?? []).length === 0),
        `${rule.alert}: no case where it is silent`,
      );
      assert.match(rule.labels?.severity ?? '', /^(critical|warning|info)$/, `${rule.alert}: severity`);
      assert.match(rule.annotations?.runbook ?? '', /^docs\/operations\.md#alerts-of-/, `${rule.alert}: runbook`);
    }
    assert.ok(alerts().length >= 20, `only ${alerts().length} alerts`);
  });

  it('every runbook section exists in docs/operations.md and names each alert it serves', () => {
    const doc = readFileSync(OPERATIONS, 'utf8');
    const anchors = new Set(
      [...doc.matchAll(/^#+ (.+)$/gm)].map((m) =>
        m[1]!
          .toLowerCase()
          .replace(/[^a-z0-9 -]/g, '')
          .replace(/ /g, '-'),
      ),
    );
    for (const rule of alerts()) {
      const anchor = rule.annotations!.runbook!.split('#')[1]!;
      assert.ok(anchors.has(anchor), `${rule.alert}: no section #${anchor} in docs/operations.md`);
      assert.ok(doc.includes(`\`${rule.alert}\``), `${rule.alert} is not described in docs/operations.md`);
    }
  });

  it('every qtsp_* metric the rules read is one the service exports', () => {
    const source = SOURCES.map((f) => readFileSync(f, 'utf8')).join('\n');
    const read = new Set(rules().flatMap((r) => [...r.expr.matchAll(/\b(qtsp_[a-z0-9_]+)/g)].map((m) => m[1]!)));
    for (const name of read) {
      const base = name.replace(/_(bucket|sum|count)$/, '');
      assert.ok(source.includes(`'${base}'`), `${name}: no such metric in ${SOURCES.join(', ')}`);
    }
  });

  it('promtool test rules fails when a rule no longer fires (the cases are not vacuous)', async () => {
    const broken = readFileSync(RULES, 'utf8').replace('expr: qtsp_store_up == 0', 'expr: qtsp_store_up == 2');
    assert.notEqual(broken, readFileSync(RULES, 'utf8'));
    writeFileSync(join(work, 'qtsp-rules.yml'), broken);
    writeFileSync(join(work, 'qtsp-rules.test.yml'), readFileSync(TESTS));
    const r = await promtool(['test', 'rules', 'qtsp-rules.test.yml'], work);
    assert.notEqual(r.code, 0, r.output);
    assert.match(r.output, /alertname: QtspStoreDown/);
  });
});
