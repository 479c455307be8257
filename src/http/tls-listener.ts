/**
 * The mutual-TLS listener of the signDoc port: TLS 1.2+, client certificates requested but not chain-validated
 * (spec 4.5: the RP's certificate is self-signed; the SAD's cnf binding is what authenticates it), the limits and
 * timeouts of a public listener (listener.ts), and the client certificate of each connection, read once.
 */
import { readFileSync } from 'node:fs';
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

/** Serves `app` (app.ts createApp) on server.host:server.port over mutual TLS. */
export async function listen(config: Config, app: http.RequestListener, logger: Logger): Promise<RunningServer> {
  const server = https.createServer(
    {
      cert: readFileSync(config.server.tlsCertFile),
      key: readFileSync(config.server.tlsKeyFile),
      minVersion: 'TLSv1.2',
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
  return {
    url,
    signDocUrl: url + config.server.signDocPath,
    close: () => drain(config.lifecycle.drainTimeoutMs),
  };
}
