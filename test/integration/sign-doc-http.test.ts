/**
 * signDoc over HTTP (src/http/app.ts, sign-doc-handler.ts, json-body.ts), request by request on the wire: other
 * methods, other spellings of the path, content types and charsets, compressed and oversized bodies, keep-alive
 * after a refusal, clients without a certificate, and the signDoc metrics of each answer. Malformed bodies and
 * client aborts are in hostile-callers.test.ts, the checks of the request itself in sign-doc.test.ts.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as tls from 'node:tls';
import { gzipSync } from 'node:zlib';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { authorize, labelled, signDocBody } from '../helpers/signing.ts';

let env: TestEnvironment;
let rpTls: tls.ConnectionOptions;
let path: string;
let limit: number;

before(async () => {
  env = await startEnvironment();
  rpTls = {
    ca: readFileSync(env.endpoints.tlsCaFile),
    cert: readFileSync(env.endpoints.rp.certFile),
    key: readFileSync(env.endpoints.rp.keyFile),
  };
  path = env.config.server.signDocPath;
  limit = env.config.server.maxBodyBytes;
});
after(async () => {
  await env?.close();
});

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

interface Request {
  readonly method: string;
  readonly bytes: Buffer;
}

/** A request as sent on the wire; `framing`: a Content-Length, chunked (in two chunks), or none added */
function request(
  method: string,
  target: string,
  headers: Record<string, string>,
  body = Buffer.alloc(0),
  framing: 'length' | 'chunked' | 'none' = 'length',
): Request {
  const all: Record<string, string> = { host: 'qtsp', ...headers };
  if (framing === 'length') all['content-length'] = String(body.length);
  if (framing === 'chunked') all['transfer-encoding'] = 'chunked';
  const head = `${method} ${target} HTTP/1.1\r\n${Object.entries(all)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
  const chunks = [body.subarray(0, 1), body.subarray(1)].filter((c) => c.length > 0);
  const sent =
    framing === 'chunked'
      ? Buffer.concat([
          ...chunks.flatMap((c) => [Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n')]),
          Buffer.from('0\r\n\r\n'),
        ])
      : body;
  return { method, bytes: Buffer.concat([Buffer.from(head), sent]) };
}

/** Sends the requests on one connection; resolves with the answers once the server has closed it. */
function exchange(requests: Request[], options: tls.ConnectionOptions = rpTls): Promise<Answer[]> {
  const url = new URL(env.qtsp.url);
  return new Promise((resolve) => {
    const received: Buffer[] = [];
    const socket = tls.connect({ host: url.hostname, port: Number(url.port), ...options }, () => {
      for (const r of requests) socket.write(r.bytes);
    });
    socket.on('data', (d: Buffer) => received.push(d));
    socket.setTimeout(10_000, () => socket.destroy());
    socket.on('close', () => resolve(parseAnswers(Buffer.concat(received), requests)));
    socket.on('error', () => undefined);
  });
}

function parseAnswers(raw: Buffer, requests: Request[]): Answer[] {
  const answers: Answer[] = [];
  let rest = raw;
  for (const r of requests) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) break;
    const [statusLine, ...lines] = rest.subarray(0, end).toString('latin1').split('\r\n');
    const headers = Object.fromEntries(
      lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
    );
    const length = r.method === 'HEAD' ? 0 : Number(headers['content-length'] ?? 0);
    answers.push({
      status: Number(statusLine!.split(' ')[1]),
      headers,
      body: rest.subarray(end + 4, end + 4 + length).toString('utf8'),
    });
    rest = rest.subarray(end + 4 + length);
  }
  return answers;
}

async function one(r: Request, options?: tls.ConnectionOptions): Promise<Answer> {
  const [answer] = await exchange([r], options);
  assert.ok(answer, 'an answer');
  return answer;
}

/** What the signDoc metrics counted while `run` ran: status -> requests (and as many durations) */
async function counted(run: () => Promise<void>): Promise<Record<string, number>> {
  // copies: prom-client hands out its live values
  const read = async (metric: 'requests' | 'duration') =>
    new Map(
      (await env.qtsp.deps.metrics[metric].get()).values
        .filter((v) => metric === 'requests' || (v as { metricName?: string }).metricName?.endsWith('_count'))
        .map((v) => [String(v.labels['status']), v.value]),
    );
  const [requests, durations] = [await read('requests'), await read('duration')];
  await run();
  const delta: Record<string, number> = {};
  for (const [status, value] of await read('requests')) {
    if (value !== (requests.get(status) ?? 0)) delta[status] = value - (requests.get(status) ?? 0);
  }
  for (const [status, value] of await read('duration')) {
    assert.equal(value - (durations.get(status) ?? 0), delta[status] ?? 0, 'one duration per counted request');
  }
  return delta;
}

const JSON_TYPE = 'application/json; charset=utf-8';
const close = { connection: 'close' };
const json = { ...close, 'content-type': 'application/json' };
const EMPTY_OBJECT = Buffer.from('{}');
/** what signDoc answers to {}: proof that the body was read, decoded and parsed */
const NO_SAD = { error: 'invalid_request', error_description: "missing required parameter 'SAD' in the request" };
const error = (description: string) => ({ error: 'invalid_request', error_description: description });

describe('methods and paths', () => {
  it('another method than POST: 405 with Allow: POST, counted; HEAD without a body', async () => {
    const delta = await counted(async () => {
      for (const method of ['GET', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'HEAD']) {
        const answer = await one(request(method, path, json, EMPTY_OBJECT));
        assert.equal(answer.status, 405, method);
        assert.equal(answer.headers['allow'], 'POST', method);
        assert.equal(answer.headers['content-type'], JSON_TYPE, method);
        assert.equal(answer.headers['cache-control'], undefined, method);
        const expected = JSON.stringify(error('signDoc accepts POST only'));
        assert.equal(answer.headers['content-length'], String(expected.length), method);
        assert.equal(answer.body, method === 'HEAD' ? '' : expected, method);
      }
    });
    assert.deepEqual(delta, { 405: 6 });
  });

  it('other spellings of the path reach signDoc; paths under it are 404 and counted; others are not counted', async () => {
    const spellings = [path.toLowerCase(), path.toUpperCase(), `${path}/`, `${path}?x=1`, `${path}/?x=1`];
    const delta = await counted(async () => {
      for (const target of [...spellings, `https://qtsp${path}`]) {
        const answer = await one(request('POST', target, json, EMPTY_OBJECT));
        assert.equal(answer.status, 400, target);
        assert.deepEqual(JSON.parse(answer.body), NO_SAD, target);
        assert.equal((await one(request('GET', target, close, undefined, 'none'))).status, 405, target);
      }
      for (const target of [`${path}/x`, `${path}//`]) {
        const answer = await one(request('POST', target, json, EMPTY_OBJECT));
        assert.equal(answer.status, 404, target);
        assert.deepEqual(JSON.parse(answer.body), { error: 'not_found', error_description: 'no such endpoint' });
      }
    });
    assert.deepEqual(delta, { 400: 6, 405: 6, 404: 2 });
    const elsewhere = await counted(async () => {
      for (const target of [`${path}X`, `/x/..${path}`, `/${path}`, '/nowhere']) {
        assert.equal((await one(request('POST', target, json, EMPTY_OBJECT))).status, 404, target);
      }
    });
    assert.deepEqual(elsewhere, {});
  });
});

