/**
 * The sandbox ecosystem and the QTSP wired together on loopback: what `qtsp dev`, the integration tests and
 * the benchmark run. The two halves still talk only over HTTPS; this module just starts both and tells each
 * where the other is.
 */
import { spawn } from 'node:child_process';
import { extname } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { urlHost } from '../util/listen.ts';
import { freePort } from '../util/free-port.ts';
import { loadConfig } from '../config/load.ts';
import type { Config, ConfigInput } from '../config/schema.ts';
import { sandboxKeys } from '../custody/registry.ts';
import { keyCeremony } from '../ca/init.ts';
import type { RpEndpoints } from '../rp/flow.ts';
import type { DemoRpServer } from '../rp/demo/server.ts';
import { startSandboxDemoRp } from './demo-rp.ts';
import { journalCeremony } from './pki.ts';
import { startSandbox, type ExternalClient, type Sandbox } from '../sandbox/index.ts';
import { startQtsp, type QtspService } from '../service.ts';
import type { Logger } from '../util/logger.ts';
import { provideRedis, type ProvidedRedis } from '../util/redis-server.ts';

export interface EcosystemOptions {
  /** configuration of the QTSP (dataDir, server.port, ...); environment variables apply when `env` is given */
  readonly config?: ConfigInput;
  readonly env?: NodeJS.ProcessEnv;
  /** sandbox ports; 0 = free ports */
  readonly asPort?: number;
  readonly platformPort?: number;
  /** bank 2's AS port; 0 = free port */
  readonly secondAsPort?: number;
  /** mediation service and SMTP sink ports of the sandbox; 0 = free ports */
  readonly mediationPort?: number;
  readonly smtpPort?: number;
  readonly logger?: Logger;
  readonly defaultMetrics?: boolean;
  /** relying parties to register at the sandbox platform besides its default RP (`--clients FILE`, `--client JSON`) */
  readonly clients?: readonly ExternalClient[];
  /** the demo relying party's HTTPS port (src/rp/demo; 0 = a free port); absent: no demo RP */
  readonly demoRpPort?: number;
}

export interface Ecosystem {
  readonly config: Config;
  readonly sandbox: Sandbox;
  readonly qtsp: QtspService;
  /** the delivery queues' Redis: redis.url, REDIS_URL, or a local redis-server we started (then `local` is set) */
  readonly redis: ProvidedRedis;
  /** what a relying party needs to run the flow */
  readonly endpoints: RpEndpoints;
  /** the demo relying party in a browser, when demoRpPort was given */
  readonly demoRp?: DemoRpServer;
  close(): Promise<void>;
}

function withPorts(input: ConfigInput, port: number, publicationPort: number): ConfigInput {
  return { ...input, server: { ...input.server, port, publicationPort } };
}

/** What the QTSP and a relying party need to know about a running sandbox (serialisable: it may run elsewhere). */
export interface SandboxInfo {
  readonly idpDirectoryUrl: string;
  readonly keyArchiveUrl: string;
  readonly keyArchiveSignerKeyFile: string;
  readonly mediationUrl: string;
  readonly smtpUrl: string;
  readonly endpoints: RpEndpoints;
}

export function sandboxInfo(sandbox: Sandbox): SandboxInfo {
  return {
    idpDirectoryUrl: sandbox.idpDirectoryUrl,
    keyArchiveUrl: sandbox.keyArchiveUrl,
    keyArchiveSignerKeyFile: sandbox.keyArchiveSignerKeyFile,
    mediationUrl: sandbox.mediationUrl,
    smtpUrl: sandbox.smtp.url,
    endpoints: {
      serviceConfigurationUrl: sandbox.serviceConfigurationUrl,
      issuer: sandbox.issuer,
      tlsCaFile: sandbox.tlsCaFile,
      rp: sandbox.rp,
    },
  };
}

