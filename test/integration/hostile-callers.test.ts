/**
 * Hostile and careless callers: compressed and malformed bodies are 4xx, never 500; client
 * aborts are one brief line at info; 502/504 bodies say what failed in the relying party's terms while the
 * detail goes to our log; connection limits keep valid calls going while 1,000 slow connections are open.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as net from 'node:net';
import { Writable } from 'node:stream';
import * as tls from 'node:tls';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { pino } from 'pino';
import { callSignDoc } from '../../src/rp/flow.ts';
import type { QtspService } from '../../src/service.ts';
import { freePort } from '../../src/util/free-port.ts';
import { httpRequest } from '../../src/util/http-client.ts';
import { startEnvironment, startExtraQtsp, type TestEnvironment } from '../helpers/environment.ts';
import { authorize, labelled, signDocBody } from '../helpers/signing.ts';

/** Every log line of the QTSPs of this file, parsed. */
const logs: Record<string, unknown>[] = [];
const logger = pino(
  { level: 'debug' },
  new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  }),
);

let env: TestEnvironment;
let rpTls: tls.ConnectionOptions;

before(async () => {
  env = await startEnvironment({ server: { headersTimeoutMs: 3000, requestTimeoutMs: 6000 } }, { logger });
  rpTls = {
    ca: readFileSync(env.endpoints.tlsCaFile),
    cert: readFileSync(env.endpoints.rp.certFile),
    key: readFileSync(env.endpoints.rp.keyFile),
  };
});
after(async () => {
  await env?.close();
});

async function validBody(): Promise<string> {
  const hash = createHash('sha256').update(randomUUID()).digest('base64');
  const auth = await authorize(env.endpoints, labelled([hash]));
  return JSON.stringify(signDocBody(auth.accessToken, [hash]));
}

async function signDoc(url: string, body?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const request = JSON.parse(body ?? (await validBody())) as Parameters<typeof callSignDoc>[2];
  const res = await callSignDoc(url, env.endpoints, request);
  return { status: res.status, body: res.body as Record<string, unknown> };
}