describe('content types and charsets', () => {
  it('a body not declared as application/json, or no body at all: 400, counted', async () => {
    const cases: [Record<string, string>, 'length' | 'none'][] = [
      [close, 'length'],
      [{ ...close, 'content-type': 'text/plain' }, 'length'],
      [{ ...close, 'content-type': 'application/problem+json' }, 'length'],
      [{ ...close, 'content-type': '' }, 'length'],
      [json, 'none'],
    ];
    const delta = await counted(async () => {
      for (const [headers, framing] of cases) {
        const answer = await one(request('POST', path, headers, EMPTY_OBJECT, framing));
        assert.equal(answer.status, 400, JSON.stringify(headers));
        assert.equal(answer.headers['cache-control'], 'no-store');
        assert.deepEqual(JSON.parse(answer.body), error('Content-Type must be application/json'));
      }
    });
    assert.deepEqual(delta, { 400: cases.length });
  });

  it('application/json however it is written, UTF-8 however it is named', async () => {
    for (const type of [
      'Application/JSON',
      'application/json;charset=utf-8',
      ' application/json ; charset = "UTF-8" ',
      'application/json; foo=bar; charset=utf-8; charset=latin1',
      'application/json; charset=',
      'application/json; charset',
    ]) {
      const answer = await one(request('POST', path, { ...close, 'content-type': type }, EMPTY_OBJECT));
      assert.deepEqual([answer.status, JSON.parse(answer.body)], [400, NO_SAD], type);
    }
  });

  it('other UTF charsets are decoded; any other charset is 400 "must be UTF-8 JSON"', async () => {
    const utf16be = Buffer.from('{}', 'utf16le').swap16();
    const utf32 = Buffer.from([0x7b, 0, 0, 0, 0x7d, 0, 0, 0]);
    for (const [charset, body] of [
      ['utf-16le', Buffer.from('{}', 'utf16le')],
      ['utf-16', Buffer.concat([Buffer.from([0xfe, 0xff]), utf16be])],
      ['utf-16be', utf16be],
      ['utf-32', utf32],
    ] as const) {
      const answer = await one(
        request('POST', path, { ...close, 'content-type': `application/json; charset=${charset}` }, body),
      );
      assert.deepEqual([answer.status, JSON.parse(answer.body)], [400, NO_SAD], charset);
    }
    for (const charset of ['latin1', 'us-ascii', 'utf8', 'utf-9']) {
      const answer = await one(
        request('POST', path, { ...close, 'content-type': `application/json; charset=${charset}` }, EMPTY_OBJECT),
      );
      assert.equal(answer.status, 400, charset);
      assert.deepEqual(JSON.parse(answer.body), error('the request body must be UTF-8 JSON'), charset);
    }
  });

  it('a UTF-16 request signs', async () => {
    const hash = createHash('sha256').update(randomUUID()).digest('base64');
    const auth = await authorize(env.endpoints, labelled([hash]));
    const body = JSON.stringify(signDocBody(auth.accessToken, [hash]));
    const headers = { ...close, 'content-type': 'application/json; charset=utf-16le' };
    const answer = await one(request('POST', path, headers, Buffer.from(body, 'utf16le')));
    assert.equal(answer.status, 200, answer.body);
    assert.equal(answer.headers['cache-control'], 'no-store');
    assert.match(answer.headers['x-transaction-id'] ?? '', /./);
    assert.equal(JSON.parse(answer.body).SignatureObject.length, 1);
  });
});

