/**
 * The QTSP's HTTPS server: TLS 1.2+, client certificates requested but not chain-validated (spec 4.5: the
 * RP's certificate is self-signed; the SAD's cnf binding is what authenticates it), signDoc at the
 * configured path, health endpoints, and one error mapping (never a stack trace).
 */
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Config } from '../config/schema.ts';
import { badRequest, SignDocError } from '../errors.ts';
import { signDoc, type SignDocDeps } from '../signing/sign-doc.ts';
import type { Logger } from '../util/logger.ts';

function sendError(res: Response, err: SignDocError): void {
  res.status(err.status).set('cache-control', 'no-store').json(err.toBody());
}

/** body-parser's errors carry a `type`; map them to 400s with a clear description */
function toSignDocError(err: unknown, logger: Logger): SignDocError {
  if (err instanceof SignDocError) return err;
  const type = (err as { type?: string }).type;
  if (type === 'entity.parse.failed') return badRequest('the request body is not valid JSON');
  if (type === 'entity.too.large') return badRequest('the request body is too large');
  if (type === 'encoding.unsupported' || type === 'charset.unsupported') return badRequest('the request body must be UTF-8 JSON');
  logger.error({ event: 'http.unexpected', err }, 'unexpected error');
  return new SignDocError('server_error', 'internal error; the request was not signed');
}

export interface ReadinessCheck {
  (): { ready: boolean; reasons: string[] };
}

/** `routers`: further public endpoints mounted before the 404 handler (pki-routes.ts: /tsa, /ocsp, /crl, /ca) */
export function createApp(config: Config, deps: SignDocDeps, readiness: ReadinessCheck, routers: readonly express.Router[] = []): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.use(config.server.signDocPath, (_req, res, next) => {
    const stop = deps.metrics.duration.startTimer();
    res.on('finish', () => {
      const status = String(res.statusCode);
      stop({ status });
      deps.metrics.requests.inc({ status });
    });
    next();
  });
  app.set('etag', false);
  app.post(
    config.server.signDocPath,
    (req, _res, next) => next(req.is('application/json') ? undefined : badRequest('Content-Type must be application/json')),
    express.json({ limit: config.server.maxBodyBytes, strict: true, type: 'application/json' }),
    async (req: Request, res: Response) => {
      const socket = req.socket as TLSSocket;
      const peer = socket.getPeerCertificate?.(false);
      const result = await signDoc(req.body, peer?.raw, deps);
      res.status(200).set({ 'cache-control': 'no-store', 'x-transaction-id': result.txn }).json({ SignatureObject: result.SignatureObject, ...(result.revocationInfo ? { revocationInfo: result.revocationInfo } : {}) });
    },
  );
  app.get('/metrics', async (_req, res) => {
    res.set('content-type', deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics());
  });
  app.all(config.server.signDocPath, (_req, res) => {
    res.status(405).set('allow', 'POST').json(badRequest('signDoc accepts POST only').toBody());
  });
  app.get('/health/live', (_req, res) => {
    res.json({ status: 'live' });
  });
  app.get('/health/ready', (_req, res) => {
    const r = readiness();
    res.status(r.ready ? 200 : 503).json({ status: r.ready ? 'ready' : 'not_ready', reasons: r.reasons });
  });
  for (const router of routers) app.use(router);
  app.use((_req, res) => {
    res.status(404).json({ error: 'not_found', error_description: 'no such endpoint' });
  });
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    sendError(res, toSignDocError(err, deps.logger));
  });
  return app;
}

export interface RunningServer {
  readonly url: string;
  readonly signDocUrl: string;
  close(): Promise<void>;
}

/**
 * The plain-HTTP publication server: only the routers given (OCSP, CRLs, CA certificates, TSA), whose
 * answers are signed objects, so validators that cannot speak TLS to them (NSS) still reach them.
 */
export async function listenPublication(config: Config, routers: readonly express.Router[]): Promise<{ url: string; close(): Promise<void> }> {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  for (const router of routers) app.use(router);
  app.use((_req, res) => {
    res.status(404).json({ error: 'not_found', error_description: 'no such endpoint' });
  });
  const server = http.createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.server.publicationPort, config.server.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host;
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export async function listen(config: Config, app: express.Express): Promise<RunningServer> {
  const server = https.createServer(
    {
      cert: readFileSync(config.server.tlsCertFile),
      key: readFileSync(config.server.tlsKeyFile),
      minVersion: 'TLSv1.2',
      requestCert: true,
      rejectUnauthorized: false,
    },
    app,
  );
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.server.port, config.server.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host;
  const url = `https://${host}:${port}`;
  return {
    url,
    signDocUrl: url + config.server.signDocPath,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
