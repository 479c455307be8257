/**
 * Outgoing HTTP(S) for calls that need a client certificate, a private CA and a hard timeout, on undici (the
 * engine of Node's own fetch; global fetch cannot take TLS options without undici's Agent anyway). Bodies are
 * capped so a hostile peer cannot exhaust memory.
 *
 * Why undici and not node:https: signDoc makes one introspection call per request, and through this module a
 * kept-alive mTLS POST costs about half the client CPU on undici that it cost on node:https (ClientRequest, the
 * agent's socket pool, IncomingMessage's stream); docs/performance.md has the comparison.
 */
import { Agent, type Dispatcher } from 'undici';
import type { IncomingHttpHeaders } from 'node:http';

/** a keep-alive pool of connections per origin, with its TLS settings (tlsAgent); pass it on every call */
export type HttpAgent = Dispatcher;

export interface HttpResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

export interface HttpRequestOptions {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  /** keep-alive agent carrying ca / cert / key (tlsAgent); without one, undici's default (public CAs) */
  readonly agent?: HttpAgent;
  readonly timeoutMs: number;
  readonly maxResponseBytes?: number;
  /**
   * send the request again once when the kept-alive socket it went out on was closed before any answer (see
   * isStaleSocket); for calls that are safe to repeat and have no retry policy of their own
   */
  readonly repeatOnStaleSocket?: boolean;
}

export interface TlsAgentOptions {
  /** trusted CAs (PEM); without them, Node's bundled public CAs */
  readonly ca?: string | Buffer;
  /** our client certificate and key (PEM), for mutual TLS */
  readonly cert?: string | Buffer;
  readonly key?: string | Buffer;
  readonly minVersion?: 'TLSv1' | 'TLSv1.1' | 'TLSv1.2' | 'TLSv1.3';
  readonly maxVersion?: 'TLSv1' | 'TLSv1.1' | 'TLSv1.2' | 'TLSv1.3';
  /** connections kept per origin (default 64) */
  readonly connections?: number;
}

/** A keep-alive agent that verifies the server against `ca` and, given cert and key, presents our certificate. */
export function tlsAgent(options: TlsAgentOptions = {}): HttpAgent {
  const { connections = 64, ...tls } = options;
  return new Agent({ connections, connect: { minVersion: 'TLSv1.2', ...tls, rejectUnauthorized: true } });
}

export class HttpTimeoutError extends Error {
  override name = 'HttpTimeoutError';
}

export class HttpTransportError extends Error {
  override name = 'HttpTransportError';
}

/**
 * A kept-alive connection the server closed while idle (its keep-alive timeout, often 5 s) can be handed to a
 * new request in the instant before the close arrives; the request then fails without having reached the
 * server. undici keeps connections no longer than the server's Keep-Alive hint (4 s without one) and checks an
 * idle one before reusing it, so this is rare, but a server with a shorter timeout and no hint can still race
 * us. With `repeatOnStaleSocket` we send such a request again once: when its connection closed or was reset
 * before any answer. undici's errors do not say whether that connection was fresh or reused (a reset comes as
 * the socket's own ECONNRESET), so a reset on a fresh connection is sent again once too, and its second failure
 * is the error. Callers with a retry policy of their own (TSA, mediation delivery) count every attempt and
 * leave it off.
 */
const STALE_SOCKET_ERRORS = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

/** the error code of a socket or undici error ('' when it has none) */
function codeOf(err: unknown): string {
  return (err as { code?: string }).code ?? '';
}

function isStaleSocket(err: unknown): boolean {
  return STALE_SOCKET_ERRORS.has(codeOf(err));
}

export async function httpRequest(url: string | URL, options: HttpRequestOptions): Promise<HttpResponse> {
  const target = typeof url === 'string' ? new URL(url) : url;
  try {
    return await attempt(target, options);
  } catch (err) {
    if (!(err instanceof StaleSocketError) || !options.repeatOnStaleSocket) throw err;
    return attempt(target, options);
  }
}

class StaleSocketError extends HttpTransportError {}

