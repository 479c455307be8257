/**
 * The plain-HTTP publication server: only the routers given (OCSP, CRLs, CA certificates, TSA), whose answers
 * are signed objects, so validators that cannot speak TLS to them (NSS) still reach them. Same limits and
 * timeouts as the signDoc port (listener.ts), no client certificate.
 */
import * as http from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Config } from '../config/schema.ts';
import { listen as listenOn, urlHost } from '../util/listen.ts';
import type { Logger } from '../util/logger.ts';
import { isClientAbort } from './answers.ts';
import { cutSilentClients, drainable, limitConnections, serverTimeouts } from './listener.ts';

export async function listenPublication(
  config: Config,
  routers: readonly express.Router[],
  logger: Logger,
): Promise<{ url: string; close(): Promise<void> }> {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  for (const router of routers) app.use(router);
  app.use((_req, res) => {
    res.status(404).json({ error: 'not_found', error_description: 'no such endpoint' });
  });
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => publicationError(err, req, res, logger));
  const server = http.createServer(serverTimeouts(config), app);
  limitConnections(server, config, 'publication', logger);
  cutSilentClients(server, config.server.headersTimeoutMs, 'connection');
  const drain = drainable(server);
  const port = await listenOn(server, config.server.publicationPort, config.server.host);
  return { url: `http://${urlHost(config.server.host)}:${port}`, close: () => drain(config.lifecycle.drainTimeoutMs) };
}

/** A client that went away: one line at info; a body that cannot be read: 400; anything else: 500, logged. */
function publicationError(err: unknown, req: Request, res: Response, logger: Logger): void {
  if (isClientAbort(err, req)) {
    logger.info(
      { event: 'http.client_aborted', method: req.method, path: req.path },
      'client went away before its request was read',
    );
    return;
  }
  const status = (err as { status?: unknown }).status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    res.status(400).json({ error: 'invalid_request', error_description: 'the request could not be read' });
    return;
  }
  logger.error({ event: 'http.unexpected', err }, 'unexpected error');
  res.status(500).json({ error: 'server_error', error_description: 'internal error' });
}
