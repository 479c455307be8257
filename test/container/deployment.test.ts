/**
 * docker/ built and run: `podman build -f docker/Dockerfile`, then docker/compose.yaml carried out with podman
 * (test/container/compose.ts): PostgreSQL, Redis, the sandbox, two `qtsp serve` instances, a `qtsp worker`,
 * HAProxy and Prometheus, each in its container on the project's network. Shown:
 * - the runtime image runs as uid 10001 on a read-only root filesystem, holds no compiler and no development
 *   package, loads its native modules, and its healthcheck passes; an SBOM of its npm packages lies beside it;
 * - the running containers carry what compose.yaml says (environment, mounts, healthchecks);
 * - Prometheus (Debian's package, docker/prometheus/) scrapes every instance with the shipped rules: every
 *   target up, and no alert firing for the healthy deployment;
 * - README's B-LT flow from the host through HAProxy: a CAdES that `openssl cms -verify -cades` accepts and a
 *   PAdES that pdfsig accepts;
 * - one instance container killed under load: every signature answered 200 has its evidence row and its
 *   mediation record, delivered; evidence without a record only for a call cut before its answer (spec 6.2:
 *   a record exists exactly when signatures are returned);
 * - stopped with the engine's stop (SIGTERM for the qtsp containers): each exits 0 after saying it stopped.
 * Run by `npm run test:container` (scripts/container/images.sh first makes the base images when missing).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { containerName, loadCompose, networkName, runArgs, startOrder, volumeName } from './compose.ts';
import { cmsVerifyArgs } from '../helpers/openssl.ts';
import { eventually, prometheusApi } from '../helpers/prometheus.ts';

/** the checkout itself, not the compiled tree the test runs from (podman copies no symbolic link's target) */
const ROOT = dirname(dirname(realpathSync(fileURLToPath(new URL('../../docker/compose.yaml', import.meta.url)))));
const COMPOSE = join(ROOT, 'docker', 'compose.yaml');
const CONF = join(ROOT, 'scripts', 'container', 'containers.conf');
/** beside the image: its SBOM and what the build measured */
const OUT = join(ROOT, '.container');
const IMAGE = 'qtsp:local';
const PROJECT_LABEL = 'com.docker.compose.project=qtsp';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** a command with a deadline; the answer whatever its exit code */
function cmd(
  program: string,
  args: string[],
  opts: { timeoutMs?: number; onLine?: (line: string) => void; env?: NodeJS.ProcessEnv } = {},
): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(program, args, {
      cwd: ROOT,
      env: { ...process.env, CONTAINERS_CONF: CONF, ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let pending = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (!opts.onLine) return;
      pending += d.toString();
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const l of lines) opts.onLine(l);
    });
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-50_000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const podman = (args: string[], opts?: Parameters<typeof cmd>[2]) => cmd('podman', args, opts);

async function must(args: string[], opts?: Parameters<typeof cmd>[2]): Promise<string> {
  const r = await podman(args, opts);
  assert.equal(r.code, 0, `podman ${args.join(' ')}\n${r.stderr}${r.stdout.slice(-4000)}`);
  return r.stdout;
}

/** run inside an instance: print its readiness answer (status and reasons) */
const READINESS_BODY =
  "fetch('http://127.0.0.1:' + (process.env.QTSP_OPS_PORT ?? 8438) + '/health/ready')" +
  '.then(async (r) => console.log(r.status, await r.text())).catch((e) => console.log(String(e)))';

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number, everyMs = 1000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** everything this project left behind: containers (with their anonymous volumes), the network, the volumes */
async function removeAll(compose: ReturnType<typeof loadCompose>): Promise<void> {
  const ids = (await podman(['ps', '-aq', '--filter', `label=${PROJECT_LABEL}`])).stdout.split('\n').filter(Boolean);
  if (ids.length) await podman(['rm', '-f', '-v', '-t', '0', ...ids], { timeoutMs: 120_000 });
  await podman(['network', 'rm', '-f', networkName(compose)]);
  for (const v of Object.keys(compose.volumes)) await podman(['volume', 'rm', '-f', volumeName(compose, v)]);
}