/** The QTSP's configuration pointed at a sandbox; explicit settings in `input` win. */
export function qtspConfigInput(
  input: ConfigInput,
  info: SandboxInfo,
  ports: { port: number; publicationPort: number },
  redisUrl: string,
): ConfigInput {
  return {
    ...withPorts(input, ports.port, ports.publicationPort),
    trust: {
      idpDirectoryUrl: info.idpDirectoryUrl,
      keyArchiveUrl: info.keyArchiveUrl,
      keyArchiveSignerKeyFile: info.keyArchiveSignerKeyFile,
      ...input.trust,
    },
    redis: { ...input.redis, url: redisUrl },
    mediation: { url: info.mediationUrl, ...input.mediation },
    notification: { smtpUrl: info.smtpUrl, ...input.notification },
  };
}

/**
 * A keys.provider that stands in for another one in the sandbox (softhsm: a SoftHSM2 token under the data dir,
 * run by the pkcs11 custody): its backend prepares what it needs and gives the keys settings to run with.
 */
export async function withSandboxCustody(options: EcosystemOptions): Promise<EcosystemOptions> {
  const keys = await sandboxKeys(loadConfig(options.config ?? {}, options.env ?? {}));
  if (!keys) return options;
  return { ...options, config: { ...options.config, keys: { ...options.config?.keys, ...keys } } };
}

/** Ports chosen up front (the sandbox's SP record names our signDoc URL) and the CA material in place. */
export async function prepare(
  options: EcosystemOptions,
): Promise<{ base: Config; port: number; publicationPort: number; signDocUrl: string }> {
  const env = options.env ?? {};
  const given = loadConfig(options.config ?? {}, env);
  const port = given.server.port === 0 ? await freePort(given.server.host) : given.server.port;
  const publicationPort =
    given.server.publicationPort === 0 ? await freePort(given.server.host) : given.server.publicationPort;
  const base = loadConfig(withPorts(options.config ?? {}, port, publicationPort), env);
  // the key ceremony on first start: the root key goes to <dataDir>/ceremony, which the service never reads;
  // material made while the root key was online is migrated (ca/init.ts completeCeremony); journaled like
  // `qtsp pki ceremony`'s when it created CA material
  if (await keyCeremony(base)) await journalCeremony(base);
  return {
    base,
    port,
    publicationPort,
    signDocUrl: `https://${urlHost(base.server.host)}:${port}${base.server.signDocPath}`,
  };
}

async function startQtspFor(
  options: EcosystemOptions,
  info: SandboxInfo,
  ports: { port: number; publicationPort: number },
  redis: ProvidedRedis,
): Promise<{ config: Config; qtsp: QtspService }> {
  const config = loadConfig(qtspConfigInput(options.config ?? {}, info, ports, redis.url), options.env ?? {});
  const qtsp = await startQtsp(config, {
    ...(options.logger ? { logger: options.logger } : {}),
    defaultMetrics: options.defaultMetrics ?? true,
  });
  return { config, qtsp };
}

export async function startEcosystem(given: EcosystemOptions = {}): Promise<Ecosystem> {
  const options = await withSandboxCustody(given);
  const { base, port, publicationPort, signDocUrl } = await prepare(options);
  const redis = await provideRedis(base.redis.url, options.env ?? process.env, base.dataDir);
  const sandbox = await startSandbox({
    dataDir: base.dataDir,
    host: base.server.host,
    asPort: options.asPort ?? 0,
    secondAsPort: options.secondAsPort ?? 0,
    platformPort: options.platformPort ?? 0,
    mediationPort: options.mediationPort ?? 0,
    smtpPort: options.smtpPort ?? 0,
    qtsp: { id: base.qtspId, clientCertFile: base.client.certFile, signDocUrl },
    ...(options.clients ? { clients: options.clients } : {}),
  }).catch(async (err: unknown) => {
    await redis.stop();
    throw err;
  });
  const info = sandboxInfo(sandbox);
  try {
    const { config, qtsp } = await startQtspFor(options, info, { port, publicationPort }, redis);
    const demoRp = await startDemoRpFor(options, sandbox, config, qtsp);
    return {
      config,
      sandbox,
      qtsp,
      redis,
      endpoints: info.endpoints,
      ...(demoRp ? { demoRp } : {}),
      async close() {
        await demoRp?.close();
        await qtsp.close();
        await sandbox.close();
        await redis.stop();
      },
    };
  } catch (err) {
    await sandbox.close();
    await redis.stop();
    throw err;
  }
}

