/**
 * The podman commands that `npm run test:container` runs (test/container/compose.ts) say what
 * docker/compose.yaml says: for every service, each key becomes its flag, and no flag comes from elsewhere.
 * compose.yaml is read here a second way (the text parsed by the yaml library's Document API, anchors
 * resolved by it), so a key the runner forgets or invents shows up.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseDocument } from 'yaml';
import {
  containerName,
  interpolate,
  loadCompose,
  networkName,
  runArgs,
  seconds,
  startOrder,
  volumeName,
} from '../../container/compose.ts';

const FILE = fileURLToPath(new URL('../../../docker/compose.yaml', import.meta.url));
const ENV = { POSTGRES_PASSWORD: 'pw' };

/** the services as yaml's own document model resolves them (merge keys, aliases) */
function services(): Record<string, Record<string, unknown>> {
  const doc = parseDocument(readFileSync(FILE, 'utf8'), { merge: true });
  return (doc.toJS({ maxAliasCount: -1 }) as { services: Record<string, Record<string, unknown>> }).services;
}

/** the flags a key of compose.yaml must become, from the raw value */
function expectedFlags(name: string, s: Record<string, unknown>): string[] {
  const project = 'qtsp';
  const flags = [
    '--detach',
    `--name=${project}-${name}-1`,
    `--label=com.docker.compose.project=${project}`,
    `--label=com.docker.compose.service=${name}`,
    `--network=${project}_default`,
    `--network-alias=${name}`,
  ];
  if (s.hostname) flags.push(`--hostname=${s.hostname as string}`);
  if (s.init === true) flags.push('--init');
  if (s.restart) flags.push(`--restart=${s.restart as string}`);
  if (s.read_only === true) flags.push('--read-only');
  for (const t of (s.tmpfs as string[] | undefined) ?? []) flags.push(`--tmpfs=${t}`);
  for (const [k, v] of Object.entries((s.environment as Record<string, string>) ?? {}))
    flags.push(`--env=${k}=${interpolate(String(v), ENV)}`);
  for (const v of (s.volumes as string[] | undefined) ?? []) {
    const [source, ...rest] = v.split(':');
    const from = source!.startsWith('.')
      ? fileURLToPath(new URL(source!, new URL('../../../docker/', import.meta.url)))
      : `${project}_${source}`;
    flags.push(`--volume=${[from, ...rest].join(':')}`);
  }
  for (const p of (s.ports as string[] | undefined) ?? []) flags.push(`--publish=${p}`);
  const h = s.healthcheck as Record<string, unknown> | undefined;
  if (h) {
    const [kind, ...args] = h.test as string[];
    assert.equal(kind, 'CMD', `${name}: healthcheck in exec form`);
    flags.push(`--health-cmd=${JSON.stringify(args)}`);
    for (const k of ['interval', 'timeout', 'retries', 'start_period'])
      if (h[k] !== undefined) flags.push(`--health-${k.replace('_', '-')}=${String(h[k])}`);
  }
  if (s.stop_grace_period) flags.push(`--stop-timeout=${Number.parseInt(s.stop_grace_period as string, 10)}`);
  if (s.entrypoint)
    flags.push(`--entrypoint=${JSON.stringify((s.entrypoint as string[]).map((a) => a.replace('$$', '$')))}`);
  return flags;
}

describe('docker/compose.yaml as podman commands', () => {
  const compose = loadCompose(FILE, ENV);
  const raw = services();

  it('reads the project name, every service and every named volume', () => {
    assert.equal(compose.name, 'qtsp');
    assert.deepEqual(Object.keys(compose.services).sort(), Object.keys(raw).sort());
    assert.equal(networkName(compose), 'qtsp_default');
    assert.equal(volumeName(compose, 'shared'), 'qtsp_shared');
    assert.equal(containerName(compose, 'qtsp1'), 'qtsp-qtsp1-1');
  });

  it('turns every key of every service into its flag, in order, and adds nothing', () => {
    const known = new Set([
      'build',
      'image',
      'init',
      'restart',
      'read_only',
      'tmpfs',
      'entrypoint',
      'command',
      'environment',
      'volumes',
      'ports',
      'hostname',
      'depends_on',
      'healthcheck',
      'stop_grace_period',
    ]);
    for (const [name, s] of Object.entries(raw)) {
      for (const key of Object.keys(s)) assert.ok(known.has(key), `${name}: the runner does not know ${key}`);
      const args = runArgs(compose, name);
      const image = s.image as string;
      const at = args.indexOf(image);
      assert.ok(at > 0, `${name}: image ${image}`);
      assert.deepEqual(args.slice(0, at), expectedFlags(name, s), name);
      assert.deepEqual(args.slice(at + 1), (s.command as string[] | undefined) ?? [], `${name}: command`);
    }
  });

  it('starts each service after what it depends on; the instances after pki-init, the databases and the sandbox', () => {
    const order = startOrder(compose);
    assert.deepEqual([...order].sort(), Object.keys(raw).sort());
    for (const [name, s] of Object.entries(raw))
      for (const dep of Object.keys((s.depends_on as object | undefined) ?? {}))
        assert.ok(order.indexOf(dep) < order.indexOf(name), `${dep} before ${name}`);
    assert.ok(order.indexOf('haproxy') > order.indexOf('qtsp2'));
  });

  it('interpolates as compose does: defaults, $$ for a literal $', () => {
    // compose's ${...}, built from parts so that it reads as no template placeholder
    const v = (inner: string) => `$\{${inner}}`;
    assert.equal(interpolate(`${v('A:-x')}/${v('B-y')}/$$@/$A`, { A: 'a' }), 'a/y/$@/a');
    assert.equal(interpolate(v('A:-x'), { A: '' }), 'x');
    assert.equal(interpolate(v('A-x'), { A: '' }), '');
    assert.equal(
      compose.services.qtsp1!.environment!.QTSP_STORE_URL,
      'postgres://qtsp:pw@postgres:5432/qtsp',
      'the password from the environment',
    );
    assert.equal(seconds('1m30s'), 90);
  });
});
