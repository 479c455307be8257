/**
 * `qtsp serve` (the QTSP alone; with server.workers, one process per worker: serve-cluster.ts) and `qtsp dev`
 * (sandbox ecosystem + QTSP, the embedded sandbox defaults that `npm start` runs). Both stop cleanly on
 * SIGINT/SIGTERM.
 */
import cluster from 'node:cluster';
import { join } from 'node:path';
import { describeCustody } from '../custody/types.ts';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { untilStopped } from '../util/lifecycle.ts';
import { applyHeapGrowth } from '../util/heap-growth.ts';
import { logger } from '../util/logger.ts';
import { pkiPaths } from '../ca/material.ts';
import { type QtspService, startQtsp } from '../service.ts';
import { provideRedis } from '../util/redis-server.ts';
import { checkSentinels } from '../delivery/queue.ts';
import { runClusterPrimary, runClusterWorker, workerCount } from './serve-cluster.ts';
import { type Ecosystem, SANDBOX_READY, sandboxInfo, startEcosystem } from './ecosystem.ts';
import { DEFAULT_DEMO_RP_PORT } from './demo-rp.ts';
import { externalClients, startSandbox, type ExternalClient, type PlatformClient } from '../sandbox/index.ts';

/**
 * SIGTERM/SIGINT (and, with lifecycle.exitWithParent, the end of the parent) run `stop`, bounded
 * (util/lifecycle.ts).
 */
function untilSignal(config: Config, name: string, stop: () => Promise<void>): Promise<number> {
  const { shutdownTimeoutMs, exitWithParent } = config.lifecycle;
  return untilStopped(stop, { shutdownTimeoutMs, exitWithParent, logger, name });
}

/** One of several instances (instance.id) must share one Redis: a local redis-server would serve it alone. */
export function refuseUnsharedRedis(config: Config, env: NodeJS.ProcessEnv): void {
  if (config.instance.id === undefined || config.redis.url || env['REDIS_URL']) return;
  throw new ConfigError(
    `setting redis.url (QTSP_REDIS_URL): instance.id (QTSP_INSTANCE_ID=${config.instance.id}) ` +
      'declares one of several instances, which must share one Redis (set QTSP_REDIS_URL or REDIS_URL); ' +
      'a local redis-server would serve this instance alone',
  );
}

/**
 * `qtsp serve` is the production start (`qtsp dev` the sandbox's): without a second TSA of another operator,
 * whoever holds our TSA key can re-seal a rewritten journal (docs/evidence.md). Said once, by the process that
 * starts (not by each cluster worker).
 */
export function warnWithoutSecondTsa(config: Config): void {
  if (!config.journal.enabled || config.journal.secondTsaUrl) return;
  logger.warn(
    { event: 'journal.second_tsa_unset' },
    "journal.secondTsaUrl (QTSP_JOURNAL_SECOND_TSA_URL) is not set: the journal's batches are time-stamped by " +
      'our TSA alone; set a second TSA of another operator (docs/operations.md, settings a real deployment must set)',
  );
}

/** `qtsp serve`; `started` is given the service once it serves (single-process mode; the bench drives it) */
export async function runServe(_args: string[], started?: (qtsp: QtspService) => void): Promise<number> {
  const config = loadConfig();
  refuseUnsharedRedis(config, process.env);
  const workers = workerCount(config);
  // this process serves (a cluster primary relays): its full collections stall calls in flight
  applyHeapGrowth(config.server.heapGrowthPercent);
  if (cluster.isWorker)
    return runClusterWorker(config, (stop) => untilSignal(config, `qtsp serve worker ${process.pid}`, stop));
  warnWithoutSecondTsa(config);
  if (workers !== 1) return runClusterPrimary(config, workers, (stop) => untilSignal(config, 'qtsp serve', stop));
  // redis.url, else REDIS_URL, else a local redis-server on a free loopback port (files in <dataDir>/redis)
  const redis = await provideRedis(config.redis.url, process.env, config.dataDir);
  await checkSentinels(redis.url, config.redis.commandTimeoutMs);
  const qtsp = await startQtsp({ ...config, redis: { ...config.redis, url: redis.url } }).catch(
    async (err: unknown) => {
      await redis.stop();
      throw err;
    },
  );
  // the handlers first: whoever reads these lines may signal us at once
  const stopped = untilSignal(config, 'qtsp serve', async () => {
    await qtsp.close();
    await redis.stop();
  });
  started?.(qtsp);
  process.stdout.write(`qtsp serving signDoc at ${qtsp.signDocUrl}\n`);
  process.stdout.write(`qtsp publishing OCSP, CRLs, TSA at ${qtsp.publicationUrl}\n`);
  process.stdout.write(`qtsp operations (health, metrics) at ${qtsp.opsUrl}\n`);
  return stopped;
}

