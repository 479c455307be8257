/**
 * The demo relying party (src/rp/demo) wired to a running sandbox: registered at the platform as client
 * `sandbox-demo-rp` with its callback and its account chooser redirect URI (spec 2.1, 2.14), a TLS server
 * certificate from the sandbox TLS CA, and our root CA for the independent verification of its results.
 */
import { isIP } from 'node:net';
import { join } from 'node:path';
import { createTlsCertificate, loadKeyed, saveKeyed } from '../ca/authority.ts';
import { pkiPaths } from '../ca/material.ts';
import type { Config } from '../config/schema.ts';
import { type DemoRpServer, startDemoRp } from '../rp/demo/server.ts';
import { type Sandbox, sandboxPaths } from '../sandbox/index.ts';
import { freePort } from '../util/free-port.ts';
import { publicHost } from '../util/listen.ts';
import { type Logger, logger as defaultLogger } from '../util/logger.ts';

export const DEMO_RP_CLIENT_ID = 'sandbox-demo-rp';
/** `qtsp dev`'s port of the demo RP (README: Try it in a browser) */
export const DEFAULT_DEMO_RP_PORT = 8444;

/** A fresh server certificate from the sandbox TLS CA (the one every sandbox client trusts) for the demo host. */
function demoRpTls(dataDir: string, host: string): { certFile: string; keyFile: string } {
  const paths = sandboxPaths(dataDir);
  const ca = loadKeyed(paths.tlsCaCert, paths.tlsCaKey);
  const own = ['0.0.0.0', '::', '127.0.0.1', 'localhost'].includes(host) ? [] : [host];
  const ips = ['127.0.0.1', ...own.filter((h) => isIP(h))];
  const dnsNames = ['localhost', ...own.filter((h) => !isIP(h))];
  const files = { certFile: join(paths.dir, 'demo-rp-server.pem'), keyFile: join(paths.dir, 'demo-rp-server.key.pem') };
  saveKeyed(
    createTlsCertificate(ca, { commonName: 'Sandbox Demo RP', usage: 'server', dnsNames, ips }),
    files.certFile,
    files.keyFile,
  );
  return files;
}

/** Registers the demo RP at the sandbox platform and starts it on `port` (0: a free one). */
export async function startSandboxDemoRp(
  sandbox: Sandbox,
  config: Config,
  port: number,
  logger?: Logger,
): Promise<DemoRpServer> {
  const host = config.server.host;
  const listenPort = port === 0 ? await freePort(host) : port;
  const origin = `https://${publicHost(host)}:${listenPort}`;
  const rp = await sandbox.registerClient({
    clientId: DEMO_RP_CLIENT_ID,
    state: 'active',
    redirectUris: [`${origin}/callback`],
    accountChooserRedirectUris: [`${origin}/bank-chosen`],
  });
  const pki = pkiPaths(config.dataDir);
  return startDemoRp(
    { host, port: listenPort, tls: demoRpTls(config.dataDir, host) },
    {
      endpoints: {
        serviceConfigurationUrl: sandbox.serviceConfigurationUrl,
        issuer: sandbox.issuer,
        tlsCaFile: sandbox.tlsCaFile,
        rp: { clientId: rp.clientId, certFile: rp.certFile, keyFile: rp.keyFile, redirectUri: rp.redirectUri },
      },
      accountChooserUrl: sandbox.accountChooserUrl,
      verifier: { rootCaFile: pki.rootCert, issuingCaFile: pki.issuingCert },
      logger: logger ?? defaultLogger,
    },
  );
}
