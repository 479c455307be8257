/**
 * httpRequest over a kept-alive socket the server drops (its idle keep-alive timeout racing our next request):
 * sent again once on a fresh connection; a reset on a fresh connection is an error, not repeated.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { httpRequest, HttpTransportError } from '../../src/util/http-client.ts';

/**
 * A tiny HTTP/1.1 server on raw sockets: on each connection it answers the first `answerPerConnection`
 * requests (keep-alive) and resets the connection on the next one, without answering it.
 */
function droppingServer(answerPerConnection: number): { server: Server; connections: () => number; requests: () => number } {
  let connections = 0;
  let requests = 0;
  const server = createServer((socket: Socket) => {
    connections++;
    let answered = 0;
    socket.on('data', (chunk) => {
      for (const _ of chunk.toString('latin1').matchAll(/\r\n\r\n/g)) {
        requests++;
        if (answered++ < answerPerConnection) socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok');
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
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const dropsSecond = droppingServer(1);
  const dropsFirst = droppingServer(0);
  let urlDropsSecond: string;
  let urlDropsFirst: string;
  before(async () => {
    urlDropsSecond = await listening(dropsSecond.server);
    urlDropsFirst = await listening(dropsFirst.server);
  });
  after(() => {
    agent.destroy();
    dropsSecond.server.close();
    dropsFirst.server.close();
  });

  it('the request reset on the reused socket is sent again once, on a new connection', async () => {
    assert.equal((await httpRequest(urlDropsSecond, { agent, timeoutMs: 5000, repeatOnStaleSocket: true })).body.toString(), 'ok');
    const second = await httpRequest(urlDropsSecond, { agent, timeoutMs: 5000, repeatOnStaleSocket: true });
    assert.equal(second.status, 200);
    assert.deepEqual({ connections: dropsSecond.connections(), requests: dropsSecond.requests() }, { connections: 2, requests: 3 });
  });

  it('a reset on a fresh connection is an error, not repeated', async () => {
    await assert.rejects(httpRequest(urlDropsFirst, { agent, timeoutMs: 5000, repeatOnStaleSocket: true }), HttpTransportError);
    assert.deepEqual({ connections: dropsFirst.connections(), requests: dropsFirst.requests() }, { connections: 1, requests: 1 });
  });
});
