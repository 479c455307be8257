/**
 * Outgoing HTTP(S) for calls that need a client certificate, a private CA and a hard timeout, on undici (the
 * engine of Node's own fetch; global fetch cannot take TLS options without undici's Agent anyway). Bodies are
 * capped so a hostile peer cannot exhaust memory.
 *
 * Why undici and not node:https (issue 12): signDoc makes one introspection call per request, and node:https's
 * client (ClientRequest, the agent's socket pool, IncomingMessage's stream) cost 146-160 us of CPU per kept-alive
 * mTLS POST with a 1.5 KB answer on this machine; undici's Agent costs 64-68 us for the same call.
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

function isStaleSocket(err: unknown): boolean {
  return STALE_SOCKET_ERRORS.has((err as { code?: string }).code ?? '');
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

/** the answer's bytes, or an error once they pass `limit` (the connection is dropped, not read to the end) */
async function readCapped(body: Dispatcher.ResponseData['body'], limit: number, origin: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      body.destroy();
      throw new HttpTransportError(`response from ${origin} exceeds ${limit} bytes`);
    }
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
}

async function attempt(target: URL, options: HttpRequestOptions): Promise<HttpResponse> {
  const limit = options.maxResponseBytes ?? 1024 * 1024;
  const abort = new AbortController();
  const timeout = new HttpTimeoutError(`no answer from ${target.origin} within ${options.timeoutMs} ms`);
  const timer = setTimeout(() => abort.abort(timeout), options.timeoutMs); // one deadline for the answer and its body
  let answered = false;
  try {
    const res = await (options.agent ?? getDefault()).request({
      origin: target.origin,
      path: `${target.pathname}${target.search}`,
      method: (options.method ?? 'GET') as Dispatcher.HttpMethod,
      headers: options.headers,
      body: options.body,
      signal: abort.signal,
      // the deadline above governs; undici's own (300 s each) must not fire first
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    answered = true;
    const body = await readCapped(res.body, limit, target.origin);
    return { status: res.statusCode, headers: res.headers as IncomingHttpHeaders, body };
  } catch (err) {
    if (abort.signal.aborted) throw timeout;
    if (err instanceof HttpTransportError) throw err;
    const stale = !answered && isStaleSocket(err);
    throw new (stale ? StaleSocketError : HttpTransportError)(`${target.origin}: ${(err as Error).message}`);
  } finally {
    clearTimeout(timer);
  }
}

let defaultAgent: HttpAgent | undefined;
/** for calls without an agent: Node's public CAs, kept alive for the process */
function getDefault(): HttpAgent {
  return (defaultAgent ??= tlsAgent());
}

/** Parses a JSON body, or returns undefined when it is not JSON. */
export function jsonBody(res: HttpResponse): unknown {
  try {
    return JSON.parse(res.body.toString('utf8'));
  } catch {
    return undefined;
  }
}
