/**
 * HAProxy with docker/haproxy.cfg (the file compose uses) in front of two `qtsp serve` instances on loopback,
 * and its statistics; the kernel stops it if the test process dies (setpriv).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../src/util/free-port.ts';
import { httpRequest } from '../../src/util/http-client.ts';

const HAPROXY_CFG = fileURLToPath(new URL('../../docker/haproxy.cfg', import.meta.url));

/** haproxy lives in /usr/sbin on Debian, outside an ordinary user's PATH */
export function haproxyBinary(): string {
  const found = spawnSync('sh', ['-c', 'command -v haproxy'], { encoding: 'utf8' }).stdout.trim();
  if (found) return found;
  if (existsSync('/usr/sbin/haproxy')) return '/usr/sbin/haproxy';
  throw new Error(
    'haproxy is not installed: `npm test` installs it (scripts/ensure-packages.mjs), or apt-get install haproxy',
  );
}

export interface Ports {
  lb: number;
  lbPublication: number;
  lbStats: number;
  signDoc: [number, number];
  publication: [number, number];
  ops: [number, number];
}

export async function choosePorts(): Promise<Ports> {
  const p = async () => freePort();
  return {
    lb: await p(),
    lbPublication: await p(),
    lbStats: await p(),
    signDoc: [await p(), await p()],
    publication: [await p(), await p()],
    ops: [await p(), await p()],
  };
}

/** HAProxy with the repository's configuration; the kernel stops it if this test process dies (setpriv). */
export function startHaproxy(ports: Ports): { child: ChildProcess; output: () => string } {
  const env = {
    LB_SIGNDOC_BIND: `127.0.0.1:${ports.lb}`,
    LB_PUBLICATION_BIND: `127.0.0.1:${ports.lbPublication}`,
    LB_STATS_BIND: `127.0.0.1:${ports.lbStats}`,
    QTSP1_SIGNDOC: `127.0.0.1:${ports.signDoc[0]}`,
    QTSP2_SIGNDOC: `127.0.0.1:${ports.signDoc[1]}`,
    QTSP1_PUBLICATION: `127.0.0.1:${ports.publication[0]}`,
    QTSP2_PUBLICATION: `127.0.0.1:${ports.publication[1]}`,
    QTSP1_OPS_PORT: String(ports.ops[0]),
    QTSP2_OPS_PORT: String(ports.ops[1]),
  };
  const child = spawn('setpriv', ['--pdeathsig', 'SIGTERM', haproxyBinary(), '-db', '-f', HAPROXY_CFG], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  child.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  return { child, output: () => out };
}

/** server name -> status (UP, DOWN, ...) of a backend, from HAProxy's CSV statistics */
export async function backendStatus(ports: Ports, backend: string): Promise<Map<string, string>> {
  const res = await httpRequest(`http://127.0.0.1:${ports.lbStats}/stats;csv`, { timeoutMs: 2000 }).catch(
    () => undefined,
  );
  const status = new Map<string, string>();
  for (const line of res?.body.toString('utf8').split('\n') ?? []) {
    const f = line.split(',');
    if (f[0] === backend && f[1] !== 'BACKEND' && f[1] !== 'FRONTEND') status.set(f[1]!, f[17]!);
  }
  return status;
}
