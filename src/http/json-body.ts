/**
 * A JSON request body read as express.json({strict: true, inflate: false}) reads it, without express: the same
 * checks in the same order, the same failures (named with body-parser's types, which answers.ts maps), the same
 * text. In order: a charset other than UTF-* is refused at once (RFC 8259 section 8.1), so is a compressed body;
 * a body past the limit, or in a charset we cannot decode, is read off and then refused; what is left is
 * decoded (a BOM dropped, invalid sequences replaced) and parsed, and must start with an object or an array.
 */
import type * as http from 'node:http';
// Content-Type parsed by the library body-parser itself uses, so the media type and charset read alike
import { parse as parseContentType } from 'content-type';
import iconv from 'iconv-lite';

export type BodyErrorType =
  | 'charset.unsupported'
  | 'encoding.unsupported'
  | 'entity.too.large'
  | 'request.size.invalid'
  | 'request.aborted'
  | 'entity.parse.failed';

/** A body that cannot be read; `status` as body-parser gives it (answers.ts toSignDocError decides the answer) */
export class BodyError extends Error {
  override name = 'BodyError';
  constructor(
    readonly type: BodyErrorType,
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export type BodyCallback = (failure: BodyError | undefined, body?: unknown) => void;

/**
 * The charset of a request whose body is JSON: `charset` of Content-Type application/json, lower case, UTF-8
 * when none is given. Undefined when the request has no body (neither Content-Length nor Transfer-Encoding) or
 * another media type: what express's req.is('application/json') refuses.
 */
export function jsonBodyCharset(headers: http.IncomingHttpHeaders): string | undefined {
  if (headers['transfer-encoding'] === undefined && Number.isNaN(Number(headers['content-length']))) return undefined;
  const contentType = headers['content-type'];
  if (contentType === 'application/json') return 'utf-8'; // what nearly every relying party sends
  if (!contentType || parseContentType(contentType, { parameters: false }).type !== 'application/json')
    return undefined;
  return parseContentType(contentType).parameters['charset']?.toLowerCase() || 'utf-8';
}

/** Reads the body of `req` and calls `done` once, with the parsed JSON or the failure. */
export function readJsonBody(req: http.IncomingMessage, charset: string, limit: number, done: BodyCallback): void {
  const declared = req.headers['content-length'];
  const length = declared === undefined ? undefined : Number(declared);
  const refused = refusedAtOnce(req.headers, charset);
  if (refused) {
    done(refused);
    return;
  }
  const refusedOnRead = refusedOnceRead(length, limit, charset);
  if (refusedOnRead) readOff(req, refusedOnRead, done);
  else collect(req, length, limit, charset, done);
}

/** A charset other than UTF-*, or a compressed body: nothing is read */
function refusedAtOnce(headers: http.IncomingHttpHeaders, charset: string): BodyError | undefined {
  if (!charset.startsWith('utf-')) return new BodyError('charset.unsupported', 415, 'unsupported charset');
  const encoding = headers['content-encoding'];
  if (encoding && encoding.toLowerCase() !== 'identity')
    return new BodyError('encoding.unsupported', 415, 'content encoding unsupported');
  return undefined;
}

/** A body declared larger than the limit, or in a charset we cannot decode: read off, then refused */
function refusedOnceRead(length: number | undefined, limit: number, charset: string): BodyError | undefined {
  if (length !== undefined && length > limit) return tooLarge();
  if (charset !== 'utf-8' && !iconv.encodingExists(charset))
    return new BodyError('charset.unsupported', 415, 'unsupported charset');
  return undefined;
}

const tooLarge = () => new BodyError('entity.too.large', 413, 'request entity too large');

/** Reads the rest of the body into nothing, then reports `failure` (or the abort of the client). */
function readOff(req: http.IncomingMessage, failure: BodyError, done: BodyCallback): void {
  let settled = false;
  const settle = () => {
    if (settled) return;
    settled = true;
    done(failure);
  };
  req.once('end', settle);
  req.once('error', settle); // the client went away: answers.ts sees the destroyed socket
  req.resume();
}

/** Collects the body, at most `limit` bytes, as many as Content-Length says when given; then parses it. */
function collect(
  req: http.IncomingMessage,
  length: number | undefined,
  limit: number,
  charset: string,
  done: BodyCallback,
): void {
  const chunks: Buffer[] = [];
  let received = 0;
  let failure: BodyError | undefined;
  let settled = false;
  req.on('data', (chunk: Buffer) => {
    received += chunk.length;
    if (received <= limit) chunks.push(chunk);
    else if (!failure) {
      failure = tooLarge(); // read off the rest, then refuse
      chunks.length = 0;
    }
  });
  req.once('error', () => {
    if (settled) return; // after the end, while the request is answered: not the reader's concern
    settled = true;
    done(failure ?? new BodyError('request.aborted', 400, 'request aborted'));
  });
  req.once('end', () => {
    settled = true;
    if (failure) done(failure);
    else if (length !== undefined && received !== length)
      done(new BodyError('request.size.invalid', 400, 'request size did not match content length'));
    else parseJson(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks), charset, done);
  });
}

const utf8 = new TextDecoder('utf-8'); // like iconv-lite's UTF-8: drops a BOM, replaces invalid sequences
/** strict mode: a JSON text must start with an object or an array (after JSON whitespace, RFC 8259 section 2) */
const FIRST_CHAR = /^[\x20\x09\x0a\x0d]*([^\x20\x09\x0a\x0d])/;

function parseJson(bytes: Buffer, charset: string, done: BodyCallback): void {
  let body: unknown;
  try {
    body = parseStrict(charset === 'utf-8' ? utf8.decode(bytes) : iconv.decode(bytes, charset));
  } catch {
    done(new BodyError('entity.parse.failed', 400, 'the request body is not valid JSON'));
    return;
  }
  done(undefined, body);
}

/** JSON.parse in body-parser's strict mode; an empty text (an empty body, a lone BOM) is {} */
function parseStrict(text: string): unknown {
  if (text === '') return {};
  const first = text[0] === '{' || text[0] === '[' ? text[0] : FIRST_CHAR.exec(text)?.[1];
  if (first !== '{' && first !== '[') throw new SyntaxError('a JSON text that is not an object or an array');
  return JSON.parse(text);
}