/** The demo RP after the sandbox (it registers there) and the QTSP; a failed start stops the QTSP again. */
async function startDemoRpFor(
  options: EcosystemOptions,
  sandbox: Sandbox,
  config: Config,
  qtsp: QtspService,
): Promise<DemoRpServer | undefined> {
  if (options.demoRpPort === undefined) return undefined;
  try {
    return await startSandboxDemoRp(sandbox, config, options.demoRpPort, options.logger);
  } catch (err) {
    await qtsp.close();
    throw err;
  }
}

/** The `qtsp` command of this same tree: bin/qtsp.js runs the sources through tsx, a compiled tree its main.js. */
function qtspCommand(): string {
  const own = extname(fileURLToPath(import.meta.url));
  return fileURLToPath(new URL(own === '.ts' ? '../../bin/qtsp.js' : `./main${own}`, import.meta.url));
}
const QTSP_BIN = qtspCommand();

/**
 * The same wiring with the sandbox in a child process (`qtsp sandbox`): the benchmark measures the QTSP
 * without the bank's work (RS256 signing of every introspection response, its TLS) on the same event loop.
 */
export async function startEcosystemWithSandboxProcess(
  given: EcosystemOptions = {},
): Promise<Omit<Ecosystem, 'sandbox'>> {
  const options = await withSandboxCustody(given);
  const { base, port, publicationPort, signDocUrl } = await prepare(options);
  const sandbox = await startSandboxProcess(base, signDocUrl);
  const info = sandbox.info;
  const stopChild = sandbox.stop;
  const redis = await provideRedis(base.redis.url, options.env ?? process.env, base.dataDir);
  try {
    const { config, qtsp } = await startQtspFor(options, info, { port, publicationPort }, redis);
    return {
      config,
      qtsp,
      redis,
      endpoints: info.endpoints,
      async close() {
        await qtsp.close();
        await stopChild();
        await redis.stop();
      },
    };
  } catch (err) {
    await stopChild();
    await redis.stop();
    throw err;
  }
}

/** `qtsp sandbox` in a child process for the QTSP of `base` (CA material in place): its addresses once it listens. */
export async function startSandboxProcess(
  base: Config,
  signDocUrl: string,
  extraArgs: readonly string[] = [],
): Promise<{ info: SandboxInfo; pid: number; stop(): Promise<void> }> {
  const child = spawn(
    process.execPath,
    [QTSP_BIN, 'sandbox', '--data-dir', base.dataDir, '--signdoc-url', signDocUrl, ...extraArgs],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      // the child ends with us, also when we are killed with SIGKILL (lifecycle.exitWithParent)
      env: {
        ...process.env,
        QTSP_QTSP_ID: base.qtspId,
        QTSP_LOG_LEVEL: 'silent',
        QTSP_LIFECYCLE_EXIT_WITH_PARENT: 'true',
      },
    },
  );
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  try {
    const info = await new Promise<SandboxInfo>((resolve, reject) => {
      const lines = createInterface({ input: child.stdout! });
      lines.on('line', (line) => {
        if (line.startsWith(SANDBOX_READY)) resolve(JSON.parse(line.slice(SANDBOX_READY.length)) as SandboxInfo);
      });
      child.once('exit', (code) => reject(new Error(`qtsp sandbox exited with ${code} before it was ready`)));
    });
    return { info, pid: child.pid!, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The line `qtsp sandbox` prints, followed by the SandboxInfo as JSON, once every server listens. */
export const SANDBOX_READY = 'SANDBOX_READY ';
