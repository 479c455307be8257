/**
 * The QTSP's HTTPS server: TLS 1.2+, client certificates requested but not chain-validated (spec 4.5: the
 * RP's certificate is self-signed; the SAD's cnf binding is what authenticates it), signDoc at the
 * configured path, and one error mapping (never a stack trace). It serves the protocol only: health and
 * metrics are on the operations listener (ops.ts), and a client without a certificate gets 401 before any
 * body is read.
 */
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import type * as net from 'node:net';
import { listen as listenOn, urlHost } from '../util/listen.ts';
import type { TLSSocket } from 'node:tls';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Config } from '../config/schema.ts';
import { badRequest, SignDocError, unauthorized } from '../errors.ts';
import { signDoc, type SignDocDeps, type SignDocResult } from '../signing/sign-doc.ts';
import { base64JsonArray } from '../util/base64.ts';
import type { Logger } from '../util/logger.ts';

/**
 * The DER of the client certificate of a TLS connection, read once per connection (issue 12:
 * getPeerCertificate builds an object of every field, ~0.045 ms, on each request of a kept-alive connection).
 * The certificate cannot change under the cache: listen() disables renegotiation on every connection, and
 * TLS 1.3 has none.
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

function sendError(res: Response, err: SignDocError): void {
  res.status(err.status).set('cache-control', 'no-store').json(err.toBody());
}

/**
 * A client that went away mid-request (disconnect during the body, or cut by server.requestTimeoutMs): not our
 * error and nobody to answer. body-parser reports it as `request.aborted`; a socket error can surface too.
 */
export function isClientAbort(err: unknown, req: Request): boolean {
  const { type, code } = err as { type?: string; code?: string };
  return (
    type === 'request.aborted' ||
    code === 'ECONNRESET' ||
    code === 'ECONNABORTED' ||
    code === 'ERR_STREAM_PREMATURE_CLOSE' ||
    req.socket.destroyed
  );
}

/**
 * body-parser's errors carry a `type` and a 4xx `status`; each becomes a 4xx with a clear description.
 * Compressed bodies are refused with 415 before anything is read (express.json inflate: false): a signDoc body
 * is at most server.maxBodyBytes of JSON that no relying-party library compresses, and inflating what an
 * unauthenticated client sends would only add CPU cost and decompression bombs (issue 11 item 4).
 */
function toSignDocError(err: unknown, logger: Logger): SignDocError {
  if (err instanceof SignDocError) return err;
  const { type, status } = err as { type?: string; status?: unknown };
  if (type === 'entity.parse.failed') return badRequest('the request body is not valid JSON');
  if (type === 'entity.too.large') return badRequest('the request body is too large');
  if (type === 'encoding.unsupported')
    return new SignDocError(
      'invalid_request',
      'the request body must not be compressed (Content-Encoding: identity only)',
      { status: 415 },
    );
  if (type === 'charset.unsupported') return badRequest('the request body must be UTF-8 JSON');
  // any other failure to read the body (a size that does not match Content-Length, ...): the client's fault
  if (typeof status === 'number' && status >= 400 && status < 500)
    return badRequest('the request body could not be read');
  logger.error({ event: 'http.unexpected', err }, 'unexpected error');
  return new SignDocError('server_error', 'internal error; the request was not signed');
}

/** The one error handler of the mutual-TLS port: aborts logged briefly, upstream details logged, never sent. */
function handleError(err: unknown, req: Request, res: Response, logger: Logger): void {
  if (isClientAbort(err, req)) {
    // once per request, no stack: an unauthenticated client can cause any number of these (issue 11 item 5)
    logger.info(
      {
        event: 'http.client_aborted',
        method: req.method,
        path: req.path,
        reason: (err as { type?: string; code?: string }).type ?? (err as { code?: string }).code,
      },
      'client went away before its request was read',
    );
    return;
  }
  const mapped = toSignDocError(err, logger);
  if (mapped.status >= 502 && mapped.status <= 504) {
    logger.warn(
      {
        event: 'signdoc.upstream_failed',
        status: mapped.status,
        error: mapped.code,
        description: mapped.description,
        detail: mapped.detail,
      },
      'signDoc refused: a service we depend on failed',
    );
  }
  if (mapped.status === 415) res.set('accept-encoding', 'identity'); // RFC 7694 section 3
  if (res.headersSent) return;
  sendError(res, mapped);
}

/**
 * Every path of the mutual-TLS port needs a client certificate (spec 4.5: signDoc is called over mTLS).
 * Refused here, before anything reads the body, with `connection: close` so an unread body is never parsed
 * as a next request. Not at the handshake: Node offers no hook to require a certificate without also
 * chain-validating it, and RPs' certificates are self-signed; a 401 also tells the RP what is missing. A
 * validator without one fetches OCSP, CRLs, CA certificates and time-stamps from the plain-HTTP publication
 * server.
 */
