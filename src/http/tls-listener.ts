/**
 * The mutual-TLS listener of the signDoc port: TLS 1.2+, client certificates requested but not chain-validated
 * (spec 4.5: the RP's certificate is self-signed; the SAD's cnf binding is what authenticates it), the limits and
 * timeouts of a public listener (listener.ts), and the client certificate of each connection, read once.
 */
import { readFileSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import type * as http from 'node:http';
import * as https from 'node:https';
import type { TLSSocket } from 'node:tls';
import type { Config } from '../config/schema.ts';
import { listen as listenOn, urlHost } from '../util/listen.ts';
import type { Logger } from '../util/logger.ts';
import { cutSilentClients, drainable, limitConnections, serverTimeouts } from './listener.ts';

/**
 * The DER of the client certificate of a TLS connection, read once per connection: getPeerCertificate builds an
 * object of every field on each call, and a kept-alive connection carries many requests. The certificate cannot
 * change under the cache: listen() disables renegotiation on every connection, and TLS 1.3 has none.
 */
const peerCertificates = new WeakMap<TLSSocket, Buffer | null>();
export function peerCertificateDer(socket: TLSSocket): Buffer | undefined {
  let der = peerCertificates.get(socket);
  if (der === undefined) {
    der = socket.getPeerCertificate?.(false)?.raw ?? null;
    peerCertificates.set(socket, der);
  }
  return der ?? undefined;
}

export interface RunningServer {
  readonly url: string;
  readonly signDocUrl: string;
  close(): Promise<void>;
}

/** The secure context's part of the options: setSecureContext replaces all of it, so both calls use this. */
function secureContextOptions(config: Config): { cert: Buffer; key: Buffer; minVersion: 'TLSv1.2' } {
  return {
    cert: readFileSync(config.server.tlsCertFile),
    key: readFileSync(config.server.tlsKeyFile),
    minVersion: 'TLSv1.2',
  };
}

/**
 * A renewed server certificate is served from the next handshake, without a restart: both files are polled
 * (fs.watchFile, calendar.reloadCheckSeconds); a pair that does not match (one file written, not yet the other)
 * is refused by OpenSSL and the current one stays until the next change.
 */
function watchServerCertificate(
  server: https.Server,
  config: Config,
  logger: Logger,
  switched: () => void,
): { stop(): void } {
  let served: Buffer = readFileSync(config.server.tlsCertFile);
  const changed = (now: Stats, before: Stats) => {
    if (now.mtimeMs === before.mtimeMs && now.ino === before.ino) return;
    try {
      const options = secureContextOptions(config);
      if (options.cert.equals(served)) return;
      server.setSecureContext(options);
      served = options.cert;
      logger.info({ event: 'tls.server_certificate_reloaded' }, 'renewed HTTPS server certificate in use');
      switched();
    } catch (err) {
      logger.error(
        { event: 'tls.server_certificate_reload_failed', error: (err as Error).message },
        'HTTPS server certificate not switched',
      );
    }
  };
  const interval = config.calendar.reloadCheckSeconds * 1000;
  const files = [config.server.tlsCertFile, config.server.tlsKeyFile];
  for (const file of files) watchFile(file, { interval, persistent: false }, changed);
  return {
    stop: () => {
      for (const file of files) unwatchFile(file, changed);
    },
  };
}

/**
 * Serves `app` (app.ts createApp) on server.host:server.port over mutual TLS; `certificateSwitched` is called
 * once a renewed server certificate is in use.
 */
export async function listen(
  config: Config,
  app: http.RequestListener,
  logger: Logger,
  certificateSwitched: () => void = () => undefined,
): Promise<RunningServer> {
  const server = https.createServer(
    {
      ...secureContextOptions(config),
      requestCert: true,
      rejectUnauthorized: false,
      handshakeTimeout: config.server.headersTimeoutMs,
      ...serverTimeouts(config),
    },
    app,
  );
  limitConnections(server, config, 'signDoc', logger);
  // TLS 1.2 renegotiation could swap the client certificate mid-connection (peerCertificateDer reads it once)
  server.on('secureConnection', (socket: TLSSocket) => socket.disableRenegotiation());
  cutSilentClients(server, config.server.headersTimeoutMs, 'secureConnection');
  server.keepAliveTimeout = 65_000;
  const drain = drainable(server);
  const port = await listenOn(server, config.server.port, config.server.host);
  const url = `https://${urlHost(config.server.host)}:${port}`;
  const certificate = watchServerCertificate(server, config, logger, certificateSwitched);
  return {
    url,
    signDocUrl: url + config.server.signDocPath,
    close: () => {
      certificate.stop();
      return drain(config.lifecycle.drainTimeoutMs);
    },
  };
}
