/**
 * docker/, checked without a container engine: compose.yaml parses and has the production
 * shape (two instances on PostgreSQL and one Redis with AOF and noeviction, a worker, HAProxy, the sandbox,
 * health checks); HAProxy mounts docker/haproxy.cfg, the file test/integration/scale-out.test.ts runs, with
 * every variable it reads set, and `haproxy -c` accepts it with compose's values; each qtsp service's
 * environment passes our configuration schema; the image is multi-stage and runs as a non-root user.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { loadConfig } from '../../../src/config/load.ts';

const DOCKER = fileURLToPath(new URL('../../../docker/', import.meta.url));
const read = (name: string) => readFileSync(DOCKER + name, 'utf8');

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  entrypoint?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
}
const compose = parse(read('compose.yaml'), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const services = compose.services;

/** compose's own interpolation: ${NAME:-default} and $$ */
const interpolate = (value: string) =>
  value.replace(/\$\{([A-Z_]+):-([^}]*)\}/g, (_m, _n, d: string) => d).replace(/\$\$/g, '$');

function haproxyBinary(): string {
  const found = spawnSync('sh', ['-c', 'command -v haproxy'], { encoding: 'utf8' }).stdout.trim();
  return found || '/usr/sbin/haproxy';
}

describe('docker/compose.yaml', () => {
  it('has two instances, the worker, PostgreSQL, Redis, HAProxy and the sandbox, each with a health check', () => {
    for (const name of ['qtsp1', 'qtsp2', 'worker', 'postgres', 'redis', 'haproxy', 'sandbox', 'pki-init'])
      assert.ok(services[name], name);
    for (const name of ['qtsp1', 'qtsp2', 'postgres', 'redis', 'haproxy', 'sandbox'])
      assert.ok(services[name]!.healthcheck?.test.length, `${name} has a health check`);
    assert.deepEqual(services['qtsp1']!.healthcheck!.test, ['CMD', 'node', 'docker/healthcheck.mjs']);
    assert.ok(existsSync(`${DOCKER}healthcheck.mjs`));
  });

  it('instances share PostgreSQL and Redis, have their own ids and data volumes, and pass the configuration schema', () => {
    const instances = ['qtsp1', 'qtsp2'].map((n) => services[n]!);
    const env = instances.map((s) =>
      Object.fromEntries(Object.entries(s.environment!).map(([k, v]) => [k, interpolate(String(v))])),
    );
    assert.equal(env[0]!['QTSP_STORE_DRIVER'], 'postgres');
    assert.equal(env[0]!['QTSP_STORE_URL'], env[1]!['QTSP_STORE_URL']);
    assert.match(env[0]!['QTSP_STORE_URL']!, /@postgres:5432\//);
    assert.equal(env[0]!['QTSP_REDIS_URL'], 'redis://redis:6379');
    assert.equal(env[0]!['QTSP_REDIS_URL'], env[1]!['QTSP_REDIS_URL']);
    assert.deepEqual(
      env.map((e) => e['QTSP_INSTANCE_ID']),
      ['qtsp1', 'qtsp2'],
    );
    assert.equal(env[0]!['QTSP_DELIVERY_IN_PROCESS_WORKER'], 'false', 'deliveries run in the worker service');
    const dataVolumes = instances.map((s) => s.volumes!.find((v) => v.endsWith(':/data')));
    assert.ok(
      dataVolumes[0] && dataVolumes[1] && dataVolumes[0] !== dataVolumes[1],
      `own data volumes: ${dataVolumes.join(', ')}`,
    );
    for (const e of [
      ...env,
      Object.fromEntries(Object.entries(services['worker']!.environment!).map(([k, v]) => [k, interpolate(String(v))])),
    ]) {
      const config = loadConfig({}, { ...e, QTSP_DATA_DIR: '/data' });
      assert.equal(config.store.driver, 'postgres');
    }
    assert.deepEqual(services['qtsp1']!.command, ['serve']);
    assert.deepEqual(services['worker']!.command, ['worker']);
    assert.match(interpolate(services['qtsp1']!.entrypoint!.join(' ')), /exec node dist\/cli\/main\.js "\$@"/);
  });

  it('Prometheus scrapes every `qtsp serve` instance as job "qtsp" with the shipped rules; promtool accepts it', () => {
    const prometheus = services['prometheus']!;
    assert.ok(prometheus.healthcheck?.test.length, 'prometheus has a health check');
    assert.deepEqual(prometheus.volumes, [
      './prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro',
      './prometheus/qtsp-rules.yml:/etc/prometheus/qtsp-rules.yml:ro',
      'prometheus:/prometheus',
    ]);
    const config = parse(read('prometheus/prometheus.yml')) as {
      rule_files: string[];
      scrape_configs: { job_name: string; static_configs: { targets: string[] }[] }[];
    };
    assert.deepEqual(config.rule_files, ['/etc/prometheus/qtsp-rules.yml']);
    const instances = Object.entries(services)
      .filter(([, s]) => s.command?.[0] === 'serve')
      .map(([name]) => `${name}:8438`);
    const job = config.scrape_configs.find((j) => j.job_name === 'qtsp');
    assert.deepEqual(job?.static_configs.flatMap((c) => c.targets).sort(), instances.sort());
    for (const name of instances.map((i) => i.split(':')[0]!))
      assert.ok(Object.keys(prometheus.depends_on ?? {}).includes(name), `prometheus starts after ${name}`);
    // the config as the container reads it: the rule file beside it
    const dir = mkdtempSync(join(tmpdir(), 'qtsp-promconfig-'));
    try {
      writeFileSync(
        join(dir, 'prometheus.yml'),
        read('prometheus/prometheus.yml').replace('/etc/prometheus/qtsp-rules.yml', join(dir, 'qtsp-rules.yml')),
      );
      writeFileSync(join(dir, 'qtsp-rules.yml'), read('prometheus/qtsp-rules.yml'));
      const check = spawnSync('promtool', ['check', 'config', join(dir, 'prometheus.yml')], { encoding: 'utf8' });
      assert.equal(check.status, 0, check.stdout + check.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('Redis keeps every job: AOF with fsync always, noeviction', () => {
    const cmd = services['redis']!.command!.join(' ');
    assert.match(cmd, /--appendonly yes/);
    assert.match(cmd, /--appendfsync always/);
    assert.match(cmd, /--maxmemory-policy noeviction/);
  });

  it('HAProxy runs docker/haproxy.cfg with every variable it reads, pointing at the instances; haproxy -c accepts it', () => {
    const haproxy = services['haproxy']!;
    assert.ok(haproxy.volumes!.includes('./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro'));
    const cfg = read('haproxy.cfg');
    const directives = cfg.replace(/^\s*#.*$/gm, '');
    const used = new Set([...directives.matchAll(/"\$\{([A-Z0-9_]+)\}"/g)].map((m) => m[1]!));
    assert.deepEqual([...used].sort(), Object.keys(haproxy.environment!).sort());
    const env = haproxy.environment!;
    const defaults = loadConfig({}, {});
    assert.equal(env['QTSP1_SIGNDOC'], `qtsp1:${defaults.server.port}`);
    assert.equal(env['QTSP2_SIGNDOC'], `qtsp2:${defaults.server.port}`);
    assert.equal(env['QTSP1_PUBLICATION'], `qtsp1:${defaults.server.publicationPort}`);
    assert.equal(env['QTSP1_OPS_PORT'], String(defaults.ops.port), 'health checks ask the operations listener');
    assert.equal(services['qtsp1']!.environment!['QTSP_OPS_HOST'], '0.0.0.0', 'which HAProxy must reach');
    assert.match(cfg, /^\s*mode tcp$/m);
    const check = spawnSync(haproxyBinary(), ['-c', '-f', `${DOCKER}haproxy.cfg`], {
      env: { PATH: process.env.PATH ?? '', ...env },
      encoding: 'utf8',
    });
    assert.equal(check.status, 0, check.stdout + check.stderr);
  });
});

describe('docker/Dockerfile', () => {
  const dockerfile = read('Dockerfile');
  const stages = dockerfile.split(/^FROM /m).slice(1);

  it('is multi-stage: the compiler stays in the build stage', () => {
    assert.ok(stages.length >= 2, 'at least a build and a runtime stage');
    const runtime = stages[stages.length - 1]!;
    assert.match(stages[0]!, /g\+\+/);
    assert.doesNotMatch(runtime, /g\+\+|make|python3/);
    assert.match(runtime, /COPY --from=build \/app\/node_modules/);
  });

  it('compiles in the build stage; the runtime runs the build (dist/), not the sources through tsx', () => {
    assert.match(stages[0]!, /^RUN npm run build\b/m);
    const runtime = stages[stages.length - 1]!;
    assert.match(runtime, /COPY --from=build \/app\/dist \.\/dist/);
    assert.doesNotMatch(runtime, /COPY src\b/);
    assert.match(runtime, /^ENTRYPOINT \["node", "dist\/cli\/main\.js"\]/m);
  });

  it('runs as a non-root user, with a private data directory', () => {
    const runtime = stages[stages.length - 1]!;
    const user = /^USER (\S+)/m.exec(runtime)?.[1];
    assert.ok(user && !/^(0|root)(:|$)/.test(user), `USER ${user}`);
    assert.match(runtime, /chmod 0700 \/data/);
  });
});
