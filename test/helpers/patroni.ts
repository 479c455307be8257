/**
 * A PostgreSQL cluster as operators of the QTSP run it: etcd (one member on loopback, v2 API for Patroni's
 * python-etcd), two PostgreSQL 15 nodes under Patroni with docker/ha/patroni.yml (synchronous replication,
 * pg_rewind), and HAProxy with docker/ha/haproxy-postgres.cfg routing to the node whose Patroni answers
 * GET /primary. Patroni and PostgreSQL run as the `postgres` user (initdb refuses root); every process gets a
 * parent-death signal (setpriv), so none outlives a test process that is killed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { freePort } from '../../src/util/free-port.ts';
import { httpRequest } from '../../src/util/http-client.ts';

const HOST = '127.0.0.1';
const PATRONI_YML = fileURLToPath(new URL('../../docker/ha/patroni.yml', import.meta.url));
const HAPROXY_CFG = fileURLToPath(new URL('../../docker/ha/haproxy-postgres.cfg', import.meta.url));
const SUPERUSER_PASSWORD = 'qtsp-ha-test';
/** generous: on a busy machine Patroni's REST API may answer slowly */
const PROBE_TIMEOUT_MS = 5000;

interface Proc {
  child: ChildProcess;
  output: () => string;
}

function start(cmd: string, args: readonly string[], env: Record<string, string> = {}): Proc {
  const child = spawn('setpriv', ['--pdeathsig', 'SIGKILL', cmd, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: tmpdir(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const collect = (d: Buffer) => (out = (out + d.toString()).slice(-30_000));
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  return { child, output: () => out };
}

function ended(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

async function status(url: string): Promise<number | undefined> {
  try {
    return (await httpRequest(url, { timeoutMs: PROBE_TIMEOUT_MS })).status;
  } catch {
    return undefined;
  }
}

export interface Member {
  readonly name: string;
  readonly role: string;
  readonly state: string;
  readonly lag?: number | string;
}

export interface PatroniNode {
  readonly name: string;
  readonly pgPort: number;
  readonly restPort: number;
  readonly dataDir: string;
  running(): boolean;
}

export interface PatroniCluster {
  /** postgres:// through HAProxy: always the current primary */
  readonly url: string;
  readonly nodes: readonly PatroniNode[];
  /** the cluster's members as Patroni's REST API reports them (from any node that answers) */
  members(): Promise<Member[]>;
  /** the node that answers GET /primary 200, if any */
  leader(): Promise<PatroniNode | undefined>;
  /** until a leader and a streaming sync standby with lag 0 are there */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** until a node other than `old` answers GET /primary 200; ms it took */
  waitNewLeader(old: string, timeoutMs?: number): Promise<number>;
  /** SIGKILL of a node's Patroni and its postmaster together (a machine lost) */
  kill(node: PatroniNode): Promise<void>;
  /** the node's Patroni started again on its data: it rejoins as a replica, rewinding when it must */
  restart(node: PatroniNode): Promise<void>;
  /** `patronictl switchover` from the leader to the other node, as an operator plans one */
  switchover(): Promise<{ from: string; to: string }>;
  close(): Promise<void>;
}

function userIds(name: string): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`));
  if (!line) throw new Error(`no user ${name}: the postgresql package creates it`);
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** docker/ha/patroni.yml with what differs per node written in (loopback ports, dirs, socket dir) */
function nodeConfig(dir: string, name: string, pgPort: number, restPort: number, etcdPort: number): string {
  const config = parse(readFileSync(PATRONI_YML, 'utf8'));
  const own = join(dir, name);
  config.name = name;
  config.restapi = { listen: `${HOST}:${restPort}`, connect_address: `${HOST}:${restPort}` };
  config.etcd = { host: `${HOST}:${etcdPort}` };
  const pg = config.postgresql;
  pg.listen = `${HOST}:${pgPort}`;
  pg.connect_address = `${HOST}:${pgPort}`;
  pg.data_dir = join(own, 'data');
  pg.pgpass = join(own, 'pgpass');
  pg.parameters = { ...pg.parameters, unix_socket_directories: own };
  for (const role of ['superuser', 'replication', 'rewind']) pg.authentication[role].password = SUPERUSER_PASSWORD;
  mkdirSync(own, { recursive: true, mode: 0o700 });
  const file = join(own, 'patroni.yml');
  writeFileSync(file, stringify(config));
  return file;
}

function haproxyBinary(): string {
  return existsSync('/usr/sbin/haproxy') ? '/usr/sbin/haproxy' : 'haproxy';
}

export async function startPatroniCluster(): Promise<PatroniCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'qtsp-patroni-'));
  const owner = userIds('postgres');
  chownSync(dir, owner.uid, owner.gid);
  const procs: Proc[] = [];
  const etcdPort = await freePort();
  const etcdPeer = await freePort();
  procs.push(
    start('etcd', [
      ...['--name', 'e1', '--data-dir', join(dir, 'etcd'), '--enable-v2=true', '--log-level', 'warn'],
      ...[
        '--listen-client-urls',
        `http://${HOST}:${etcdPort}`,
        '--advertise-client-urls',
        `http://${HOST}:${etcdPort}`,
      ],
      ...[
        '--listen-peer-urls',
        `http://${HOST}:${etcdPeer}`,
        '--initial-advertise-peer-urls',
        `http://${HOST}:${etcdPeer}`,
      ],
      ...['--initial-cluster', `e1=http://${HOST}:${etcdPeer}`],
    ]),
  );
  const nodes: (PatroniNode & { config: string; proc?: Proc })[] = [];
  for (const name of ['pg1', 'pg2']) {
    const pgPort = await freePort();
    const restPort = await freePort();
    const config = nodeConfig(dir, name, pgPort, restPort, etcdPort);
    const node = {
      name,
      pgPort,
      restPort,
      config,
      dataDir: join(dir, name, 'data'),
      proc: undefined as Proc | undefined,
      running: () => !!node.proc && node.proc.child.exitCode === null && node.proc.child.signalCode === null,
    };
    nodes.push(node);
  }
  chownTree(dir, owner);
  const runPatroni = (node: (typeof nodes)[number]) => {
    node.proc = start('runuser', ['-u', 'postgres', '--', 'patroni', node.config]);
  };
  const pgStats = await freePort();
  const pgPort = await freePort();
  const haproxy = start(haproxyBinary(), ['-db', '-f', HAPROXY_CFG], {
    PG_BIND: `${HOST}:${pgPort}`,
    PG_STATS_BIND: `${HOST}:${pgStats}`,
    PG1_ADDR: `${HOST}:${nodes[0]!.pgPort}`,
    PG2_ADDR: `${HOST}:${nodes[1]!.pgPort}`,
    PG1_REST_PORT: String(nodes[0]!.restPort),
    PG2_REST_PORT: String(nodes[1]!.restPort),
  });
  procs.push(haproxy);

  const members = async (): Promise<Member[]> => {
    for (const node of nodes) {
      try {
        const res = await httpRequest(`http://${HOST}:${node.restPort}/cluster`, { timeoutMs: PROBE_TIMEOUT_MS });
        if (res.status === 200) return (JSON.parse(res.body.toString('utf8')) as { members: Member[] }).members;
      } catch {
        // that node is down: ask the other
      }
    }
    return [];
  };
  const leader = async () => {
    for (const node of nodes) if ((await status(`http://${HOST}:${node.restPort}/primary`)) === 200) return node;
    return undefined;
  };
  const until = async (what: string, probe: () => Promise<boolean>, timeoutMs: number) => {
    const started = Date.now();
    while (Date.now() - started < timeoutMs) {
      if (await probe()) return Date.now() - started;
      await new Promise((r) => setTimeout(r, 100));
    }
    const logs = nodes.map((n) => `${n.name}:\n${n.proc?.output().slice(-3000)}`).join('\n');
    throw new Error(`${what}: not within ${timeoutMs} ms; members ${JSON.stringify(await members())}\n${logs}`);
  };
  const cluster: PatroniCluster = {
    url: `postgres://postgres:${SUPERUSER_PASSWORD}@${HOST}:${pgPort}/postgres`,
    nodes,
    members,
    leader,
    async waitHealthy(timeoutMs = 120_000) {
      await until(
        'a leader and a synchronous standby',
        async () => {
          const m = await members();
          const sync = m.find((x) => x.role === 'sync_standby');
          return (
            m.some((x) => x.role === 'leader' && x.state === 'running') && sync?.state === 'running' && sync.lag === 0
          );
        },
        timeoutMs,
      );
    },
    async waitNewLeader(old, timeoutMs = 60_000) {
      return until('a new leader', async () => ((await leader())?.name ?? old) !== old, timeoutMs);
    },
    async kill(node) {
      const n = node as (typeof nodes)[number];
      const postmaster = postmasterPid(n.dataDir);
      // Patroni puts itself in a process group of its own: its pid, found by its configuration file
      for (const pid of pidsRunning(n.config)) killQuietly(pid);
      if (postmaster) killQuietly(postmaster);
      if (n.proc) await ended(n.proc.child);
    },
    async restart(node) {
      const n = node as (typeof nodes)[number];
      rmSync(join(n.dataDir, 'postmaster.pid'), { force: true });
      runPatroni(n);
    },
    async switchover() {
      const from = (await leader())?.name;
      const to = nodes.find((n) => n.name !== from)?.name;
      if (!from || !to) throw new Error('no leader to switch over from');
      const ctl = start('runuser', [
        ...['-u', 'postgres', '--', 'patronictl', '-c', nodes[0]!.config, 'switchover'],
        ...['--leader', from, '--candidate', to, '--force'],
      ]);
      await ended(ctl.child);
      if (ctl.child.exitCode !== 0) throw new Error(`patronictl switchover failed:\n${ctl.output()}`);
      return { from, to };
    },
    async close() {
      for (const node of nodes) if (node.running()) await cluster.kill(node);
      for (const p of procs) p.child.kill('SIGKILL');
      await Promise.all(procs.map((p) => ended(p.child)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    runPatroni(nodes[0]!);
    await until('pg1 to lead', async () => (await leader())?.name === 'pg1', 120_000);
    runPatroni(nodes[1]!);
    await cluster.waitHealthy();
    return cluster;
  } catch (err) {
    await cluster.close();
    throw err;
  }
}

function chownTree(dir: string, owner: { uid: number; gid: number }): void {
  chownSync(dir, owner.uid, owner.gid);
  for (const name of ['pg1', 'pg2']) {
    const own = join(dir, name);
    chownSync(own, owner.uid, owner.gid);
    chownSync(join(own, 'patroni.yml'), owner.uid, owner.gid);
  }
}

function postmasterPid(dataDir: string): number | undefined {
  try {
    return Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]) || undefined;
  } catch {
    return undefined;
  }
}

/** the processes whose command line names `file` */
function pidsRunning(file: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(file);
      } catch {
        return false;
      }
    })
    .map(Number);
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}