/** compose.yaml publishes fixed host ports: a clear message when something else holds one */
async function refuseBusyPorts(compose: ReturnType<typeof loadCompose>): Promise<void> {
  for (const [service, s] of Object.entries(compose.services))
    for (const spec of s.ports ?? []) {
      const port = Number(spec.split(':')[0]);
      const server = createServer();
      await new Promise<void>((resolve, reject) => {
        server.once('error', (err: NodeJS.ErrnoException) =>
          reject(new Error(`port ${port}, which compose.yaml publishes for ${service}, is in use: ${err.code}`)),
        );
        server.listen(port, () => server.close(() => resolve()));
      });
    }
}

const psql = (compose: ReturnType<typeof loadCompose>, query: string) =>
  must(['exec', containerName(compose, 'postgres'), 'psql', '-U', 'qtsp', '-d', 'qtsp', '-Atc', query]).then((s) =>
    s.trim(),
  );

describe('docker/: the image built and the compose deployment run with podman', () => {
  const compose = loadCompose(COMPOSE);
  const order = startOrder(compose);
  const name = (service: string) => containerName(compose, service);
  let sharedDir = '';
  const work = mkdtempSync(join(tmpdir(), 'qtsp-container-'));

  before(async () => {
    await removeAll(compose);
    await refuseBusyPorts(compose);
    mkdirSync(OUT, { recursive: true });
    const started = Date.now();
    const build = await podman(['build', '--network=host', '-t', IMAGE, '-f', 'docker/Dockerfile', '.'], {
      timeoutMs: 45 * 60_000,
    });
    assert.equal(build.code, 0, `podman build failed\n${build.stderr.slice(-6000)}${build.stdout.slice(-6000)}`);
    const size = Number((await must(['image', 'inspect', '--format', '{{.Size}}', IMAGE])).trim());
    const measured = `image ${IMAGE}: ${(size / 1e6).toFixed(0)} MB, built in ${((Date.now() - started) / 1000).toFixed(0)} s`;
    writeFileSync(join(OUT, 'image.txt'), `${measured}\n`);
    console.log(measured);
    // the npm packages in the image: the lock file less the development ones (the build stage prunes them)
    const sbom = await cmd('npm', ['sbom', '--sbom-format', 'cyclonedx', '--omit', 'dev', '--package-lock-only'], {
      timeoutMs: 120_000,
    });
    assert.equal(sbom.code, 0, sbom.stderr);
    writeFileSync(join(OUT, 'qtsp-local.cdx.json'), sbom.stdout);

    await must(['network', 'create', '--label', PROJECT_LABEL, networkName(compose)]);
    for (const v of Object.keys(compose.volumes))
      await must(['volume', 'create', '--label', PROJECT_LABEL, volumeName(compose, v)]);
    for (const service of order) {
      for (const [dep, { condition }] of Object.entries(compose.services[service]!.depends_on ?? {})) {
        if (condition === 'service_completed_successfully') {
          const code = (await must(['wait', name(dep)], { timeoutMs: 300_000 })).trim();
          const logs = await podman(['logs', name(dep)]);
          assert.equal(code, '0', `${dep} failed:\n${logs.stdout}${logs.stderr}`);
        } else if (condition === 'service_healthy') {
          await until(
            `${dep} healthy`,
            async () => (await podman(['healthcheck', 'run', name(dep)], { timeoutMs: 30_000 })).code === 0,
            180_000,
            2000,
          ).catch(async (err: Error) => {
            const logs = await podman(['logs', '--tail', '40', name(dep)]);
            throw new Error(`${err.message}\n${logs.stdout}${logs.stderr}`);
          });
        }
      }
      await must(['run', ...runArgs(compose, service)]);
    }
    for (const service of ['qtsp1', 'qtsp2', 'haproxy', 'prometheus'])
      await until(
        `${service} healthy`,
        async () => (await podman(['healthcheck', 'run', name(service)], { timeoutMs: 30_000 })).code === 0,
        180_000,
        2000,
      ).catch(async (err: Error) => {
        // what kept it from being ready: its readiness answer and its last log lines
        const ready = await podman(['exec', name(service), 'node', '-e', READINESS_BODY]);
        const logs = await podman(['logs', '--tail', '40', name(service)]);
        throw new Error(`${err.message}\n${ready.stdout}${ready.stderr}\n${logs.stdout}${logs.stderr}`);
      });
    sharedDir = (
      await must(['volume', 'inspect', '--format', '{{.Mountpoint}}', volumeName(compose, 'shared')])
    ).trim();
  });

  after(async () => {
    await removeAll(compose);
    rmSync(work, { recursive: true, force: true });
  });

  it('the runtime image: uid 10001, read-only root, no compiler or development package, native modules load', async () => {
    const user = (await must(['image', 'inspect', '--format', '{{.Config.User}}', IMAGE])).trim();
    assert.equal(user, '10001:10001');
    assert.equal((await must(['exec', name('qtsp1'), 'id', '-u'])).trim(), '10001');
    const write = await podman(['exec', name('qtsp1'), 'sh', '-c', 'touch /app/x']);
    assert.match(write.stderr + write.stdout, /Read-only file system/);
    assert.equal(
      (await podman(['exec', name('qtsp1'), 'sh', '-c', 'touch /tmp/x /data/x'])).code,
      0,
      'tmpfs and volume',
    );
    const tools = await podman([
      'run',
      '--rm',
      '--network=host',
      '--entrypoint',
      'sh',
      IMAGE,
      '-c',
      'for t in gcc g++ cc c++ make python3; do command -v $t; done; ' +
        // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's format, for the shell
        "dpkg-query -W -f '${Package}\\n' | grep -E -- '-dev$|^(gcc|g\\+\\+|cpp|make|python3)(-[0-9.]+)?$' ; true",
    ]);
    assert.equal(tools.code, 0, tools.stderr);
    assert.equal(tools.stdout.trim(), '', `no compiler or development package: ${tools.stdout}`);
    const native = await must([
      'exec',
      name('qtsp1'),
      'node',
      '-e',
      "const r = require('module').createRequire('/app/'); new (r('better-sqlite3'))(':memory:').close(); r('pkcs11js'); console.log('ok')",
    ]);
    assert.equal(native.trim(), 'ok');
    for (const service of ['qtsp1', 'qtsp2'])
      assert.equal((await podman(['healthcheck', 'run', name(service)])).code, 0, `${service} healthcheck`);
    const sbom = JSON.parse(readFileSync(join(OUT, 'qtsp-local.cdx.json'), 'utf8')) as {
      bomFormat: string;
      components: { name: string }[];
    };
    assert.equal(sbom.bomFormat, 'CycloneDX');
    const names = new Set(sbom.components.map((c) => c.name));
    for (const p of ['better-sqlite3', 'pkcs11js', 'pkijs']) assert.ok(names.has(p), `SBOM lists ${p}`);
    assert.ok(!names.has('typescript'), 'the SBOM lists no development package');
  });

  it('the running containers carry what compose.yaml says', async () => {
    for (const service of order) {
      const s = compose.services[service]!;
      const inspect = JSON.parse(await must(['container', 'inspect', name(service)]))[0] as {
        Config: { Env: string[]; Healthcheck?: { Test: string[] } };
        HostConfig: { ReadonlyRootfs: boolean };
        Mounts: { Name?: string; Source: string; Destination: string; RW: boolean }[];
      };
      for (const [k, v] of Object.entries(s.environment ?? {}))
        assert.ok(inspect.Config.Env.includes(`${k}=${v}`), `${service}: ${k}=${v}`);
      for (const spec of s.volumes ?? []) {
        const [source, target, mode] = spec.split(':');
        const m = inspect.Mounts.find((x) => x.Destination === target);
        assert.ok(m, `${service}: ${target} mounted`);
        assert.equal(m.RW, mode !== 'ro', `${service}: ${target} ${mode ?? 'rw'}`);
        if (!source!.startsWith('.')) assert.equal(m.Name, volumeName(compose, source!));
      }
      assert.equal(inspect.HostConfig.ReadonlyRootfs, s.read_only === true, `${service}: read_only`);
      if (s.healthcheck) assert.deepEqual(inspect.Config.Healthcheck?.Test.slice(1), s.healthcheck.test.slice(1));
    }
  });

  it('Prometheus scrapes every instance with the shipped rules, and no alert fires for the healthy deployment', async () => {
    const prom = prometheusApi('http://127.0.0.1:9090');
    const targets = await eventually('every target up', 180_000, async () => {
      const t = await prom.targets();
      return t.length === 3 && t.every((x) => x.health === 'up') ? t : undefined;
    });
    assert.deepEqual(
      targets
        .filter((t) => t.labels.job === 'qtsp')
        .map((t) => t.labels.instance)
        .sort(),
      ['qtsp1:8438', 'qtsp2:8438'],
    );
    // the rules evaluated twice since both instances answered
    const since = Date.now();
    const groups = await eventually('the rules evaluated', 120_000, async () => {
      const g = await prom.rules();
      return g.length === 5 && g.every((x) => Date.parse(x.lastEvaluation) > since + 15_000) ? g : undefined;
    });
    assert.ok(groups.flatMap((g) => g.rules).length >= 29);
    const ready = await prom.query('qtsp_ready');
    assert.deepEqual(ready.map((r) => [r.metric.qtsp_instance, r.value[1]]).sort(), [
      ['qtsp1', '1'],
      ['qtsp2', '1'],
    ]);
    const alerts = await prom.alerts();
    const described = alerts.map((a) => `${a.labels.alertname} ${a.state} ${JSON.stringify(a.labels)}`);
    if (described.length) console.log('alerts pending (not firing):', described.join('; '));
    assert.deepEqual(
      alerts.filter((a) => a.state === 'firing').map((a) => a.labels.alertname),
      [],
    );
  });

  it("README's B-LT flow from the host through HAProxy: openssl and pdfsig accept the signatures", async () => {
    copyFileSync(join(ROOT, 'fixtures', 'documents', 'sample.pdf'), join(work, 'sample.pdf'));
    copyFileSync(join(ROOT, 'README.md'), join(work, 'README.md'));
    await cmd('chmod', ['0777', work]);
    // the relying party on the host's network; the sandbox's name as compose.yaml's comment maps it
    const rp = ['run', '--rm', '--network=host', '--add-host=sandbox:127.0.0.1', '--read-only'];
    const vols = [`--volume=${volumeName(compose, 'shared')}:/shared:ro`, `--volume=${work}:/work`];
    for (const args of [
      ['/work/README.md', '--level', 'B-LT'],
      ['/work/sample.pdf', '--format', 'P', '--level', 'B-LT'],
    ]) {
      const signed = await podman([...rp, ...vols, IMAGE, 'sign', ...args, '--data-dir', '/shared'], {
        timeoutMs: 180_000,
      });
      assert.equal(signed.code, 0, `qtsp sign ${args.join(' ')}\n${signed.stdout}${signed.stderr}`);
    }
    const root = join(sharedDir, 'pki', 'root-ca.pem');
    const cms = await cmd('openssl', cmsVerifyArgs(join(work, 'README.md.p7s'), join(work, 'README.md'), root));
    assert.equal(cms.code, 0, cms.stderr);
    assert.match(cms.stderr, /Verification successful|CMS Verification successful/);
    const dump = await cmd('openssl', [
      'cms',
      '-cmsout',
      '-print',
      '-inform',
      'DER',
      '-in',
      join(work, 'README.md.p7s'),
    ]);
    assert.match(dump.stdout, /1\.2\.840\.113549\.1\.9\.16\.2\.14|id-smime-aa-timeStampToken/, 'B-T: a time-stamp');
    assert.match(dump.stdout, /1\.3\.6\.1\.5\.5\.7\.16\.2|id-ri-ocsp-response/, 'B-LT: OCSP responses in crls');
    const nss = join(work, 'nss');
    mkdirSync(nss);
    assert.equal((await cmd('certutil', ['-N', '--empty-password', '-d', `sql:${nss}`])).code, 0);
    assert.equal((await cmd('certutil', ['-A', '-n', 'root', '-t', 'CT,C,C', '-i', root, '-d', `sql:${nss}`])).code, 0);
    const pdf = await cmd('pdfsig', ['-nssdir', `sql:${nss}`, join(work, 'sample.signed.pdf')], { timeoutMs: 60_000 });
    assert.match(pdf.stdout, /Signature Validation: Signature is Valid/, pdf.stdout + pdf.stderr);
    assert.match(pdf.stdout, /Certificate Validation: Certificate is Trusted/, pdf.stdout);
  });

  it('one instance container killed under load: no signature and no mediation record lost', async () => {
    const total = 40;
    const concurrency = 3;
    const results: { status?: number; txn?: string | null; serial?: string | null; error?: string }[] = [];
    let killed: Promise<Run> | undefined;
    const load = await podman(
      [
        'run',
        '--rm',
        '--network=host',
        '--add-host=sandbox:127.0.0.1',
        '--read-only',
        `--volume=${volumeName(compose, 'shared')}:/shared:ro`,
        `--volume=${join(ROOT, 'test', 'container', 'load.mjs')}:/app/load.mjs:ro`,
        '--entrypoint',
        'node',
        IMAGE,
        '/app/load.mjs',
        '/shared/sandbox/endpoints.json',
        String(total),
        String(concurrency),
      ],
      {
        timeoutMs: 600_000,
        onLine: (line) => {
          const r = JSON.parse(line) as { signDoc?: string; status?: number; error?: string };
          if (r.signDoc) return assert.equal(r.signDoc, 'https://localhost:8440/signDoc', 'the RP goes to HAProxy');
          results.push(r);
          if (results.length === 10 && !killed) killed = podman(['kill', '--signal', 'KILL', name('qtsp2')]);
        },
      },
    );
    assert.equal(load.code, 0, load.stderr);
    assert.ok(killed, 'killed mid-run');
    assert.equal((await killed).code, 0);
    assert.equal(results.length, total);
    const ok = results.filter((r) => r.status === 200);
    const failed = results.filter((r) => r.status !== 200);
    // only calls in flight on the killed instance may be cut (a connection, never an error answer)
    assert.ok(failed.length <= concurrency, JSON.stringify(failed));
    for (const f of failed) assert.ok(f.error, `a cut connection, not an error answer: ${JSON.stringify(f)}`);
    const txn = ok[0]?.txn?.replace(/[^A-Za-z0-9._-]/g, '');
    assert.ok(txn, 'answers name their transaction');
    // each evidence row of the consent with its mediation record (outbox id = the record's reference_id)
    const rows = async () =>
      (
        await psql(
          compose,
          "SELECT s.certificate_serial_hex || ' ' || coalesce(o.state, 'none') FROM signing_transactions s " +
            "LEFT JOIN outbox o ON o.topic = 'mediation' AND o.id = 'rsc-' || " +
            "encode(sha256(convert_to(s.txn || E'\\n' || s.certificate_serial_hex, 'UTF8')), 'hex') " +
            `WHERE s.txn = '${txn}'`,
        )
      )
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' ') as [string, string]);
    const norm = (hex: string) => hex.toLowerCase().replace(/^0+/, '');
    await until(
      'every mediation record delivered',
      async () => (await rows()).every(([, s]) => s !== 'pending' && s !== 'queued'),
      120_000,
    );
    const evidence = new Map((await rows()).map(([serial, state]) => [norm(serial), state]));
    for (const r of ok) {
      assert.ok(r.serial, 'a signature in each 200');
      assert.equal(evidence.get(norm(r.serial)), 'delivered', `signature ${r.serial}: evidence and a delivered record`);
    }
    const records = [...evidence.values()].filter((s) => s !== 'none');
    assert.ok(
      records.every((s) => s === 'delivered'),
      `no record failed: ${records.join(' ')}`,
    );
    // an evidence row without a record: a call cut before its signatures were returned, billed to nobody
    assert.ok(evidence.size - ok.length <= failed.length, `${evidence.size} evidence rows for ${ok.length} answers`);
    const summary =
      `kill test: ${total} calls, ${ok.length} answered 200, ${failed.length} cut; ` +
      `${evidence.size} evidence rows, ${records.length} mediation records, all delivered`;
    writeFileSync(join(OUT, 'kill-test.txt'), `${summary}\n`);
    console.log(summary);
  });

  it('stops gracefully: each container stopped by the engine exits 0, the qtsp ones after saying so', async () => {
    for (const service of [...order].reverse()) {
      if (service === 'pki-init') continue;
      const s = compose.services[service]!;
      const running = (await must(['container', 'inspect', '--format', '{{.State.Running}}', name(service)])).trim();
      if (running !== 'true') {
        assert.equal(service, 'qtsp2', `only the killed instance is down: ${service}`);
        continue;
      }
      const grace = s.stop_grace_period ? Number.parseInt(s.stop_grace_period, 10) : 10;
      const started = Date.now();
      await must(['stop', '--time', String(grace), name(service)], { timeoutMs: (grace + 30) * 1000 });
      const code = (await must(['container', 'inspect', '--format', '{{.State.ExitCode}}', name(service)])).trim();
      const logs = await podman(['logs', '--tail', '60', name(service)]);
      assert.equal(code, '0', `${service} exit code\n${logs.stdout}${logs.stderr}`);
      assert.ok(Date.now() - started < grace * 1000, `${service} stopped before the engine's SIGKILL`);
      if (service.startsWith('qtsp') || service === 'worker' || service === 'sandbox') {
        assert.match(logs.stdout, /SIGTERM: stopping/, `${service}: ${logs.stdout}`);
        assert.match(logs.stdout + logs.stderr, /"event":"shutdown.done"|stopped/, service);
      }
    }
  });
});
