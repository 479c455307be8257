/**
 * openapi.yaml as the field's standard linter reads it: Redocly's recommended rules, with
 * the reviewed exceptions of .redocly.lint-ignore.yaml and nothing else. Runs offline: telemetry and the
 * update check are off (REDOCLY_TELEMETRY, REDOCLY_SUPPRESS_UPDATE_NOTICE), the recommended rule set is
 * built into @redocly/cli, and openapi.yaml has no remote $ref.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const REDOCLY = fileURLToPath(new URL('../../../node_modules/@redocly/cli/bin/cli.js', import.meta.url));

test('openapi.yaml: redocly lint (recommended rules) reports no error and no warning', () => {
  const run = spawnSync(process.execPath, [REDOCLY, 'lint', 'openapi.yaml', '--format=stylish'], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
    timeout: 120_000,
  });
  const output = `${run.stdout}\n${run.stderr}`;
  assert.equal(run.status, 0, output);
  assert.match(output, /Your API description is valid/, output);
  assert.doesNotMatch(output, /You have \d+ warning/, output);
  // stylish format: one "line:column  severity  rule  message" line per problem
  assert.doesNotMatch(output, /^\s*\d+:\d+\s+(error|warning)\s/m, output);
});

test('openapi.yaml: signDoc and the admin endpoint require mutual TLS; the public endpoints say they need none', () => {
  const doc = parse(readFileSync(`${ROOT}openapi.yaml`, 'utf8')) as {
    paths: Record<string, Record<string, { security?: Record<string, string[]>[] }>>;
    components: { securitySchemes: Record<string, { type: string }> };
  };
  const schemes = doc.components.securitySchemes;
  const schemeOf = (path: string, method: string) => {
    const security = doc.paths[path]?.[method]?.security;
    assert.ok(security, `${method.toUpperCase()} ${path} declares security`);
    return security.flatMap((requirement) => Object.keys(requirement).map((name) => schemes[name]?.type));
  };
  assert.deepEqual(schemeOf('/signDoc', 'post'), ['mutualTLS']);
  assert.deepEqual(schemeOf('/admin/v1/notifications', 'post'), ['mutualTLS']);
  for (const [path, method] of [
    ['/ocsp', 'post'],
    ['/tsa', 'post'],
    ['/crl/{ca}.crl', 'get'],
    ['/ca/{ca}.crt', 'get'],
    ['/health/live', 'get'],
    ['/health/ready', 'get'],
    ['/metrics', 'get'],
  ] as const) {
    assert.deepEqual(schemeOf(path, method), [], `${path} is public`);
  }
});
