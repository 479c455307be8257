/**
 * The one table from domain errors to answers (http/answers.ts DOMAIN_ANSWERS): every kind an inner module can
 * throw has an answer whose status is its error code's, and each is written by answerFailure on a real loopback
 * server as {error, error_description} with the upstream detail only in the log. Anything else, a domain error
 * of a kind the table does not know included, is a 500 with the generic body and no stack.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { DOMAIN_ERROR_KINDS, DomainError, type DomainErrorKind } from '../../../src/domain-error.ts';
import { SignDocError } from '../../../src/errors.ts';
import { answerFailure, DOMAIN_ANSWERS, RETRY_AFTER_SECONDS } from '../../../src/http/answers.ts';
import { httpRequest } from '../../../src/util/http-client.ts';
import { LOG_OPTIONS } from '../../../src/util/logger.ts';

const GENERIC = { error: 'server_error', error_description: 'internal error; the request was not signed' };

const lines: string[] = [];
const logger = pino(
  { ...LOG_OPTIONS, level: 'info' },
  new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  }),
);

let server: Server;
let url: string;
/** what the next request's handler throws */
let failure: unknown;

before(async () => {
  server = createServer((req, res) => answerFailure(failure, req, res, logger));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
after(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function answerTo(
  err: unknown,
): Promise<{ status: number; text: string; cacheControl: unknown; retryAfter: unknown }> {
  failure = err;
  const res = await httpRequest(url, { method: 'POST', timeoutMs: 10_000 });
  const headers = res.headers;
  return {
    status: res.status,
    text: res.body.toString('utf8'),
    cacheControl: headers['cache-control'],
    retryAfter: headers['retry-after'],
  };
}

describe('DOMAIN_ANSWERS', () => {
  it('answers every domain error kind, and no other, with the status of its error code', () => {
    assert.deepEqual(Object.keys(DOMAIN_ANSWERS).sort(), [...DOMAIN_ERROR_KINDS].sort());
    for (const kind of DOMAIN_ERROR_KINDS) {
      const answer = DOMAIN_ANSWERS[kind];
      assert.ok(answer.status >= 400 && answer.status <= 599, kind);
      assert.equal(new SignDocError(answer.error, 'x').status, answer.status, `${kind}: ${answer.error}`);
    }
  });

  it('each kind is answered with its error body, never with the detail', async () => {
    for (const kind of DOMAIN_ERROR_KINDS) {
      const message = `what went wrong (${kind})`;
      const detail = `upstream 192.0.2.1 for ${kind}: ECONNREFUSED`;
      const res = await answerTo(new DomainError(kind, message, detail));
      const answer = DOMAIN_ANSWERS[kind];
      assert.equal(res.status, answer.status, kind);
      assert.equal(res.cacheControl, 'no-store');
      // a 503 says when to come back (RFC 9110 10.2.3); no other status does
      assert.equal(res.retryAfter, answer.status === 503 ? String(RETRY_AFTER_SECONDS) : undefined, kind);
      assert.deepEqual(JSON.parse(res.text), {
        error: answer.error,
        error_description: answer.description ?? message,
      });
      assert.ok(!res.text.includes('192.0.2.1'), `${kind}: the detail stays out of the answer`);
      if (answer.status >= 502 && answer.status <= 504)
        assert.ok(
          lines.some((line) => line.includes('signdoc.upstream_failed') && line.includes(detail)),
          `${kind}: the detail is logged`,
        );
    }
  });

  it('keeps the answers relying parties know for the stores', async () => {
    const cases: [DomainErrorKind, string][] = [
      ['certificate_store_unavailable', 'the certificate store is unavailable; the signatures were not returned'],
      [
        'evidence_store_unavailable',
        'the evidence store is unavailable; the signatures were not returned: retry with the same SAD ' +
          '(signatures kept before the failure are returned, not made or billed again)',
      ],
    ];
    for (const [kind, description] of cases) {
      const res = await answerTo(new DomainError(kind, 'the store failed'));
      assert.equal(res.status, 503);
      assert.deepEqual(JSON.parse(res.text), { error: 'temporarily_unavailable', error_description: description });
    }
  });
});

describe('anything the table does not know', () => {
  it('is a 500 with the generic body: no message, no stack', async () => {
    const unknownKind = new DomainError('no_such_kind' as DomainErrorKind, 'secret inner state');
    for (const err of [new Error('secret inner state'), new TypeError('secret inner state'), unknownKind]) {
      const res = await answerTo(err);
      assert.equal(res.status, 500);
      assert.deepEqual(JSON.parse(res.text), GENERIC);
      assert.ok(!res.text.includes('secret') && !res.text.includes(' at '), res.text);
    }
  });
});