/** Sends `head` and `body` on a fresh TLS connection; resolves with everything the server sent until it closed. */
function exchange(url: URL, head: string, body: Buffer, options: tls.ConnectionOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: url.hostname, port: Number(url.port), ...options }, () => {
      socket.write(head);
      socket.write(body);
    });
    let out = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      out += d;
      if (/\r\n\r\n/.test(out) && /"\}$|\}$/.test(out)) socket.end();
    });
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no answer within 10 s; got: ${out}`)));
    socket.on('close', () => resolve(out));
    socket.on('error', (err) => (out ? resolve(out) : reject(err)));
  });
}

function post(path: string, headers: Record<string, string>, body: Buffer): string {
  const lines = Object.entries({ host: 'qtsp', 'content-length': String(body.length), ...headers }).map(
    ([k, v]) => `${k}: ${v}`,
  );
  return `POST ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`;
}

/** Waits (bounded) until `predicate` holds for the log; returns the matching lines. */
async function logged(
  predicate: (line: Record<string, unknown>) => boolean,
  what: string,
): Promise<Record<string, unknown>[]> {
  for (let i = 0; i < 200; i++) {
    const found = logs.filter(predicate);
    if (found.length) return found;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.fail(`not logged: ${what}`);
}

describe('item 4: compressed and malformed bodies are 4xx, never 500', () => {
  const garbage = Buffer.from('this is not compressed at all');
  it('Content-Encoding gzip, deflate, br: 415 (compressed bodies are refused, valid or not), with or without a certificate 4xx', async () => {
    const url = new URL(env.qtsp.url);
    const valid = Buffer.from(await validBody());
    const encoded: Record<string, Buffer> = {
      gzip: gzipSync(valid),
      deflate: deflateSync(valid),
      br: brotliCompressSync(valid),
    };
    const compressedSignDoc = (encoding: string, body: Buffer, tlsOptions: tls.ConnectionOptions) =>
      exchange(
        url,
        post(
          env.config.server.signDocPath,
          { 'content-type': 'application/json', 'content-encoding': encoding, connection: 'close' },
          body,
        ),
        body,
        tlsOptions,
      );
    for (const encoding of ['gzip', 'deflate', 'br']) {
      for (const body of [garbage, encoded[encoding]!]) {
        const res = await compressedSignDoc(encoding, body, rpTls);
        assert.match(res, /^HTTP\/1\.1 415 /, `${encoding}: ${res}`);
        assert.match(res, /accept-encoding: identity/i);
        assert.match(res, /"error":"invalid_request","error_description":"the request body must not be compressed/);
      }
      const noCert = await compressedSignDoc(encoding, garbage, { ca: rpTls.ca! });
      assert.match(noCert, /^HTTP\/1\.1 401 /, `${encoding} without a certificate: ${noCert}`);
    }
  });

  it('the publication server answers compressed OCSP and TSA requests with the protocol error, 400', async () => {
    for (const [path, type] of [
      ['/ocsp', 'application/ocsp-request'],
      ['/tsa', 'application/timestamp-query'],
    ] as const) {
      const res = await httpRequest(`${env.qtsp.publicationUrl}${path}`, {
        method: 'POST',
        headers: { 'content-type': type, 'content-encoding': 'gzip' },
        body: garbage,
        timeoutMs: 5000,
      });
      assert.equal(res.status, 400, path);
    }
  });

  it('other malformed bodies: invalid JSON, a JSON array, a wrong charset: 400', async () => {
    const url = new URL(env.qtsp.url);
    for (const [body, type] of [
      ['{"SAD": ', 'application/json'],
      ['[1,2]', 'application/json'],
      ['{}', 'application/json; charset=latin1'],
    ] as const) {
      const res = await exchange(
        url,
        post(env.config.server.signDocPath, { 'content-type': type, connection: 'close' }, Buffer.from(body)),
        Buffer.from(body),
        rpTls,
      );
      assert.match(res, /^HTTP\/1\.1 400 /, `${body}: ${res}`);
    }
    assert.equal(logs.filter((l) => l['event'] === 'http.unexpected').length, 0);
  });
});

describe('item 5: client aborts are one brief line at info, without a stack', () => {
  it('a client that disconnects mid-body, and one cut by the request timeout', async () => {
    const url = new URL(env.qtsp.url);
    const before = logs.length;
    // disconnect mid-body: headers announce 1000 bytes, 10 come, then the client goes
    await new Promise<void>((resolve) => {
      const socket = tls.connect({ host: url.hostname, port: Number(url.port), ...rpTls }, () => {
        socket.write(post(env.config.server.signDocPath, { 'content-type': 'application/json' }, Buffer.alloc(1000)));
        socket.write('{"SAD": "x');
        setTimeout(() => socket.destroy(), 200);
      });
      socket.on('close', () => resolve());
      socket.on('error', () => undefined);
    });
    await logged((l) => l['event'] === 'http.client_aborted', 'the abort');
    // a slow body: the server's request timeout (6 s here) cuts it
    const cut = await new Promise<string>((resolve) => {
      let out = '';
      const socket = tls.connect({ host: url.hostname, port: Number(url.port), ...rpTls }, () => {
        socket.write(post(env.config.server.signDocPath, { 'content-type': 'application/json' }, Buffer.alloc(1000)));
        socket.write('{"SAD": "x');
      });
      socket.setEncoding('utf8');
      socket.on('data', (d: string) => (out += d));
      socket.setTimeout(30_000, () => socket.destroy());
      socket.on('close', () => resolve(out));
      socket.on('error', () => undefined);
    });
    assert.match(cut, /^(HTTP\/1\.1 408 |$)/, 'cut by the server, with 408 or without an answer');
    const aborts = await (async () => {
      for (let i = 0; i < 200; i++) {
        const found = logs.slice(before).filter((l) => l['event'] === 'http.client_aborted');
        if (found.length >= 2) return found;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return logs.slice(before).filter((l) => l['event'] === 'http.client_aborted');
    })();
    assert.equal(aborts.length, 2, 'one line per aborted request');
    for (const line of aborts) {
      assert.equal(line['level'], 30, 'info');
      assert.equal(line['err'], undefined, 'no error object, no stack');
      assert.doesNotMatch(JSON.stringify(line), /stack|at .*\.js:\d+/);
    }
    const errors = logs.slice(before).filter((l) => (l['level'] as number) >= 50);
    assert.deepEqual(errors, [], 'nothing at error');
  });
});

describe('item 6: 502 and 504 bodies in the relying party terms, the detail in our log', () => {
  const internal =
    /127\.0\.0\.1|localhost|https?:\/\/|ECONN|EHOSTUNREACH|ETIMEDOUT|socket hang up|other side closed|errno|:\d{2,5}\b/;
  const extra: QtspService[] = [];
  after(async () => {
    for (const qtsp of extra) await qtsp.close();
  });

  it('the AS goes away during introspection: 502 "could not be reached", the address and errno only in the log', async () => {
    env.sandbox.controls.introspection.mode = 'reset';
    try {
      const res = await signDoc(env.qtsp.signDocUrl);
      assert.equal(res.status, 502, JSON.stringify(res.body));
      assert.deepEqual(res.body, {
        error: 'bad_gateway',
        error_description: 'the authorization server could not be reached for token introspection',
      });
      const [line] = await logged(
        (l) => l['event'] === 'signdoc.upstream_failed' && String(l['detail']).startsWith('introspection at https://'),
        'the detail',
      );
      assert.match(String(line!['detail']), /other side closed|ECONNRESET/);
    } finally {
      env.sandbox.controls.introspection.mode = 'normal';
    }
  });

  it('the AS keys unavailable (JWKS 500, unknown kid): 502 without the upstream answer', async () => {
    env.sandbox.controls.jwks.mode = 'http500';
    const qtsp = await startExtraQtsp(
      env,
      { trust: { keyArchiveUrl: `https://127.0.0.1:${await freePort()}/none.git` } },
      { logger },
    );
    extra.push(qtsp);
    try {
      const res = await signDoc(qtsp.signDocUrl);
      assert.equal(res.status, 502, JSON.stringify(res.body));
      assert.doesNotMatch(String(res.body['error_description']), internal);
      assert.doesNotMatch(String(res.body['error_description']), /HTTP 500/);
    } finally {
      env.sandbox.controls.jwks.mode = 'normal';
    }
  });

  it('the IDP directory unreachable: 502 without address or errno', async () => {
    const qtsp = await startExtraQtsp(
      env,
      { trust: { idpDirectoryUrl: `https://127.0.0.1:${await freePort()}/idps/v1/` } },
      { logger },
    );
    extra.push(qtsp);
    const res = await signDoc(qtsp.signDocUrl);
    assert.equal(res.status, 502, JSON.stringify(res.body));
    assert.match(
      String(res.body['error_description']),
      /^the IDP directory could not be reached and has never answered about issuer/,
    );
    assert.doesNotMatch(String(res.body['error_description']).replace(env.sandbox.issuer, 'ISSUER'), internal);
    await logged(
      (l) =>
        l['event'] === 'signdoc.upstream_failed' &&
        /^IDP directory https:\/\/127\.0\.0\.1:\d+\/idps\/v1\/: .*ECONNREFUSED/.test(String(l['detail'])),
      'the directory detail',
    );
  });

  it('an external TSA unreachable: 502 without address or errno', async () => {
    const qtsp = await startExtraQtsp(
      env,
      { tsa: { url: `http://127.0.0.1:${await freePort()}/tsa`, retries: 0 } },
      { logger },
    );
    extra.push(qtsp);
    const body = JSON.parse(await validBody()) as Record<string, unknown>;
    const res = await signDoc(qtsp.signDocUrl, JSON.stringify({ ...body, conformance_level: 'AdES-B-T' }));
    assert.equal(res.status, 502, JSON.stringify(res.body));
    assert.deepEqual(res.body, {
      error: 'bad_gateway',
      error_description: 'the time-stamping authority could not be reached',
    });
    await logged(
      (l) =>
        l['event'] === 'signdoc.upstream_failed' &&
        /^TSA http:\/\/127\.0\.0\.1:\d+\/tsa: .*ECONNREFUSED/.test(String(l['detail'])),
      'the TSA detail',
    );
  });
});

