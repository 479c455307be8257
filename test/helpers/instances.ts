/**
 * `qtsp serve` as separate processes, as an operator runs them: one sandbox ecosystem and one Redis in the
 * test process, the CA material made once and copied into each instance's own data directory (each keeps its
 * own key-archive clone and caches), and every setting given as QTSP_* environment variables.
 */
import { freePort } from '../../src/util/free-port.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pkiPaths } from '../../src/ca/material.ts';
import { pkiInit } from '../../src/ca/init.ts';
import type { RpEndpoints } from '../../src/rp/flow.ts';
import { startSandbox, type Sandbox } from '../../src/sandbox/index.ts';
import { startRedisServer, type LocalRedis } from '../../src/util/redis-server.ts';
import { QTSP_ID } from './environment.ts';
import { QTSP_BIN } from './qtsp-cli.ts';

export interface SharedParts {
  readonly root: string;
  readonly sandbox: Sandbox;
  readonly redis: LocalRedis;
  readonly rootCaFile: string;
  /** what the relying party needs for the flow */
  readonly endpoints: RpEndpoints;
  /** a data directory for one instance (CA material copied in) and the environment of its `qtsp serve` */
  instanceEnv(
    name: string,
    settings: {
      port: number;
      publicationPort: number;
      opsPort?: number;
      store?: { driver: 'sqlite' } | { driver: 'postgres'; url: string };
      extra?: Record<string, string>;
    },
  ): Record<string, string>;
  close(): Promise<void>;
}

/**
 * The sandbox names `signDocUrl` in our SP record (the relying party's flow goes there: an instance, or the
 * load balancer); `publicBaseUrl` goes into the AIA and CRL distribution points of every certificate.
 */
/** The shared parts for instances that will listen on one signDoc port and one publication port, both free. */
export async function startSharedPartsOnFreePorts(): Promise<{
  shared: SharedParts;
  port: number;
  publicationPort: number;
}> {
  const port = await freePort();
  const publicationPort = await freePort();
  const shared = await startSharedParts({
    signDocUrl: `https://127.0.0.1:${port}/signDoc`,
    publicBaseUrl: `http://127.0.0.1:${publicationPort}`,
  });
  return { shared, port, publicationPort };
}

/**
 * The `qtsp serve` processes of one test file, on shared parts whose signDoc and publication ports are free.
 * close() kills (SIGKILL) every process spawn() started that still runs, and the pids `alsoKill` names for it
 * that are alive (a cluster's workers), then closes the shared parts.
 */
export interface ServeFleet {
  readonly shared: SharedParts;
  readonly port: number;
  readonly publicationPort: number;
  /** shared.instanceEnv on the fleet's ports, unless `settings` name others */
  instanceEnv(name: string, settings?: Partial<Parameters<SharedParts['instanceEnv']>[1]>): Record<string, string>;
  /** spawnServe, remembered for close() */
  spawn(env: Record<string, string>): Promise<ServeProcess>;
  close(): Promise<void>;
}

export async function startServeFleet(
  alsoKill: (serve: ServeProcess) => readonly number[] = () => [],
): Promise<ServeFleet> {
  const { shared, port, publicationPort } = await startSharedPartsOnFreePorts();
  const started: ServeProcess[] = [];
  return {
    shared,
    port,
    publicationPort,
    instanceEnv: (name, settings = {}) => shared.instanceEnv(name, { port, publicationPort, ...settings }),
    async spawn(env) {
      const serve = await spawnServe(env);
      started.push(serve);
      return serve;
    },
    async close() {
      for (const serve of started) {
        for (const pid of alsoKill(serve)) if (alive(pid)) process.kill(pid, 'SIGKILL');
        if (serve.child.exitCode === null && serve.child.signalCode === null) serve.child.kill('SIGKILL');
      }
      await shared.close();
    },
  };
}

