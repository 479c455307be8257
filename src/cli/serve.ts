/**
 * `qtsp serve` (the QTSP alone) and `qtsp dev` (sandbox ecosystem + QTSP, the embedded sandbox defaults that
 * `npm start` runs). Both stop cleanly on SIGINT/SIGTERM.
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/load.ts';
import { pkiPaths } from '../pki/init.ts';
import { startQtsp } from '../service.ts';
import { provideRedis } from '../util/redis-server.ts';
import { SANDBOX_READY, sandboxInfo, startEcosystem } from './ecosystem.ts';
import { startSandbox } from '../sandbox/index.ts';

function untilSignal(stop: () => Promise<void>): Promise<number> {
  return new Promise((resolve) => {
    const handler = (signal: string) => {
      process.stdout.write(`\n${signal}: stopping\n`);
      stop().then(() => resolve(0), () => resolve(1));
    };
    process.once('SIGINT', handler);
    process.once('SIGTERM', handler);
  });
}

export async function runServe(_args: string[]): Promise<number> {
  const config = loadConfig();
  // redis.url, else REDIS_URL, else a local redis-server on a free loopback port (files in <dataDir>/redis)
  const redis = await provideRedis(config.redis.url, process.env, config.dataDir);
  const qtsp = await startQtsp({ ...config, redis: { ...config.redis, url: redis.url } }).catch(async (err: unknown) => {
    await redis.stop();
    throw err;
  });
  process.stdout.write(`qtsp serving signDoc at ${qtsp.signDocUrl}\n`);
  return untilSignal(async () => {
    await qtsp.close();
    await redis.stop();
  });
}

export async function runDev(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      'as-port': { type: 'string', default: '8441' },
      'platform-port': { type: 'string', default: '8442' },
      'mediation-port': { type: 'string', default: '8443' },
      'smtp-port': { type: 'string', default: '2525' },
    },
  });
  const eco = await startEcosystem({
    env: process.env,
    asPort: Number(values['as-port']),
    platformPort: Number(values['platform-port']),
    mediationPort: Number(values['mediation-port']),
    smtpPort: Number(values['smtp-port']),
  });
  process.stdout.write(
    [
      'qtsp sandbox is running',
      `  signDoc              ${eco.qtsp.signDocUrl}`,
      `  OCSP, CRLs, TSA      ${eco.qtsp.publicationUrl} (plain HTTP: /ocsp, /crl/*.crl, /ca/*.crt, /tsa)`,
      `  bank AS (issuer)     ${eco.sandbox.issuer}`,
      `  IDP directory        ${eco.sandbox.idpDirectoryUrl}`,
      `  service config       ${eco.sandbox.serviceConfigurationUrl}`,
      `  mediation service    ${eco.sandbox.mediationUrl}`,
      `  SMTP sink            ${eco.sandbox.smtp.url} (mail kept in ${join(eco.config.dataDir, 'sandbox', 'mail')})`,
      `  Redis                ${eco.redis.url}${eco.redis.local ? ' (local redis-server)' : ''}`,
      `  root CA              ${pkiPaths(eco.config.dataDir).rootCert}`,
      'try, in another terminal:  npm run qtsp -- sign README.md',
      '',
    ].join('\n'),
  );
  return untilSignal(() => eco.close());
}

/**
 * `qtsp sandbox --signdoc-url URL`: the sandbox ecosystem alone, as a separate program (what the benchmark
 * runs in a child process). The CA material must exist (`qtsp pki init`): the SP record publishes our TLS
 * client certificate. Prints SANDBOX_READY and the addresses as JSON on one line.
 */
export async function runSandbox(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { 'data-dir': { type: 'string' }, 'signdoc-url': { type: 'string' }, 'as-port': { type: 'string', default: '0' }, 'platform-port': { type: 'string', default: '0' } },
  });
  if (!values['signdoc-url']) {
    process.stderr.write('usage: qtsp sandbox --signdoc-url URL [--data-dir DIR] [--as-port N] [--platform-port N]\n');
    return 2;
  }
  const config = loadConfig(values['data-dir'] ? { dataDir: values['data-dir'] } : {});
  const sandbox = await startSandbox({
    dataDir: config.dataDir,
    host: config.server.host,
    asPort: Number(values['as-port']),
    platformPort: Number(values['platform-port']),
    mediationPort: 0,
    smtpPort: 0,
    qtsp: { id: config.qtspId, clientCertFile: config.client.certFile, signDocUrl: values['signdoc-url'] },
  });
  process.stdout.write(`${SANDBOX_READY}${JSON.stringify(sandboxInfo(sandbox))}\n`);
  return untilSignal(() => sandbox.close());
}
