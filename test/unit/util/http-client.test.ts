/**
 * httpRequest over a kept-alive socket the server drops (its idle keep-alive timeout racing our next request):
 * sent again once on a fresh connection when the caller allows it; a connection reset again is the error. And
 * its limits: an answer larger than maxResponseBytes and an answer slower than timeoutMs are errors.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { httpRequest, HttpTimeoutError, HttpTransportError, tlsAgent } from '../../../src/util/http-client.ts';

/**
 * A tiny HTTP/1.1 server on raw sockets: on each connection it answers the first `answerPerConnection`
 * requests (keep-alive) and resets the connection on the next one, without answering it.
 */
function droppingServer(answerPerConnection: number): {
  server: Server;
  connections: () => number;
  requests: () => number;
} {
  let connections = 0;
  let requests = 0;
  const server = createServer((socket: Socket) => {
    connections++;
    let answered = 0;
    socket.on('data', (chunk) => {
      for (const _ of chunk.toString('latin1').matchAll(/\r\n\r\n/g)) {
        requests++;
        if (answered++ < answerPerConnection)
          socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok');
        else socket.resetAndDestroy();
      }
    });
    socket.on('error', () => undefined);
  });
  return { server, connections: () => connections, requests: () => requests };
}

async function listening(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

describe('httpRequest and a kept-alive socket the server dropped', () => {
  const agent = tlsAgent({ connections: 1 }); // one kept-alive connection per origin
  const dropsSecond = droppingServer(1);
  const dropsFirst = droppingServer(0);
  let urlDropsSecond: string;
  let urlDropsFirst: string;
  before(async () => {
    urlDropsSecond = await listening(dropsSecond.server);
    urlDropsFirst = await listening(dropsFirst.server);
  });
  after(() => {
    void agent.destroy();
    dropsSecond.server.close();
    dropsFirst.server.close();
  });

  it('the request reset on the reused socket is sent again once, on a new connection', async () => {
    assert.equal(
      (await httpRequest(urlDropsSecond, { agent, timeoutMs: 5000, repeatOnStaleSocket: true })).body.toString(),
      'ok',
    );
    const second = await httpRequest(urlDropsSecond, { agent, timeoutMs: 5000, repeatOnStaleSocket: true });
    assert.equal(second.status, 200);
    assert.deepEqual(
      { connections: dropsSecond.connections(), requests: dropsSecond.requests() },
      { connections: 2, requests: 3 },
    );
  });

  it('a reset on a fresh connection is sent again once (undici cannot tell it from a reused one), and the second reset is the error', async () => {
    await assert.rejects(
      httpRequest(urlDropsFirst, { agent, timeoutMs: 5000, repeatOnStaleSocket: true }),
      HttpTransportError,
    );
    assert.deepEqual(
      { connections: dropsFirst.connections(), requests: dropsFirst.requests() },
      { connections: 2, requests: 2 },
    );
  });

  it('without repeatOnStaleSocket a reset is the error at once', async () => {
    await assert.rejects(httpRequest(urlDropsFirst, { agent, timeoutMs: 5000 }), HttpTransportError);
    assert.deepEqual(
      { connections: dropsFirst.connections(), requests: dropsFirst.requests() },
      { connections: 3, requests: 3 },
    );
  });
});

describe('httpRequest limits', () => {
  const agent = tlsAgent();
  let url: string;
  const server = createServer((socket: Socket) => {
    socket.on('data', (chunk) => {
      const path = /^GET (\S+)/.exec(chunk.toString('latin1'))?.[1];
      if (path === '/large') socket.write(`HTTP/1.1 200 OK\r\ncontent-length: 2000\r\n\r\n${'x'.repeat(2000)}`);
      else if (path === '/slow-body') socket.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nxxxxx'); // the rest never comes
      // anything else: never answered
    });
    socket.on('error', () => undefined);
  });
  before(async () => (url = await listening(server)));
  after(() => {
    void agent.destroy();
    server.close();
  });

  it('an answer larger than maxResponseBytes is an error naming the limit', async () => {
    await assert.rejects(
      httpRequest(`${url}large`, { agent, timeoutMs: 5000, maxResponseBytes: 1000 }),
      (err: Error) => err instanceof HttpTransportError && /exceeds 1000 bytes/.test(err.message),
    );
    assert.equal(
      (await httpRequest(`${url}large`, { agent, timeoutMs: 5000, maxResponseBytes: 2000 })).body.length,
      2000,
    );
  });

  it('no answer, or a body that stops half-way, within timeoutMs is a timeout', async () => {
    for (const path of ['silent', 'slow-body']) {
      const started = Date.now();
      await assert.rejects(
        httpRequest(`${url}${path}`, { agent, timeoutMs: 200 }),
        (err: Error) => err instanceof HttpTimeoutError && /within 200 ms/.test(err.message),
      );
      assert.ok(Date.now() - started < 2000, `${path}: the deadline held`);
    }
  });
});

/** Blocks this thread for `ms`, as a process stopped by SIGSTOP (a paused container, a live migration) is. */
function freeze(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

describe('httpRequest and an answer that arrives after its deadline', () => {
  const agent = tlsAgent();
  let url: string;
  let frozen = 0;
  // answers at once, then freezes the whole process past the caller's deadline: on resume the caller's timer
  // fires before the answer waiting in its socket is read (undici's own coarse timers have not yet fired)
  const server = createServer((socket: Socket) => {
    socket.on('data', (chunk) => {
      const path = /^GET (\S+)/.exec(chunk.toString('latin1'))?.[1];
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      if (path === '/freeze') {
        frozen++;
        freeze(2500);
      }
    });
    socket.on('error', () => undefined);
  });
  before(async () => (url = await listening(server)));
  after(() => {
    void agent.destroy();
    server.close();
  });

  it('is a timeout, the late answer is dropped without ending the process, and the next call is answered', async () => {
    await assert.rejects(
      httpRequest(`${url}freeze`, { agent, timeoutMs: 1500 }),
      (err: Error) => err instanceof HttpTimeoutError,
    );
    assert.equal(frozen, 1);
    // the late answer's body is destroyed on a later turn of the event loop: give it several
    await new Promise((resolve) => setTimeout(resolve, 500));
    const next = await httpRequest(`${url}again`, { agent, timeoutMs: 5000 });
    assert.deepEqual([next.status, next.body.toString()], [200, 'ok']);
  });
});