export async function startSharedParts(options: { signDocUrl: string; publicBaseUrl: string }): Promise<SharedParts> {
  const root = mkdtempSync(join(tmpdir(), 'qtsp-instances-'));
  const shared = join(root, 'shared');
  try {
    pkiInit({ dataDir: shared, qtspId: QTSP_ID, publicBaseUrl: options.publicBaseUrl });
    const sandbox = await startSandbox({
      dataDir: shared,
      asPort: 0,
      platformPort: 0,
      mediationPort: 0,
      smtpPort: 0,
      qtsp: { id: QTSP_ID, clientCertFile: pkiPaths(shared).clientCert, signDocUrl: options.signDocUrl },
    });
    const redis = await startRedisServer({ dir: join(root, 'redis') }).catch(async (err: unknown) => {
      await sandbox.close();
      throw err;
    });
    return {
      root,
      sandbox,
      redis,
      rootCaFile: pkiPaths(shared).rootCert,
      endpoints: {
        serviceConfigurationUrl: sandbox.serviceConfigurationUrl,
        issuer: sandbox.issuer,
        tlsCaFile: sandbox.tlsCaFile,
        rp: sandbox.rp,
      },
      instanceEnv(name, s) {
        const dataDir = join(root, name);
        mkdirSync(dataDir, { recursive: true, mode: 0o700 });
        cpSync(pkiPaths(shared).dir, pkiPaths(dataDir).dir, { recursive: true });
        return {
          QTSP_DATA_DIR: dataDir,
          QTSP_QTSP_ID: QTSP_ID,
          QTSP_SERVER_PORT: String(s.port),
          QTSP_SERVER_PUBLICATION_PORT: String(s.publicationPort),
          QTSP_OPS_PORT: String(s.opsPort ?? 0),
          // as in docker/compose.yaml: behind HAProxy every connection comes from one address; HAProxy limits per client
          QTSP_SERVER_MAX_CONNECTIONS_PER_ADDRESS: '0',
          QTSP_SERVER_PUBLIC_BASE_URL: options.publicBaseUrl,
          QTSP_SERVER_TLS_CERT_FILE: sandbox.qtspServerCertFile,
          QTSP_SERVER_TLS_KEY_FILE: sandbox.qtspServerKeyFile,
          QTSP_TRUST_CA_FILE: sandbox.tlsCaFile,
          QTSP_TRUST_IDP_DIRECTORY_URL: sandbox.idpDirectoryUrl,
          QTSP_TRUST_KEY_ARCHIVE_URL: sandbox.keyArchiveUrl,
          QTSP_TRUST_KEY_ARCHIVE_SIGNER_KEY_FILE: sandbox.keyArchiveSignerKeyFile,
          QTSP_TRUST_JWKS_COOLDOWN_SECONDS: '0',
          QTSP_REDIS_URL: redis.url,
          QTSP_MEDIATION_URL: sandbox.mediationUrl,
          QTSP_NOTIFICATION_SMTP_URL: sandbox.smtp.url,
          QTSP_SIGNER_RSA_POOL_SIZE: '0',
          // an instance never outlives the test process, even when that one is killed
          QTSP_LIFECYCLE_EXIT_WITH_PARENT: 'true',
          ...(s.store?.driver === 'postgres' ? { QTSP_STORE_DRIVER: 'postgres', QTSP_STORE_URL: s.store.url } : {}),
          ...s.extra,
        };
      },
      async close() {
        await sandbox.close();
        await redis.stop();
        rmSync(root, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(root, { recursive: true, force: true });
    throw err;
  }
}

export interface ServeProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly signDocUrl: string;
  readonly publicationUrl: string;
  /** the operations listener: /health/live, /health/ready, /metrics */
  readonly opsUrl: string;
  /** what it wrote to stdout and stderr so far */
  output(): string;
  /** resolves when the process has ended */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts `qtsp serve` with exactly `env` (plus PATH/HOME/NODE_ENV) and waits until it says where it serves.
 * `bin`: the `qtsp` command to start (default bin/qtsp.js of this checkout, the sources through tsx).
 */
export async function spawnServe(env: Record<string, string>, bin = QTSP_BIN): Promise<ServeProcess> {
  const base = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir(), NODE_ENV: 'test' };
  const child = spawn(process.execPath, [bin, 'serve'], {
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const urls = await new Promise<{ signDocUrl: string; publicationUrl: string; opsUrl: string }>((resolve, reject) => {
    const collect = (d: Buffer) => {
      out += d.toString();
      const signDoc = /qtsp serving signDoc at (\S+)/.exec(out)?.[1];
      const publication = /qtsp publishing OCSP, CRLs, TSA at (\S+)/.exec(out)?.[1];
      const ops = /qtsp operations \(health, metrics\) at (\S+)/.exec(out)?.[1];
      if (signDoc && publication && ops) resolve({ signDocUrl: signDoc, publicationUrl: publication, opsUrl: ops });
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    void exited.then(({ code, signal }) =>
      reject(new Error(`qtsp serve ended (${code ?? signal}) before it served:\n${out.slice(-3000)}`)),
    );
  });
  return { child, pid: child.pid!, ...urls, output: () => out, exited };
}

/** True while a process with this pid exists (and is not a zombie we are about to reap). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
