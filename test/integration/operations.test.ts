/**
 * The operations listener and readiness: health and metrics on their own loopback port,
 * the mutual-TLS port refusing certificate-less clients before reading a body, and readiness agreeing with
 * signDoc under a full store, an IDP directory never reached, and a key archive unreachable while the AS key
 * sources serve; once the store or the directory answers again, readiness says so within about a second.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as tls from 'node:tls';
import Database from 'better-sqlite3';
import type { ConfigInput } from '../../src/config/schema.ts';
import type { QtspService } from '../../src/service.ts';
import { sqlitePath } from '../../src/store/open.ts';
import { freePort } from '../../src/util/free-port.ts';
import { httpRequest, jsonBody } from '../../src/util/http-client.ts';
import { startEnvironment, startExtraQtsp, type TestEnvironment } from '../helpers/environment.ts';
import { signThroughSandbox } from '../helpers/signing.ts';

const MAX_STORE_BYTES = 4 * 1024 * 1024;
/**
 * From a dependency answering again to GET /health/ready answering 200, without a refresh asked for: the
 * background checks run again every quarter second while not ready (readiness.ts), not only every
 * store.pingIntervalMs (the default, 5 s, here); the bound leaves room for a busy machine.
 */
const RECOVERY_BOUND_MS = 4000;

let env: TestEnvironment;
const extra: QtspService[] = [];

before(async () => {
  env = await startEnvironment({ store: { pingIntervalMs: 5000, sqliteMaxBytes: MAX_STORE_BYTES } });
});
after(async () => {
  for (const qtsp of extra) await qtsp.close();
  await env?.close();
});

async function ready(qtsp: QtspService): Promise<{ status: number; reasons: string[] }> {
  await qtsp.refreshReadiness();
  const res = await httpRequest(`${qtsp.opsUrl}/health/ready`, { timeoutMs: 5000 });
  const body = jsonBody(res) as { status: string; reasons: string[] };
  assert.equal(body.status, res.status === 200 ? 'ready' : 'not_ready');
  return { status: res.status, reasons: body.reasons };
}

/**
 * Polls GET /health/ready, without asking for a refresh, until it answers 200 (fails after 10 s); returns the
 * reasons of that answer and the ms it took.
 */
