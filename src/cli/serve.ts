/**
 * `qtsp serve` (the QTSP alone) and `qtsp dev` (sandbox ecosystem + QTSP, the embedded sandbox defaults that
 * `npm start` runs). Both stop cleanly on SIGINT/SIGTERM.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { pkiInit, pkiPaths } from '../pki/init.ts';
import { startSandbox } from '../sandbox/index.ts';
import { startQtsp } from '../service.ts';

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
  const qtsp = await startQtsp(config);
  process.stdout.write(`qtsp serving signDoc at ${qtsp.signDocUrl}\n`);
  return untilSignal(() => qtsp.close());
}

export async function runDev(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { 'as-port': { type: 'string', default: '8441' }, 'platform-port': { type: 'string', default: '8442' } },
  });
  const base: Config = loadConfig();
  if (pkiInit({ dataDir: base.dataDir, qtspId: base.qtspId })) process.stdout.write(`created CA material in ${pkiPaths(base.dataDir).dir}\n`);
  const host = base.server.host;
  const sandbox = await startSandbox({
    dataDir: base.dataDir,
    host,
    asPort: Number(values['as-port']),
    platformPort: Number(values['platform-port']),
    qtsp: { id: base.qtspId, clientCertFile: base.client.certFile, signDocUrl: `https://${host}:${base.server.port}${base.server.signDocPath}` },
  });
  const config = loadConfig({ trust: { idpDirectoryUrl: sandbox.idpDirectoryUrl } });
  let qtsp;
  try {
    qtsp = await startQtsp(config);
  } catch (err) {
    await sandbox.close();
    throw err;
  }
  process.stdout.write(
    [
      'qtsp sandbox is running',
      `  signDoc              ${qtsp.signDocUrl}`,
      `  bank AS (issuer)     ${sandbox.issuer}`,
      `  IDP directory        ${sandbox.idpDirectoryUrl}`,
      `  service config       ${sandbox.serviceConfigurationUrl}`,
      `  root CA              ${pkiPaths(config.dataDir).rootCert}`,
      'try, in another terminal:  npm run qtsp -- sign README.md',
      '',
    ].join('\n'),
  );
  return untilSignal(async () => {
    await qtsp.close();
    await sandbox.close();
  });
}