function requireClientCertificate(req: Request, res: Response, next: NextFunction): void {
  if (peerCertificateDer(req.socket as TLSSocket)) {
    next();
    return;
  }
  res
    .status(401)
    .set({ 'cache-control': 'no-store', connection: 'close', 'www-authenticate': 'mutual-tls' })
    .json(unauthorized('no TLS client certificate was presented; this port requires mutual TLS (spec 4.5)').toBody());
}

/** `routers`: further public endpoints mounted before the 404 handler (pki-routes.ts: /tsa, /ocsp, /crl, /ca) */
export function createApp(config: Config, deps: SignDocDeps, routers: readonly express.Router[] = []): express.Express {
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
  app.use(requireClientCertificate); // after the signDoc metrics: refusals are counted too
  app.set('etag', false);
  app.post(
    config.server.signDocPath,
    (req, _res, next) =>
      next(req.is('application/json') ? undefined : badRequest('Content-Type must be application/json')),
    express.json({ limit: config.server.maxBodyBytes, strict: true, type: 'application/json', inflate: false }),
    async (req: Request, res: Response) => {
      const result = await signDoc(req.body, peerCertificateDer(req.socket as TLSSocket), deps);
      res
        .status(200)
        .set({ 'cache-control': 'no-store', 'x-transaction-id': result.txn })
        .json({
          SignatureObject: result.SignatureObject,
          ...(result.revocationInfo ? { revocationInfo: result.revocationInfo } : {}),
        });
    },
  );
  app.all(config.server.signDocPath, (_req, res) => {
    res.status(405).set('allow', 'POST').json(badRequest('signDoc accepts POST only').toBody());
  });
  for (const router of routers) app.use(router);
  app.use((_req, res) => {
    res.status(404).json({ error: 'not_found', error_description: 'no such endpoint' });
  });
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    handleError(err, req, res, deps.logger);
  });
  return app;
}

/** `application/json`, optionally with charset utf-8: what every relying party sends */
const PLAIN_JSON = /^application\/json\s*(;\s*charset="?utf-8"?\s*)?$/i;
/** body-parser's strict mode: a JSON text must start with an object or an array (after JSON whitespace) */
const FIRST_CHAR = /^[\x20\x09\x0a\x0d]*([^\x20\x09\x0a\x0d])/;
const utf8 = new TextDecoder('utf-8'); // like body-parser's iconv-lite: drops a BOM, replaces invalid sequences

/**
 * signDoc's common request without express (issue 12: routing and body parsing cost more than the checks of
 * the SAD): POST to exactly the signDoc path, with a client certificate, Content-Type application/json (charset
 * utf-8 or none), no Content-Encoding, and a Content-Length within server.maxBodyBytes. The body is read,
 * decoded and parsed as express.json({strict: true}) does, and signDoc answers exactly as the express route
 * does (same status, headers, body, metrics). Every other request, including every unusual way of sending
 * signDoc (chunked, compressed, another charset, a path variant express also matches, too large), goes to the
 * express app unchanged, which stays the reference; test/integration/sign-doc.test.ts sends the same bodies
 * both ways and compares the answers.
 */
export function withSignDocFastPath(
  config: Config,
  deps: SignDocDeps,
  app: http.RequestListener,
): http.RequestListener {
  const path = config.server.signDocPath;
  const limit = config.server.maxBodyBytes;
  return (req, res) => {
    const h = req.headers;
    const length = Number(h['content-length']);
    if (
      req.method !== 'POST' ||
      req.url !== path ||
      h['content-encoding'] !== undefined ||
      h['transfer-encoding'] !== undefined ||
      !(length > 0 && length <= limit) ||
      !PLAIN_JSON.test(h['content-type'] ?? '')
    ) {
      app(req, res);
      return;
    }
    const clientCertDer = peerCertificateDer(req.socket as TLSSocket);
    if (!clientCertDer) {
      app(req, res); // the 401 of requireClientCertificate
      return;
    }
    const stop = deps.metrics.duration.startTimer();
    res.once('finish', () => {
      const status = String(res.statusCode);
      stop({ status });
      deps.metrics.requests.inc({ status });
    });
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.once('error', (err: NodeJS.ErrnoException) => {
      // as handleError: once per request, no stack (issue 11 item 5)
      deps.logger.info(
        { event: 'http.client_aborted', method: req.method, path: req.url, reason: err.code },
        'client went away before its request was read',
      );
      res.destroy();
    });
    req.once('end', () => {
      answerSignDoc(res, chunks, clientCertDer, deps).catch((err: unknown) => {
        deps.logger.error({ event: 'http.unexpected', err }, 'unexpected error');
        res.destroy();
      });
    });
  };
}

function parseJsonBody(chunks: Buffer[]): unknown {
  const text = utf8.decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
  if (text === '') return {}; // body-parser: an empty body (a lone BOM) is {}
  const first = FIRST_CHAR.exec(text)?.[1];
  if (first !== '{' && first !== '[') throw badRequest('the request body is not valid JSON');
  try {
    return JSON.parse(text);
  } catch {
    throw badRequest('the request body is not valid JSON');
  }
}

