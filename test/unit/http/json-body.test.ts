/**
 * json-body.ts reads a request body as express.json({strict: true, inflate: false}) does: which requests carry
 * JSON and in which charset, what is refused at once and what only once read off, and what the text parses to.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type * as http from 'node:http';
import { PassThrough } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { type BodyError, jsonBodyCharset, readJsonBody } from '../../../src/http/json-body.ts';

test('jsonBodyCharset: application/json with a body, its charset as express reads it', () => {
  const cases: [Record<string, string>, string | undefined][] = [
    [{ 'content-type': 'application/json', 'content-length': '2' }, 'utf-8'],
    [{ 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, 'utf-8'],
    [{ 'content-type': 'application/json', 'content-length': '0' }, 'utf-8'],
    [{ 'content-type': 'application/json' }, undefined], // no body at all
    [{ 'content-length': '2' }, undefined],
    [{ 'content-type': '', 'content-length': '2' }, undefined],
    [{ 'content-type': 'text/plain', 'content-length': '2' }, undefined],
    [{ 'content-type': 'application/problem+json', 'content-length': '2' }, undefined],
    [{ 'content-type': 'Application/JSON', 'content-length': '2' }, 'utf-8'],
    [{ 'content-type': ' application/json ; charset = "UTF-16LE" ', 'content-length': '2' }, 'utf-16le'],
    [{ 'content-type': 'application/json; charset=latin1', 'content-length': '2' }, 'latin1'],
    [{ 'content-type': 'application/json; charset=', 'content-length': '2' }, 'utf-8'],
    [{ 'content-type': 'application/json; charset', 'content-length': '2' }, 'utf-8'],
    [{ 'content-type': 'application/json; a=b; charset=utf-32; charset=latin1', 'content-length': '2' }, 'utf-32'],
    [{ 'content-type': 'application/json; a="x;charset=latin1"; charset=utf-8', 'content-length': '2' }, 'utf-8'],
    [{ 'content-type': 'application/json; charset="a\\"b"', 'content-length': '2' }, 'a"b'],
    [{ 'content-type': 'application/json; charset="utf-16', 'content-length': '2' }, 'utf-8'], // unterminated
  ];
  for (const [headers, charset] of cases) assert.equal(jsonBodyCharset(headers), charset, JSON.stringify(headers));
});

/** A request whose body is `parts`, sent one after the other; `abort`: the client goes away after them */
function fakeRequest(headers: Record<string, string>, parts: Buffer[], abort = false): http.IncomingMessage {
  const req = Object.assign(new PassThrough(), { headers }) as unknown as http.IncomingMessage;
  setImmediate(() => {
    const stream = req as unknown as PassThrough;
    for (const part of parts) stream.write(part);
    if (abort) stream.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
    else stream.end();
  });
  return req;
}

function read(
  headers: Record<string, string>,
  parts: Buffer[],
  limit = 100,
  abort = false,
): Promise<{ failure?: string; body?: unknown; consumed: boolean }> {
  const req = fakeRequest(headers, parts, abort);
  const charset = jsonBodyCharset(headers);
  assert.ok(charset !== undefined);
  return new Promise((resolve) => {
    readJsonBody(req, charset, limit, (failure: BodyError | undefined, body?: unknown) => {
      const result = { consumed: req.readableEnded, ...(failure ? { failure: failure.type } : { body }) };
      setImmediate(() => resolve(result));
    });
  });
}

const json = (body: string | Buffer, type = 'application/json') => ({
  headers: { 'content-type': type, 'content-length': String(Buffer.byteLength(body)) },
  parts: [Buffer.from(body)],
});

test('readJsonBody: JSON texts as body-parser strict mode parses them', async () => {
  const bom = Buffer.from([0xef, 0xbb, 0xbf]);
  const cases: [string | Buffer, unknown][] = [
    ['{"a":1}', { a: 1 }],
    [' \t\r\n[1]', [1]],
    ['', {}],
    [bom, {}],
    [Buffer.concat([bom, Buffer.from('{"a":"é"}')]), { a: 'é' }],
    [Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff]), Buffer.from('"}')]), { a: '\ufffd' }],
  ];
  for (const [body, expected] of cases) {
    const { headers, parts } = json(body);
    assert.deepEqual((await read(headers, parts)).body, expected, String(body));
  }
  for (const body of ['"x"', '  42', 'null', ' \n ', '{"a":', 'x']) {
    const { headers, parts } = json(body);
    assert.equal((await read(headers, parts)).failure, 'entity.parse.failed', body);
  }
});

test('readJsonBody: other UTF charsets are decoded; others refused, unknown UTF ones once read off', async () => {
  const utf16be = Buffer.from('{"a":1}', 'utf16le').swap16();
  for (const [charset, body] of [
    ['utf-16le', Buffer.from('{"a":1}', 'utf16le')],
    ['utf-16be', utf16be],
    ['utf-16', Buffer.concat([Buffer.from([0xfe, 0xff]), utf16be])],
  ] as const) {
    const { headers, parts } = json(body, `application/json; charset=${charset}`);
    assert.deepEqual((await read(headers, parts)).body, { a: 1 }, charset);
  }
  const latin1 = json('{}', 'application/json; charset=latin1');
  assert.deepEqual(await read(latin1.headers, latin1.parts), { failure: 'charset.unsupported', consumed: false });
  const utf9 = json('{}', 'application/json; charset=utf-9');
  assert.deepEqual(await read(utf9.headers, utf9.parts), { failure: 'charset.unsupported', consumed: true });
});

test('readJsonBody: a compressed body is refused before it is read; identity is read', async () => {
  for (const encoding of ['gzip', 'BR', 'identity, gzip']) {
    const body = gzipSync('{}');
    const headers = {
      'content-type': 'application/json',
      'content-encoding': encoding,
      'transfer-encoding': 'chunked',
    };
    assert.deepEqual(await read(headers, [body]), { failure: 'encoding.unsupported', consumed: false }, encoding);
  }
  for (const encoding of ['identity', 'IDENTITY', '']) {
    const { headers, parts } = json('{}');
    assert.deepEqual((await read({ ...headers, 'content-encoding': encoding }, parts)).body, {}, encoding);
  }
});

test('readJsonBody: past the limit, declared or sent chunked, the body is read off and then refused', async () => {
  const atLimit = json(`${' '.repeat(98)}{}`);
  assert.equal(atLimit.parts[0]!.length, 100);
  assert.deepEqual(await read(atLimit.headers, atLimit.parts), { body: {}, consumed: true });
  const declared = json(' '.repeat(101));
  assert.deepEqual(await read(declared.headers, declared.parts), { failure: 'entity.too.large', consumed: true });
  const chunked = { 'content-type': 'application/json', 'transfer-encoding': 'chunked' };
  const parts = [Buffer.from('[1,'), Buffer.alloc(100, 0x20), Buffer.from('2]')];
  assert.deepEqual(await read(chunked, parts), { failure: 'entity.too.large', consumed: true });
});

test('readJsonBody: a client that goes away, and a body shorter than its Content-Length', async () => {
  const headers = { 'content-type': 'application/json', 'content-length': '50' };
  assert.equal((await read(headers, [Buffer.from('{"a":')], 100, true)).failure, 'request.aborted');
  const over = { 'content-type': 'application/json', 'transfer-encoding': 'chunked' };
  const gone = await read(over, [Buffer.alloc(101, 0x20)], 100, true);
  assert.equal(gone.failure, 'entity.too.large', 'the refusal under way is reported; the answer sees the abort');
  assert.equal((await read(headers, [Buffer.from('{}')])).failure, 'request.size.invalid');
});