const UNDICI_TIMEOUTS = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/**
 * One request with one deadline over the answer and its body. Written with a plain timer, 'data' events and
 * no AbortSignal, and the timeout's Error built only when it fires: an AbortController and its signal, an Error
 * built in advance and a `for await` over the body each cost CPU on every call (docs/performance.md). At the
 * deadline the caller gets its timeout at once; a request still waiting for its answer is ended by undici's
 * headersTimeout (the same timeoutMs, counted from when it went out) and an answer arriving after the deadline
 * is discarded (see discard).
 */
function attempt(target: URL, options: HttpRequestOptions): Promise<HttpResponse> {
  const origin = target.origin;
  // the deadline on the monotonic clock too: a process frozen across it (SIGSTOP) may read the answer waiting in
  // its socket before its timer runs, and that answer is as late as one read after the timer
  const deadline = performance.now() + options.timeoutMs;
  return new Promise((resolve, reject) => {
    let settled = false;
    let body: ResponseBody | undefined;
    const finish: Finish = (err, res) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) reject(err);
      else if (performance.now() > deadline) reject(timedOut());
      else resolve(res!);
    };
    const timedOut = () => new HttpTimeoutError(`no answer from ${origin} within ${options.timeoutMs} ms`);
    const timer = setTimeout(() => {
      if (body) discard(body);
      finish(timedOut());
    }, options.timeoutMs);
    (options.agent ?? getDefault())
      .request({
        origin,
        path: `${target.pathname}${target.search}`,
        method: (options.method ?? 'GET') as Dispatcher.HttpMethod,
        headers: options.headers,
        body: options.body,
        headersTimeout: options.timeoutMs,
        bodyTimeout: options.timeoutMs,
      })
      .then(
        (res) => {
          body = res.body;
          if (settled) return discard(res.body); // answered after the deadline
          read(res, { origin, limit: options.maxResponseBytes ?? 1024 * 1024, finish, timedOut });
        },
        (err: Error) => {
          if (UNDICI_TIMEOUTS.has(codeOf(err))) return finish(timedOut());
          finish(new (isStaleSocket(err) ? StaleSocketError : HttpTransportError)(`${origin}: ${err.message}`));
        },
      );
  });
}

type ResponseBody = Dispatcher.ResponseData['body'];
type Finish = (err: Error | undefined, res?: HttpResponse) => void;

/**
 * Drops a body nobody will read. undici reports the drop as an 'error' event on the body (RequestAbortedError),
 * and an 'error' event without a listener ends the process: an answer that comes after our deadline (a peer
 * answering late, or this process frozen by SIGSTOP, a paused container or a live migration across the
 * deadline) must cost the call, never the process.
 */
function discard(body: ResponseBody): void {
  body.on('error', () => undefined);
  body.destroy();
}

/** Collects the body up to `limit` bytes and hands the answer, or what went wrong, to `finish`. */
function read(
  res: Dispatcher.ResponseData,
  how: { origin: string; limit: number; finish: Finish; timedOut: () => HttpTimeoutError },
): void {
  const { origin, limit, finish } = how;
  const chunks: Buffer[] = [];
  let size = 0;
  res.body.on('error', (err: Error) =>
    finish(UNDICI_TIMEOUTS.has(codeOf(err)) ? how.timedOut() : new HttpTransportError(`${origin}: ${err.message}`)),
  );
  res.body.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > limit) {
      res.body.destroy(); // the connection is dropped, not read to the end
      finish(new HttpTransportError(`response from ${origin} exceeds ${limit} bytes`));
      return;
    }
    chunks.push(chunk);
  });
  res.body.on('end', () =>
    finish(undefined, {
      status: res.statusCode,
      headers: res.headers as IncomingHttpHeaders,
      body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size),
    }),
  );
}

let defaultAgent: HttpAgent | undefined;
/** for calls without an agent: Node's public CAs, kept alive for the process */
function getDefault(): HttpAgent {
  defaultAgent ??= tlsAgent();
  return defaultAgent;
}

/** Parses a JSON body, or returns undefined when it is not JSON. */
export function jsonBody(res: HttpResponse): unknown {
  try {
    return JSON.parse(res.body.toString('utf8'));
  } catch {
    return undefined;
  }
}
