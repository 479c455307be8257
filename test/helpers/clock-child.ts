/**
 * A whole ecosystem (sandbox, QTSP) on the data directory given as JSON in argv[2], in this process, which
 * test/helpers/moved-clock.ts starts under libfaketime: the QTSP, the banks and Redis all run on the moved
 * clock. Prints CLOCK_READY and what the test needs as JSON once every server listens; stops on SIGTERM.
 */
import { startEcosystem } from '../../src/cli/ecosystem.ts';
import type { ConfigInput } from '../../src/config/schema.ts';

const config = JSON.parse(process.argv[2] ?? '{}') as ConfigInput;
const eco = await startEcosystem({ config, defaultMetrics: false });
process.once('SIGTERM', () => {
  void eco.close().finally(() => process.exit(0));
});
process.stdout.write(
  `CLOCK_READY ${JSON.stringify({
    signDocUrl: eco.qtsp.signDocUrl,
    opsUrl: eco.qtsp.opsUrl,
    publicationUrl: eco.qtsp.publicationUrl,
    endpoints: eco.endpoints,
    spDirectoryUrl: eco.sandbox.spDirectoryUrl,
  })}\n`,
);
