/**
 * The sandbox renews its own TLS server certificates: one within the renewal window of its end is reissued from
 * the sandbox's TLS CA, and a running server serves the new one from its next handshake, read by a TLS client.
 * The client certificates it made for its own RPs are made again near their end, and only the new one
 * authenticates the RP from then on; a certificate an RP brought is left alone.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tls from 'node:tls';
import { createTlsCertificate, loadKeyed, saveKeyed } from '../../../src/ca/authority.ts';
import { sandboxPaths, type SandboxPaths } from '../../../src/sandbox/paths.ts';
import { ClientRegistry } from '../../../src/sandbox/clients.ts';
import { ensureSandboxTls, pemFingerprint, renewSandboxTls, TlsServer } from '../../../src/sandbox/tls.ts';

const DAY = 24 * 3600 * 1000;

function servedCertificate(port: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      const der = socket.getPeerCertificate().raw;
      socket.destroy();
      resolve(der);
    });
    socket.once('error', reject);
  });
}

const fileDer = (file: string) => new X509Certificate(readFileSync(file)).raw;

describe("the sandbox's TLS server certificates near their end", () => {
  let dir: string;
  let paths: SandboxPaths;
  let server: TlsServer;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'qtsp-sandbox-tls-'));
    paths = sandboxPaths(dir);
  });
  after(async () => {
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('none is due when fresh; all are, two years and a day on', () => {
    ensureSandboxTls(paths, '127.0.0.1');
    assert.deepEqual(renewSandboxTls(paths, '127.0.0.1'), []);
    const later = new Date(Date.now() + 731 * DAY);
    const before = fileDer(paths.asCert);
    assert.deepEqual(renewSandboxTls(paths, '127.0.0.1', later), ['as', 'secondAs', 'platform', 'qtsp']);
    assert.ok(!fileDer(paths.asCert).equals(before), 'reissued');
  });

  it('a certificate ending in ten days is reissued and served without a restart', async () => {
    const ca = loadKeyed(paths.tlsCaCert, paths.tlsCaKey);
    const ending = createTlsCertificate(ca, { commonName: 'Sandbox Platform', usage: 'server', years: 10 / 365 });
    saveKeyed(ending, paths.platformCert, paths.platformKey);
    const identity = ensureSandboxTls(paths, '127.0.0.1').platform;
    // a start reissues it already; a running server is given the short one again to renew in place
    assert.ok(!fileDer(paths.platformCert).equals(ending.der), 'reissued at start');
    saveKeyed(ending, paths.platformCert, paths.platformKey);
    server = new TlsServer(identity, (_req, res) => res.end(), false);
    const port = await server.listen('127.0.0.1', 0);
    assert.ok((await servedCertificate(port)).equals(ending.der));

    assert.deepEqual(renewSandboxTls(paths, '127.0.0.1'), ['platform']);
    server.reload();
    const served = await servedCertificate(port);
    assert.ok(served.equals(fileDer(paths.platformCert)), 'serves the reissued file');
    const notAfter = new Date(new X509Certificate(served).validTo).getTime();
    assert.ok(notAfter > Date.now() + 700 * DAY, 'two years again');
  });
});

describe("the sandbox's own RPs' client certificates near their end", () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'qtsp-sandbox-rp-cert-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('made again with a new key; the banks authenticate the new one only', () => {
    const clients = new ClientRegistry(join(dir, 'clients'));
    const rp = clients.register({ clientId: 'sandbox-rp', state: 'active' });
    const brought = join(dir, 'brought');
    saveKeyed(
      createTlsCertificate(undefined, { usage: 'client', commonName: 'own' }),
      `${brought}.pem`,
      `${brought}.key`,
    );
    clients.register({ clientId: 'own', state: 'active', certFile: `${brought}.pem`, keyFile: `${brought}.key` });
    const old = pemFingerprint(rp.certFile);
    assert.deepEqual(clients.renewNearEnd(), [], 'renewed a certificate far from its end');
    const later = new Date(Date.now() + 720 * DAY);
    assert.deepEqual(clients.renewNearEnd(later), ['sandbox-rp']);
    const renewed = pemFingerprint(rp.certFile);
    assert.notEqual(renewed, old);
    assert.equal(clients.authenticate('sandbox-rp', old), undefined, 'the replaced certificate still authenticates');
    assert.ok(clients.authenticate('sandbox-rp', renewed));
    assert.ok(new Date(new X509Certificate(readFileSync(rp.certFile)).validTo) > later, 'not valid at that time');
    assert.equal(pemFingerprint(`${brought}.pem`), clients.get('own')!.fingerprint);
  });
});
