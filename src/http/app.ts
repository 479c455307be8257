/**
 * The request listener of the mutual-TLS port. A request for exactly the signDoc path goes straight to the signDoc
 * handler (sign-doc-handler.ts); every other request goes through express, which routes the other spellings of
 * that path (a query, a trailing slash, another letter case) to the same handler, serves the routers given, and
 * answers 404. Every route needs a client certificate; health and metrics are on the operations listener (ops.ts).
 */
import type * as http from 'node:http';
import type { TLSSocket } from 'node:tls';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Config } from '../config/schema.ts';
import type { SignDocDeps } from '../signing/sign-doc.ts';
import { answerFailure, refuseWithoutCertificate } from './answers.ts';
import { countSignDoc, signDocHandler } from './sign-doc-handler.ts';
import { peerCertificateDer } from './tls-listener.ts';

/** `routers`: further endpoints mounted before the 404 handler (pki-routes.ts: /tsa, /ocsp, /crl, /ca; admin) */
export function createApp(
  config: Config,
  deps: SignDocDeps,
  routers: readonly express.Router[] = [],
): http.RequestListener {
  const path = config.server.signDocPath;
  const signDoc = signDocHandler(config, deps);
  const app = expressApp(config, deps, signDoc, routers);
  return (req, res) => (req.url === path ? signDoc(req, res) : app(req, res));
}

function expressApp(
  config: Config,
  deps: SignDocDeps,
  signDoc: http.RequestListener,
  routers: readonly express.Router[],
): express.Express {
  const path = config.server.signDocPath;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.all(path, signDoc);
  // requests under the signDoc path (`/signDoc/x`, answered 404 or 401 below) count in the signDoc metrics too
  app.use(path, (_req, res, next) => {
    countSignDoc(res, deps.metrics);
    next();
  });
  app.use(requireClientCertificate);
  for (const router of routers) app.use(router);
  app.use((_req, res) => {
    res.status(404).json({ error: 'not_found', error_description: 'no such endpoint' });
  });
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    answerFailure(err, req, res, deps.logger);
  });
  return app;
}

function requireClientCertificate(req: Request, res: Response, next: NextFunction): void {
  if (peerCertificateDer(req.socket as TLSSocket)) next();
  else refuseWithoutCertificate(res);
}