describe('compressed and oversized bodies', () => {
  it('Content-Encoding other than identity: 415 with Accept-Encoding: identity, chunked too; identity is read', async () => {
    const delta = await counted(async () => {
      for (const encoding of ['gzip', 'GZIP', 'x-custom', 'identity, gzip']) {
        for (const framing of ['length', 'chunked'] as const) {
          const headers = { ...json, 'content-encoding': encoding };
          const answer = await one(request('POST', path, headers, gzipSync(EMPTY_OBJECT), framing));
          assert.equal(answer.status, 415, `${encoding} ${framing}`);
          assert.equal(answer.headers['accept-encoding'], 'identity');
          assert.equal(answer.headers['cache-control'], 'no-store');
          assert.deepEqual(
            JSON.parse(answer.body),
            error('the request body must not be compressed (Content-Encoding: identity only)'),
          );
        }
      }
      for (const encoding of ['identity', 'IDENTITY', '']) {
        const answer = await one(request('POST', path, { ...json, 'content-encoding': encoding }, EMPTY_OBJECT));
        assert.deepEqual([answer.status, JSON.parse(answer.body)], [400, NO_SAD], encoding);
      }
    });
    assert.deepEqual(delta, { 415: 8, 400: 3 });
  });

  it('a body over server.maxBodyBytes: 400 once it is read off, with a length or chunked; the connection stays', async () => {
    const atLimit = Buffer.from(`{"SAD":"${'a'.repeat(limit - 10)}"}`);
    assert.equal(atLimit.length, limit);
    for (const framing of ['length', 'chunked'] as const) {
      const answer = await one(request('POST', path, json, atLimit, framing));
      assert.equal(answer.status, 400, framing);
      assert.match(JSON.parse(answer.body).error_description, /missing required parameter 'credentialID'/, framing);
      const over = Buffer.concat([atLimit, Buffer.from(' ')]);
      const keepAlive = { 'content-type': 'application/json' };
      const [refused, next] = await exchange([
        request('POST', path, keepAlive, over, framing),
        request('GET', path, close, undefined, 'none'),
      ]);
      assert.equal(refused?.status, 400, framing);
      assert.equal(refused?.headers['cache-control'], 'no-store');
      assert.equal(refused?.headers['connection'], 'keep-alive');
      assert.deepEqual(JSON.parse(refused?.body ?? ''), error('the request body is too large'), framing);
      assert.equal(next?.status, 405, 'the next request on the same connection is answered');
    }
  });
});

describe('clients without a certificate', () => {
  it('401 before the body is read, whatever the request; counted on the signDoc path; the connection closed', async () => {
    const noCert = { ca: rpTls.ca! };
    const requests = [
      request('POST', path, json, EMPTY_OBJECT),
      request('POST', path, { ...json, 'content-encoding': 'gzip' }, EMPTY_OBJECT),
      // declared past the limit, partly sent: refused all the same
      request('POST', path, { ...json, 'content-length': String(limit + 1) }, Buffer.alloc(1000, 0x20), 'none'),
      request('POST', path, { ...close, 'content-type': 'text/plain' }, EMPTY_OBJECT, 'chunked'),
      request('GET', `${path}/`, close, undefined, 'none'),
    ];
    const delta = await counted(async () => {
      for (const r of requests) {
        const answers = await exchange([r, request('GET', path, close, undefined, 'none')], noCert);
        assert.equal(answers.length, 1, 'the connection is closed after the 401');
        const [answer] = answers;
        assert.equal(answer?.status, 401);
        assert.equal(answer?.headers['www-authenticate'], 'mutual-tls');
        assert.equal(answer?.headers['cache-control'], 'no-store');
        assert.equal(answer?.headers['connection'], 'close');
        assert.match(JSON.parse(answer?.body ?? '').error_description, /^no TLS client certificate was presented/);
      }
    });
    assert.deepEqual(delta, { 401: requests.length });
    const elsewhere = await counted(async () => {
      assert.equal((await one(request('GET', '/ca/root.crt', close, undefined, 'none'), noCert)).status, 401);
    });
    assert.deepEqual(elsewhere, {});
  });
});
