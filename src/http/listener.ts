/**
 * What our HTTP listeners share: the timeouts and connection limits of a public listener (the signDoc port and
 * the publication server), closing clients that connect and send nothing, and a graceful drain on close (every
 * listener, the operations one too).
 */
import type * as http from 'node:http';
import type * as net from 'node:net';
import type { Config } from '../config/schema.ts';
import type { Logger } from '../util/logger.ts';

/**
 * Timeouts of a public listener: headers (TLS handshake included) within server.headersTimeoutMs, the whole
 * request within server.requestTimeoutMs, checked every second (Node's default interval would let a silent client
 * stay up to 30 s longer).
 */
export function serverTimeouts(config: Config): http.ServerOptions {
  return {
    headersTimeout: config.server.headersTimeoutMs,
    requestTimeout: config.server.requestTimeoutMs,
    connectionsCheckingInterval: 1000,
  };
}

/**
 * Connection limits of a public listener: at most server.maxConnections open at once (node closes the ones past
 * it), at most server.maxConnectionsPerAddress from one address (closed here, before the TLS handshake costs
 * anything). Refusals are logged at most once a minute per listener.
 */
export function limitConnections(server: net.Server, config: Config, name: string, logger: Logger): void {
  const { maxConnections, maxConnectionsPerAddress } = config.server;
  server.maxConnections = maxConnections;
  const refuse = refusalLog(name, logger);
  server.on('drop', () => refuse(`${maxConnections} connections open (server.maxConnections)`));
  if (maxConnectionsPerAddress === 0) return;
  const open = new Map<string, number>();
  server.prependListener('connection', (socket: net.Socket) => {
    const address = socket.remoteAddress ?? '';
    const count = (open.get(address) ?? 0) + 1;
    if (count > maxConnectionsPerAddress) {
      refuse(`${maxConnectionsPerAddress} connections open from one address (server.maxConnectionsPerAddress)`);
      socket.destroy();
      return;
    }
    open.set(address, count);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}

/** Counts refused connections and logs them at most once a minute, with the count since the last line. */
function refusalLog(name: string, logger: Logger): (why: string) => void {
  let refused = 0;
  let lastLog = 0;
  return (why) => {
    refused++;
    const now = Date.now();
    if (now - lastLog < 60_000) return;
    lastLog = now;
    logger.warn(
      { event: 'http.connection_refused', listener: name, why, refused_since_last_log: refused },
      `connections refused: ${why}`,
    );
    refused = 0;
  };
}

/**
 * Node's headersTimeout starts with the first byte of a request: a client that connects (and, on TLS,
 * completes the handshake) and then sends nothing would hold its connection until keepAliveTimeout or for
 * ever. Such a connection is closed once server.headersTimeoutMs have passed without a complete request.
 */
export function cutSilentClients(
  server: http.Server,
  timeoutMs: number,
  connected: 'connection' | 'secureConnection',
): void {
  const timers = new WeakMap<net.Socket, NodeJS.Timeout>();
  server.on(connected, (socket: net.Socket) => {
    const timer = setTimeout(() => socket.destroy(), timeoutMs);
    timer.unref();
    timers.set(socket, timer);
    socket.once('close', () => clearTimeout(timer));
  });
  server.prependListener('request', (req: http.IncomingMessage) => {
    clearTimeout(timers.get(req.socket));
    timers.delete(req.socket);
  });
}

/**
 * Graceful close of a server: refuse new connections at once, close idle keep-alive connections, let requests
 * in progress finish (their responses say `connection: close`), and cut whatever still runs after `timeoutMs`.
 * Resolves when the server is closed.
 */
export function drainable(server: http.Server): (timeoutMs: number) => Promise<void> {
  let inFlight = 0;
  let draining = false;
  let drained: (() => void) | undefined;
  server.prependListener('request', (_req: http.IncomingMessage, res: http.ServerResponse) => {
    inFlight++;
    if (draining) res.setHeader('connection', 'close');
    res.once('close', () => {
      inFlight--;
      if (draining && inFlight === 0) drained?.();
    });
  });
  return async (timeoutMs) => {
    draining = true;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    if (inFlight > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        drained = resolve;
        timer = setTimeout(resolve, timeoutMs);
      });
      clearTimeout(timer);
    }
    server.closeAllConnections();
    await closed;
  };
}