/** `--clients FILE` and `--client JSON` (both repeatable): relying parties to register (src/sandbox/client-file.ts). */
const CLIENT_OPTIONS = {
  clients: { type: 'string', multiple: true },
  client: { type: 'string', multiple: true },
} as const;

function clientsOf(values: { clients?: string[] | undefined; client?: string[] | undefined }): ExternalClient[] {
  return externalClients(values.clients ?? [], values.client ?? []);
}

/** Bank 2's AS port: `--second-as-port`, else 8445, or a free port when `--as-port 0` asks for free ports. */
function secondAsPort(values: { 'as-port': string; 'second-as-port'?: string | undefined }): number {
  if (values['second-as-port'] !== undefined) return Number(values['second-as-port']);
  return Number(values['as-port']) === 0 ? 0 : 8445;
}

/** The demo RP's port: `--demo-rp-port`, else 8444, or a free port when `--as-port 0` asks for free ports. */
function demoRpPort(values: { 'as-port': string; 'demo-rp-port'?: string | undefined }): number {
  if (values['demo-rp-port'] !== undefined) return Number(values['demo-rp-port']);
  return Number(values['as-port']) === 0 ? 0 : DEFAULT_DEMO_RP_PORT;
}

/** What a relying-party library needs to be pointed at the sandbox (README "Your own relying party"). */
function rpLines(
  s: { issuer: string; serviceConfigurationUrl: string; tlsCaFile: string },
  qtspId: string,
  clients: readonly PlatformClient[],
): string[] {
  return [
    'for a relying-party library:',
    `  issuer               ${s.issuer}`,
    `  service config       ${s.serviceConfigurationUrl}?iss=${encodeURIComponent(s.issuer)}`,
    `  CA bundle (TLS)      ${s.tlsCaFile}`,
    `  qtsp_id              ${qtspId}`,
    ...clients.map(
      (c) => `  client               ${c.clientId} (${c.state}) redirect_uris ${c.redirectUris.join(' ')}`,
    ),
  ];
}

export async function runDev(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      'as-port': { type: 'string', default: '8441' },
      'second-as-port': { type: 'string' },
      'platform-port': { type: 'string', default: '8442' },
      'mediation-port': { type: 'string', default: '8443' },
      'smtp-port': { type: 'string', default: '2525' },
      'demo-rp-port': { type: 'string' },
      ...CLIENT_OPTIONS,
    },
  });
  const clients = clientsOf(values);
  const eco = await startEcosystem({
    demoRpPort: demoRpPort(values),
    clients,
    env: process.env,
    asPort: Number(values['as-port']),
    secondAsPort: secondAsPort(values),
    platformPort: Number(values['platform-port']),
    mediationPort: Number(values['mediation-port']),
    smtpPort: Number(values['smtp-port']),
  });
  const stopped = untilSignal(eco.config, 'qtsp dev', () => eco.close()); // handlers before the banner
  process.stdout.write(devBanner(eco));
  return stopped;
}