function sendJson(res: http.ServerResponse, status: number, headers: Record<string, string>, body: unknown): void {
  sendJsonText(res, status, headers, JSON.stringify(body), 'utf8');
}

/** `encoding` latin1 only for text that is ASCII (signDocAnswerJson): the same bytes, encoded faster */
function sendJsonText(
  res: http.ServerResponse,
  status: number,
  headers: Record<string, string>,
  text: string,
  encoding: 'utf8' | 'latin1',
): void {
  const json = Buffer.from(text, encoding); // encoded once: its length and the bytes sent
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': json.length,
  });
  res.end(json);
}

/**
 * The JSON text of a signDoc answer, byte for byte what JSON.stringify makes of the express route's object
 * (test/unit/sign-doc-answer.test.ts), written from its Base64 texts without the escape scan of every
 * character: 0.07 ms of CPU less for a ten-hash B-B answer (issue 12).
 */
export function signDocAnswerJson(result: Pick<SignDocResult, 'SignatureObject' | 'revocationInfo'>): string {
  const revocation = result.revocationInfo
    ? `,"revocationInfo":{"ocsp":${base64JsonArray(result.revocationInfo.ocsp)},"crl":${base64JsonArray(result.revocationInfo.crl)}}`
    : '';
  return `{"SignatureObject":${base64JsonArray(result.SignatureObject)}${revocation}}`;
}

async function answerSignDoc(
  res: http.ServerResponse,
  chunks: Buffer[],
  clientCertDer: Buffer,
  deps: SignDocDeps,
): Promise<void> {
  let result;
  try {
    result = await signDoc(parseJsonBody(chunks), clientCertDer, deps);
  } catch (err) {
    const e = toSignDocError(err, deps.logger);
    if (e.status >= 502 && e.status <= 504) {
      deps.logger.warn(
        {
          event: 'signdoc.upstream_failed',
          status: e.status,
          error: e.code,
          description: e.description,
          detail: e.detail,
        },
        'signDoc refused: a service we depend on failed',
      );
    }
    sendJson(res, e.status, { 'cache-control': 'no-store' }, e.toBody());
    return;
  }
  sendJsonText(
    res,
    200,
    { 'cache-control': 'no-store', 'x-transaction-id': result.txn },
    signDocAnswerJson(result),
    'latin1',
  );
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
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    if (isClientAbort(err, req))
      return void logger.info(
        { event: 'http.client_aborted', method: req.method, path: req.path },
        'client went away before its request was read',
      );
    const status = (err as { status?: unknown }).status;
    if (typeof status === 'number' && status >= 400 && status < 500)
      return void res
        .status(400)
        .json({ error: 'invalid_request', error_description: 'the request could not be read' });
    logger.error({ event: 'http.unexpected', err }, 'unexpected error');
    res.status(500).json({ error: 'server_error', error_description: 'internal error' });
  });
  const server = http.createServer(serverTimeouts(config), app);
  limitConnections(server, config, 'publication', logger);
  cutSilentClients(server, config.server.headersTimeoutMs, 'connection');
  const drain = drainable(server);
  const port = await listenOn(server, config.server.publicationPort, config.server.host);
  return { url: `http://${urlHost(config.server.host)}:${port}`, close: () => drain(config.lifecycle.drainTimeoutMs) };
}

/**
 * Timeouts of a public listener (issue 11 item 7): headers (TLS handshake included) within
 * server.headersTimeoutMs, the whole request within server.requestTimeoutMs, checked every second (Node's
 * default of 30 s would let a silent client stay that much longer).
 */
function serverTimeouts(config: Config): http.ServerOptions {
  return {
    headersTimeout: config.server.headersTimeoutMs,
    requestTimeout: config.server.requestTimeoutMs,
    connectionsCheckingInterval: 1000,
  };
}

/**
 * Connection limits of a public listener (issue 11 item 7): at most server.maxConnections open at once
 * (node closes the ones past it), at most server.maxConnectionsPerAddress from one address (closed here,
 * before the TLS handshake costs anything). Refusals are logged at most once a minute per listener.
 */
export function limitConnections(server: net.Server, config: Config, name: string, logger: Logger): void {
  const { maxConnections, maxConnectionsPerAddress } = config.server;
  server.maxConnections = maxConnections;
  let refused = 0;
  let lastLog = 0;
  const refuse = (why: string) => {
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

/**
 * Node's headersTimeout starts with the first byte of a request: a client that connects (and, on TLS,
 * completes the handshake) and then sends nothing would hold its connection until keepAliveTimeout or for
 * ever. Such a connection is closed once server.headersTimeoutMs have passed without a complete request.
 */
function cutSilentClients(server: http.Server, timeoutMs: number, connected: 'connection' | 'secureConnection'): void {
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

/**
 * Graceful close of a server (issue 10 item 3): refuse new connections at once, close idle keep-alive
 * connections, let requests in progress finish (their responses say `connection: close`), and cut whatever
 * still runs after `timeoutMs`. Resolves when the server is closed.
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
