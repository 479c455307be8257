/** `qtsp pki init` and `qtsp pki root`. */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/load.ts';
import { pkiInit, pkiPaths } from '../pki/init.ts';

export async function runPki(args: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args,
    allowPositionals: true,
    options: { rsa: { type: 'boolean', default: false }, force: { type: 'boolean', default: false }, 'data-dir': { type: 'string' } },
  });
  const config = loadConfig(values['data-dir'] ? { dataDir: values['data-dir'] } : {});
  const paths = pkiPaths(config.dataDir);
  switch (positionals[0]) {
    case 'init': {
      const created = pkiInit({ dataDir: config.dataDir, qtspId: config.qtspId, algorithm: values.rsa ? 'RSA-3072' : 'P-256', force: values.force });
      process.stdout.write(created ? `created CA material in ${paths.dir}\n` : `CA material exists in ${paths.dir} (use --force to replace it)\n`);
      return 0;
    }
    case 'root':
      process.stdout.write(readFileSync(paths.rootCert, 'utf8'));
      return 0;
    default:
      process.stderr.write('usage: qtsp pki init [--rsa] [--force] | qtsp pki root\n');
      return 2;
  }
}