describe('item 7: connection limits', () => {
  const SLOW = 1000;
  const PER_ADDRESS = 250;
  const SOURCES = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'];

  it(`valid calls get through while ${SLOW} slow connections are open; one more from a full address is refused`, async (t) => {
    const limit = Number(/Max open files\s+(\d+)/.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1] ?? 0);
    if (limit < 3 * SLOW) return t.skip(`the file-descriptor limit (ulimit -n ${limit}) is below ${3 * SLOW}`);
    // long timeouts here: the slow connections must stay open while the valid calls run
    const qtsp = await startExtraQtsp(
      env,
      {
        server: {
          maxConnections: SLOW + 100,
          maxConnectionsPerAddress: PER_ADDRESS,
          headersTimeoutMs: 120_000,
          requestTimeoutMs: 120_000,
        },
      },
      { logger },
    );
    const url = new URL(qtsp.url);
    const sockets: net.Socket[] = [];
    let closedEarly = 0;
    try {
      // half connect and send nothing (not even a TLS hello); half finish the handshake and send half a request line
      const open = (localAddress: string, i: number) =>
        new Promise<void>((resolve, reject) => {
          const onClose = () => closedEarly++;
          if (i % 2 === 0) {
            const s = net.connect({ host: url.hostname, port: Number(url.port), localAddress }, () => resolve());
            s.on('error', reject);
            s.once('close', onClose);
            sockets.push(s);
          } else {
            const s = tls.connect(
              { host: url.hostname, port: Number(url.port), localAddress, ...rpTls } as tls.ConnectionOptions,
              () => {
                s.write('POST /signDoc HT');
                resolve();
              },
            );
            s.on('error', reject);
            s.once('close', onClose);
            sockets.push(s);
          }
        });
      for (const source of SOURCES) {
        for (let batch = 0; batch < PER_ADDRESS; batch += 50) {
          await Promise.all(Array.from({ length: 50 }, (_, k) => open(source, batch + k)));
        }
      }
      assert.equal(sockets.length, SLOW);
      // one more from a full address: closed by the server before anything is exchanged
      const refused = await new Promise<boolean>((resolve) => {
        const s = tls.connect(
          { host: url.hostname, port: Number(url.port), localAddress: SOURCES[0], ...rpTls } as tls.ConnectionOptions,
          () => resolve(false),
        );
        s.on('error', () => resolve(true));
        s.on('close', () => resolve(true));
      });
      assert.equal(refused, true, 'the connection past the per-address limit is refused');
      // valid calls from another address
      for (let i = 0; i < 3; i++) assert.equal((await signDoc(qtsp.signDocUrl)).status, 200);
      assert.equal(closedEarly, 0, 'every slow connection was still open');
      await logged((l) => l['event'] === 'http.connection_refused', 'the refusal');
    } finally {
      for (const s of sockets) s.destroy();
      await qtsp.close();
    }
  });

  it('a client that sends nothing is closed after server.headersTimeoutMs (no TLS hello; handshake done; plain HTTP); item 5 shows a slow body cut', async () => {
    const url = new URL(env.qtsp.url); // 3 s and 6 s here
    // connects, sends nothing, and tells whether the server closed the connection (false: still open after 60 s)
    const closedByServer = (connect: () => net.Socket) =>
      new Promise<boolean>((resolve) => {
        const s = connect();
        const guard = setTimeout(() => {
          s.destroy();
          resolve(false);
        }, 60_000);
        s.on('close', () => {
          clearTimeout(guard);
          resolve(true);
        });
        s.on('error', () => undefined);
      });
    const plain = (target: URL) => () => net.connect({ host: target.hostname, port: Number(target.port) });
    // the three connections at once: each is its own, and each waits out the same timeout
    const [plainClosed, tlsClosed, publicationClosed] = await Promise.all([
      closedByServer(plain(url)),
      closedByServer(() => tls.connect({ host: url.hostname, port: Number(url.port), ...rpTls })),
      closedByServer(plain(new URL(env.qtsp.publicationUrl))),
    ]);
    assert.equal(plainClosed, true, 'no TLS hello at all');
    assert.equal(tlsClosed, true, 'handshake done, no request');
    assert.equal(publicationClosed, true, 'plain HTTP, nothing sent');
  });
});
