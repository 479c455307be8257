/**
 * A small promise wrapper over node:https/http for calls that need a client certificate, a private CA and
 * a hard timeout (global fetch cannot take TLS options without undici internals). Bodies are capped so a
 * hostile peer cannot exhaust memory.
 */
import * as http from 'node:http';
import * as https from 'node:https';

export interface HttpResponse {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

export interface HttpRequestOptions {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  /** keep-alive agent carrying ca / cert / key */
  readonly agent?: https.Agent | http.Agent;
  readonly timeoutMs: number;
  readonly maxResponseBytes?: number;
  /**
   * send the request again once when the kept-alive socket it went out on was reset before any answer (see
   * STALE_SOCKET_ERRORS); for calls that are safe to repeat and have no retry policy of their own
   */
  readonly repeatOnStaleSocket?: boolean;
}

export class HttpTimeoutError extends Error {
  override name = 'HttpTimeoutError';
}

export class HttpTransportError extends Error {
  override name = 'HttpTransportError';
}

/**
 * A kept-alive socket the server closed while idle (its keep-alive timeout, often 5 s) can be handed to a new
 * request in the instant before the close arrives; the request then fails with ECONNRESET or EPIPE without
 * having reached the server. Node's documentation (http `request.reusedSocket`) recommends sending it again:
 * with `repeatOnStaleSocket` we do so once, only for those errors and only on a reused socket. Callers with a
 * retry policy of their own (TSA, mediation delivery) count every attempt and leave it off.
 */
const STALE_SOCKET_ERRORS = new Set(['ECONNRESET', 'EPIPE']);

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

function attempt(target: URL, options: HttpRequestOptions): Promise<HttpResponse> {
  const lib = target.protocol === 'https:' ? https : http;
  const limit = options.maxResponseBytes ?? 1024 * 1024;
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = lib.request(
      target,
      {
        method: options.method ?? 'GET',
        headers: options.headers,
        ...(options.agent ? { agent: options.agent } : {}),
      },
      (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > limit) {
            req.destroy(new HttpTransportError(`response from ${target.origin} exceeds ${limit} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
        });
        res.on('error', (err) => {
          clearTimeout(timer);
          reject(new HttpTransportError(err.message));
        });
      },
    );
    const timer = setTimeout(() => {
      req.destroy(new HttpTimeoutError(`no answer from ${target.origin} within ${options.timeoutMs} ms`));
    }, options.timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      if (err instanceof HttpTimeoutError || err instanceof HttpTransportError) return reject(err);
      const stale = req.reusedSocket && !answered && STALE_SOCKET_ERRORS.has((err as NodeJS.ErrnoException).code ?? '');
      reject(new (stale ? StaleSocketError : HttpTransportError)(`${target.origin}: ${err.message}`));
    });
    req.end(options.body);
  });
}

/** Parses a JSON body, or returns undefined when it is not JSON. */
export function jsonBody(res: HttpResponse): unknown {
  try {
    return JSON.parse(res.body.toString('utf8'));
  } catch {
    return undefined;
  }
}