/** What `qtsp dev` prints once everything listens: the addresses of the QTSP and of the sandbox. */
function devBanner(eco: Ecosystem): string {
  return [
    'qtsp sandbox is running',
    ...(eco.demoRp
      ? [`  try it in a browser  ${eco.demoRp.url} (demo relying party: upload, choose a bank, sign)`]
      : []),
    `  signDoc              ${eco.qtsp.signDocUrl}`,
    `  OCSP, CRLs, TSA      ${eco.qtsp.publicationUrl} (plain HTTP: /ocsp, /crl/*.crl, /ca/*.crt, /tsa)`,
    `  operations           ${eco.qtsp.opsUrl} (plain HTTP, this machine only: /health/live, /health/ready, /metrics)`,
    ...eco.sandbox.banks.map((b, i) => `  bank ${i + 1} AS (issuer)   ${b.issuer} (${b.name}, BIC ${b.bic})`),
    `  account chooser      ${eco.sandbox.accountChooserUrl}`,
    `  chooser cookie reset ${eco.sandbox.accountChooserUrl}cookie (forgets the chosen bank)`,
    `  IDP directory        ${eco.sandbox.idpDirectoryUrl}`,
    `  service config       ${eco.sandbox.serviceConfigurationUrl}`,
    `  mediation service    ${eco.sandbox.mediationUrl}`,
    `  SMTP sink            ${eco.sandbox.smtp.url} (mail kept in ${join(eco.config.dataDir, 'sandbox', 'mail')})`,
    `  Redis                ${eco.redis.url}${eco.redis.local ? ' (local redis-server)' : ''}`,
    `  root CA              ${pkiPaths(eco.config.dataDir).rootCert}`,
    `  keys                 ${describeCustody(eco.qtsp.deps.keys)}`,
    ...rpLines(eco.sandbox, eco.config.qtspId, eco.sandbox.clients()),
    'try, in another terminal:  ./bin/qtsp.js sign README.md',
    '',
  ].join('\n');
}

const SANDBOX_USAGE =
  'usage: qtsp sandbox --signdoc-url URL [--data-dir DIR] [--as-port N] [--second-as-port N] [--platform-port N] ' +
  '[--mediation-port N] [--smtp-port N] [--clients FILE]... [--client JSON]...\n';

/**
 * `qtsp sandbox --signdoc-url URL`: the sandbox ecosystem alone, as a separate program (what the benchmark
 * runs in a child process). The CA material must exist (`qtsp pki init`): the SP record publishes our TLS
 * client certificate. Prints SANDBOX_READY and the addresses as JSON on one line.
 */
export async function runSandbox(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      'data-dir': { type: 'string' },
      'signdoc-url': { type: 'string' },
      'as-port': { type: 'string', default: '0' },
      'second-as-port': { type: 'string', default: '0' },
      'platform-port': { type: 'string', default: '0' },
      'mediation-port': { type: 'string', default: '0' },
      'smtp-port': { type: 'string', default: '0' },
      ...CLIENT_OPTIONS,
    },
  });
  if (!values['signdoc-url']) {
    process.stderr.write(SANDBOX_USAGE);
    return 2;
  }
  const clients = clientsOf(values);
  const config = loadConfig(values['data-dir'] ? { dataDir: values['data-dir'] } : {});
  const sandbox = await startSandbox({
    dataDir: config.dataDir,
    host: config.server.host,
    asPort: Number(values['as-port']),
    secondAsPort: Number(values['second-as-port']),
    platformPort: Number(values['platform-port']),
    mediationPort: Number(values['mediation-port']),
    smtpPort: Number(values['smtp-port']),
    qtsp: { id: config.qtspId, clientCertFile: config.client.certFile, signDocUrl: values['signdoc-url'] },
    clients,
  });
  const stopped = untilSignal(config, 'qtsp sandbox', () => sandbox.close()); // handlers before the ready line
  process.stdout.write(`${SANDBOX_READY}${JSON.stringify(sandboxInfo(sandbox))}\n`);
  return stopped;
}