async function untilReady(qtsp: QtspService): Promise<{ ms: number; reasons: string[] }> {
  const started = performance.now();
  for (;;) {
    const res = await httpRequest(`${qtsp.opsUrl}/health/ready`, { timeoutMs: 5000 });
    const body = jsonBody(res) as { status: string; reasons: string[] };
    if (res.status === 200) return { ms: performance.now() - started, reasons: body.reasons };
    assert.ok(performance.now() - started < 10_000, `not ready 10 s after the recovery: ${body.reasons.join('; ')}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function signDoc(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const hash = createHash('sha256').update(randomUUID()).digest('base64');
  const res = await signThroughSandbox(env, [hash], { signDocUrl: url });
  return { status: res.status, body: res.body as Record<string, unknown> };
}

function secondQtsp(trust: ConfigInput['trust']): Promise<QtspService> {
  return startExtraQtsp(env, { trust }).then((qtsp) => {
    extra.push(qtsp);
    return qtsp;
  });
}

describe('operations listener', () => {
  it('serves health and metrics on its own loopback port, apart from the mutual-TLS port', async () => {
    const ops = new URL(env.qtsp.opsUrl);
    assert.equal(ops.protocol, 'http:');
    assert.equal(ops.hostname, '127.0.0.1');
    assert.notEqual(ops.port, new URL(env.qtsp.url).port);
    assert.equal((await httpRequest(`${env.qtsp.opsUrl}/health/live`, { timeoutMs: 5000 })).status, 200);
    assert.deepEqual(await ready(env.qtsp), { status: 200, reasons: [] });
    assert.equal((await signDoc(env.qtsp.signDocUrl)).status, 200);
    const metrics = (await httpRequest(`${env.qtsp.opsUrl}/metrics`, { timeoutMs: 10_000 })).body.toString();
    for (const series of [
      /^qtsp_outbox_entries\{topic="mediation",state="(pending|queued|delivered)"\} [1-9]/m,
      /^qtsp_outbox_oldest_undelivered_age_seconds\{topic="mediation"\} \d/m,
      /^qtsp_queue_jobs\{topic="mediation",state="waiting"\} \d+/m,
      /^qtsp_store_up 1$/m,
      /^qtsp_redis_up 1$/m,
      /^qtsp_ready 1$/m,
      /^qtsp_idp_list_age_seconds \d/m,
      /^qtsp_key_archive_head_age_seconds \d/m,
      /^qtsp_key_archive_last_pull_age_seconds \d/m,
      /^qtsp_signatures_created_total [1-9]/m,
    ]) {
      assert.match(metrics, series);
    }
    // the mutual-TLS port no longer serves them, even to a client with a certificate
    const rp = {
      ca: readFileSync(env.endpoints.tlsCaFile),
      cert: readFileSync(env.endpoints.rp.certFile),
      key: readFileSync(env.endpoints.rp.keyFile),
    };
    for (const path of ['/health/live', '/health/ready', '/metrics']) {
      const res = await rawTls(
        new URL(env.qtsp.url),
        `GET ${path} HTTP/1.1\r\nhost: qtsp\r\nconnection: close\r\n\r\n`,
        rp,
      );
      assert.match(res, /^HTTP\/1\.1 404 /, path);
    }
  });

  it('the mutual-TLS port answers a client without a certificate 401, before reading any body', async () => {
    const ca = { ca: readFileSync(env.endpoints.tlsCaFile) };
    const url = new URL(env.qtsp.url);
    // headers announce 1 MB that never comes: the answer arrives anyway, so nothing waited for the body
    const head = `POST ${env.config.server.signDocPath} HTTP/1.1\r\nhost: qtsp\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n{`;
    const res = await rawTls(url, head, ca);
    assert.match(res, /^HTTP\/1\.1 401 /);
    assert.match(res, /connection: close/i);
    assert.match(res, /"error":"invalid_token","error_description":"no TLS client certificate was presented/);
    for (const path of ['/ocsp', '/crl/root.crl', '/health/live']) {
      assert.match(
        await rawTls(url, `GET ${path} HTTP/1.1\r\nhost: qtsp\r\nconnection: close\r\n\r\n`, ca),
        /^HTTP\/1\.1 401 /,
        path,
      );
    }
    // what a validator without a certificate fetches is on the plain-HTTP publication server
    assert.equal((await httpRequest(`${env.qtsp.publicationUrl}/crl/root.crl`, { timeoutMs: 5000 })).status, 200);
  });
});

describe('readiness agrees with signDoc', () => {
  it('a full store (SQLite at its size cap: SQLITE_FULL, as on a full disk) is not ready, and signDoc answers 503', async () => {
    // The service caps the file at store.sqliteMaxBytes (PRAGMA max_page_count). Another connection grows the
    // file past the cap, leaving no free page: every write of the service then fails with SQLITE_FULL, the
    // error SQLite reports for a full disk (a full filesystem cannot be made here without root).
    const db = new Database(sqlitePath(env.dataDir));
    try {
      db.exec('CREATE TABLE IF NOT EXISTS test_filler (x BLOB)');
      const insert = db.prepare('INSERT INTO test_filler VALUES (zeroblob(65536))');
      const bytes = () =>
        (db.pragma('page_count', { simple: true }) as number) * (db.pragma('page_size', { simple: true }) as number);
      while (bytes() <= MAX_STORE_BYTES + 65536) insert.run();
      const full = await ready(env.qtsp);
      assert.equal(full.status, 503);
      assert.match(full.reasons.join('\n'), /evidence store \(sqlite\) does not accept a write: .*full/);
      const signed = await signDoc(env.qtsp.signDocUrl);
      assert.equal(signed.status, 503, JSON.stringify(signed.body));
      assert.equal(signed.body['error'], 'temporarily_unavailable');
      assert.match(
        (await httpRequest(`${env.qtsp.opsUrl}/metrics`, { timeoutMs: 10_000 })).body.toString(),
        /^qtsp_store_up 0$/m,
      );
      db.exec('DROP TABLE test_filler'); // space again
      // readiness follows on its own, within about a second, not after the next store.pingIntervalMs
      const back = await untilReady(env.qtsp);
      assert.deepEqual(back.reasons, []);
      assert.ok(back.ms < RECOVERY_BOUND_MS, `ready ${Math.round(back.ms)} ms after the disk had space again`);
      assert.deepEqual(await ready(env.qtsp), { status: 200, reasons: [] });
      assert.equal((await signDoc(env.qtsp.signDocUrl)).status, 200);
    } finally {
      db.close();
    }
  });

  it('an IDP directory never reached is not ready (signDoc 502); ready once it answers (signDoc 200)', async () => {
    env.sandbox.controls.idpDirectory.mode = 'reset';
    try {
      const qtsp = await secondQtsp({ idpListPullSeconds: 0 });
      const down = await ready(qtsp);
      assert.equal(down.status, 503);
      assert.match(down.reasons.join('\n'), /IDP directory has never answered/);
      assert.equal((await signDoc(qtsp.signDocUrl)).status, 502);
      env.sandbox.controls.idpDirectory.mode = 'normal';
      // readiness asks the directory again on its own, within about a second
      const back = await untilReady(qtsp);
      assert.deepEqual(back.reasons, []);
      assert.ok(back.ms < RECOVERY_BOUND_MS, `ready ${Math.round(back.ms)} ms after the directory answered`);
      assert.deepEqual(await ready(qtsp), { status: 200, reasons: [] }, 'readiness asks the directory again');
      assert.equal((await signDoc(qtsp.signDocUrl)).status, 200);
    } finally {
      env.sandbox.controls.idpDirectory.mode = 'normal';
    }
  });

  it('a key archive never reached, the AS key sources serving: ready (signDoc 200), the reason named; not ready once jwks_uri fails too', async () => {
    const dead = `https://127.0.0.1:${await freePort()}/key-archive/keys.git`;
    const qtsp = await secondQtsp({ keyArchiveUrl: dead });
    const r = await ready(qtsp);
    assert.equal(r.status, 200, r.reasons.join('\n'));
    assert.match(r.reasons.join('\n'), /key archive .*no verified state/);
    assert.match(r.reasons.join('\n'), /AS key sources: every active AS serves its keys at jwks_uri/);
    assert.equal((await signDoc(qtsp.signDocUrl)).status, 200);
    try {
      env.sandbox.controls.jwks.mode = 'http500';
      const cold = await secondQtsp({ keyArchiveUrl: dead }); // a fresh instance: no JWK Set cached
      const none = await ready(cold);
      assert.equal(none.status, 503);
      assert.match(none.reasons.join('\n'), /no source for AS keys/);
      assert.match(none.reasons.join('\n'), /AS key sources: .*AS JWKS answered HTTP 500/);
      assert.notEqual((await signDoc(cold.signDocUrl)).status, 200);
    } finally {
      env.sandbox.controls.jwks.mode = 'normal';
    }
  });
});

/** Writes `request` on a fresh TLS connection and returns what the server sends until it closes (or 10 s). */
function rawTls(url: URL, request: string, options: tls.ConnectionOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: url.hostname, port: Number(url.port), ...options }, () => socket.write(request));
    let out = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (out += d));
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no answer within 10 s; got: ${out}`)));
    socket.on('end', () => resolve(out));
    socket.on('close', () => resolve(out));
    socket.on('error', (err) => (out ? resolve(out) : reject(err)));
  });
}
