/**
 * The sandbox ecosystem and the QTSP wired together on loopback: what `qtsp dev`, the integration tests and
 * the benchmark run. The two halves still talk only over HTTPS; this module just starts both and tells each
 * where the other is.
 */
import { freePort } from '../util/free-port.ts';
import { loadConfig } from '../config/load.ts';
import type { Config, ConfigInput } from '../config/schema.ts';
import { pkiInit } from '../pki/init.ts';
import { publicBaseUrl } from '../pki/publication.ts';
import type { RpEndpoints } from '../rp/flow.ts';
import { startSandbox, type Sandbox } from '../sandbox/index.ts';
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
  /** mediation service and SMTP sink ports of the sandbox; 0 = free ports */
  readonly mediationPort?: number;
  readonly smtpPort?: number;
  readonly logger?: Logger;
  readonly defaultMetrics?: boolean;
}

export interface Ecosystem {
  readonly config: Config;
  readonly sandbox: Sandbox;
  readonly qtsp: QtspService;
  /** the delivery queues' Redis: redis.url, REDIS_URL, or a local redis-server we started (then `local` is set) */
  readonly redis: ProvidedRedis;
  /** what a relying party needs to run the flow */
  readonly endpoints: RpEndpoints;
  close(): Promise<void>;
}

function withPorts(input: ConfigInput, port: number, publicationPort: number): ConfigInput {
  return { ...input, server: { ...input.server, port, publicationPort } };
}

export async function startEcosystem(options: EcosystemOptions = {}): Promise<Ecosystem> {
  const env = options.env ?? {};
  const given = loadConfig(options.config ?? {}, env);
  const port = given.server.port === 0 ? await freePort(given.server.host) : given.server.port;
  const publicationPort = given.server.publicationPort === 0 ? await freePort(given.server.host) : given.server.publicationPort;
  const base = loadConfig(withPorts(options.config ?? {}, port, publicationPort), env);
  pkiInit({ dataDir: base.dataDir, qtspId: base.qtspId, publicBaseUrl: publicBaseUrl(base) });
  const host = base.server.host.includes(':') ? `[${base.server.host}]` : base.server.host;
  const redis = await provideRedis(base.redis.url, options.env ?? process.env, base.dataDir);
  const sandbox = await startSandbox({
    dataDir: base.dataDir,
    host: base.server.host,
    asPort: options.asPort ?? 0,
    platformPort: options.platformPort ?? 0,
    mediationPort: options.mediationPort ?? 0,
    smtpPort: options.smtpPort ?? 0,
    qtsp: { id: base.qtspId, clientCertFile: base.client.certFile, signDocUrl: `https://${host}:${port}${base.server.signDocPath}` },
  }).catch(async (err: unknown) => {
    await redis.stop();
    throw err;
  });
  let qtsp: QtspService;
  let config: Config;
  try {
    const input = options.config ?? {};
    config = loadConfig(
      {
        ...input,
        server: { ...input.server, port, publicationPort },
        trust: { idpDirectoryUrl: sandbox.idpDirectoryUrl, keyArchiveUrl: sandbox.keyArchiveUrl, keyArchiveSignerKeyFile: sandbox.keyArchiveSignerKeyFile, ...input.trust },
        redis: { ...input.redis, url: redis.url },
        mediation: { url: sandbox.mediationUrl, ...input.mediation },
        notification: { smtpUrl: sandbox.smtp.url, ...input.notification },
      },
      env,
    );
    qtsp = await startQtsp(config, { ...(options.logger ? { logger: options.logger } : {}), defaultMetrics: options.defaultMetrics ?? true });
  } catch (err) {
    await sandbox.close();
    await redis.stop();
    throw err;
  }
  return {
    config,
    sandbox,
    qtsp,
    redis,
    endpoints: { serviceConfigurationUrl: sandbox.serviceConfigurationUrl, issuer: sandbox.issuer, tlsCaFile: sandbox.tlsCaFile, rp: sandbox.rp },
    async close() {
      await qtsp.close();
      await sandbox.close();
      await redis.stop();
    },
  };
}
