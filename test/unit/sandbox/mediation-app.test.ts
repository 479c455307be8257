/**
 * The sandbox mediation service's sender check over real mutual TLS: a certificate the QTSP's record registers
 * files a record only while it is within its validity period, as the banks' introspection endpoints require.
 * The whole delivery path is in test/integration/mediation.test.ts.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { OID } from '../../../src/ca/x509.ts';
import { mediationApp, RECORDS_PATH } from '../../../src/sandbox/mediation/app.ts';
import { RecordStore } from '../../../src/sandbox/mediation/records.ts';
import { PlatformDirectory } from '../../../src/sandbox/platform/directory.ts';
import { buildQtspRecord, certificateJwk } from '../../../src/sandbox/platform/sp-record.ts';
import { TlsServer } from '../../../src/sandbox/tls.ts';
import { toPem } from '../../../src/util/base64.ts';
import { endEntityCertificate } from '../../helpers/certificates.ts';

const QTSP_ID = 'qtsp-under-test';

interface Pair {
  readonly cert: string;
  readonly key: string;
  readonly der: Buffer;
}

function pair(commonName: string, validHours: number, usage: string): Pair {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const der = endEntityCertificate({
    commonName,
    publicKey,
    selfSignKey: privateKey as KeyObject,
    validHours,
    keyUsage: ['digitalSignature'],
    extKeyUsage: [usage],
  });
  return { cert: toPem(der, 'CERTIFICATE'), key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, der };
}

let dir: string;
let server: TlsServer;
let port: number;
let store: RecordStore;
const current = pair('qtsp current', 24, OID.clientAuth);
const ended = pair('qtsp ended', -0.5, OID.clientAuth);

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'qtsp-mediation-app-'));
  const identity = { certFile: join(dir, 'server.pem'), keyFile: join(dir, 'server.key') };
  const serverPair = pair('127.0.0.1', 24, OID.serverAuth);
  writeFileSync(identity.certFile, serverPair.cert);
  writeFileSync(identity.keyFile, serverPair.key);
  writeFileSync(join(dir, 'client.pem'), current.cert);
  const record = buildQtspRecord({ id: QTSP_ID, clientCertFile: join(dir, 'client.pem'), signDocUrl: 'https://q/' });
  // both certificates registered: the ended one is still in the record
  record.jwks = { keys: [certificateJwk(current.der), certificateJwk(ended.der)] };
  store = new RecordStore();
  const app = mediationApp({
    records: store,
    controls: { mode: 'normal', failNext: 0 },
    directory: new PlatformDirectory([record], []),
    stats: { requests: 0 },
  });
  server = new TlsServer(identity, app, true);
  port = await server.listen('127.0.0.1', 0);
});

after(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

function post(as: Pair, referenceId: string): Promise<{ status: number; body: string }> {
  const body = JSON.stringify({
    type: 'remote_signature_creation',
    record: {
      delivery_time: new Date().toISOString(),
      transaction_id: 't-1',
      owner_id: 'o',
      credentialID: 'qes_eidas',
      count: 1,
      service_provider_id: QTSP_ID,
      client_id: 'rp',
      issuer: 'https://bank.invalid',
      reference_id: referenceId,
    },
  });
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: RECORDS_PATH,
        method: 'POST',
        cert: as.cert,
        key: as.key,
        // the server's own certificate is not what this test is about
        rejectUnauthorized: false,
        agent: false,
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('sandbox mediation service: the sender certificate', () => {
  it('a registered certificate past its notAfter files nothing (401); a current one files the record', async () => {
    const refused = await post(ended, 'ended-1');
    assert.equal(refused.status, 401, refused.body);
    assert.equal(JSON.parse(refused.body).error, 'invalid_client');
    assert.match(JSON.parse(refused.body).error_description, /outside its validity period/);
    assert.equal(store.all().length, 0);
    const stored = await post(current, 'current-1');
    assert.equal(stored.status, 201, stored.body);
    assert.equal(store.all().length, 1);
  });
});
