/**
 * `qtsp serve` (the QTSP alone) and `qtsp dev` (sandbox ecosystem + QTSP, the embedded sandbox defaults that
 * `npm start` runs). Both stop cleanly on SIGINT/SIGTERM.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/load.ts';
import { pkiPaths } from '../pki/init.ts';
import { startQtsp } from '../service.ts';
import { startEcosystem } from './ecosystem.ts';

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
  const eco = await startEcosystem({ env: process.env, asPort: Number(values['as-port']), platformPort: Number(values['platform-port']) });
  process.stdout.write(
    [
      'qtsp sandbox is running',
      `  signDoc              ${eco.qtsp.signDocUrl}`,
      `  bank AS (issuer)     ${eco.sandbox.issuer}`,
      `  IDP directory        ${eco.sandbox.idpDirectoryUrl}`,
      `  service config       ${eco.sandbox.serviceConfigurationUrl}`,
      `  root CA              ${pkiPaths(eco.config.dataDir).rootCert}`,
      'try, in another terminal:  npm run qtsp -- sign README.md',
      '',
    ].join('\n'),
  );
  return untilSignal(() => eco.close());
}
