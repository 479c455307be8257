/**
 * Our HTTPS server certificate (server.tlsCertFile) is in the calendar and is renewed without a restart: a new
 * pair written over the files (key first, certificate last) is served by the running instance from its next
 * handshake, as a TLS client reads it; the calendar carries the new end and `qtsp pki status` lists it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import * as tls from 'node:tls';
import { createTlsCertificate, loadKeyed } from '../../src/ca/authority.ts';
import { sandboxPaths } from '../../src/sandbox/paths.ts';
import { toPem } from '../../src/util/base64.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';

/** The certificate the listener at `url` presents, read by a plain TLS client. */
function servedCertificate(url: string): Promise<Buffer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: hostname, port: Number(port), rejectUnauthorized: false }, () => {
      const der = socket.getPeerCertificate().raw;
      socket.destroy();
      resolve(der);
    });
    socket.once('error', reject);
  });
}

const pemDer = (file: string) => new X509Certificate(readFileSync(file)).raw;

describe('the HTTPS server certificate, renewed without a restart', () => {
  let env: TestEnvironment;
  before(async () => {
    env = await startEnvironment({ calendar: { reloadCheckSeconds: 1 } });
  });
  after(async () => {
    await env?.close();
  });

  it('is in the calendar, and a renewed pair is served by the running instance', async () => {
    const { tlsCertFile, tlsKeyFile } = env.config.server;
    const before = env.qtsp.calendar.entries().find((e) => e.object === 'tls-server');
    assert.ok(before, 'tls-server in the calendar');
    assert.equal(before.file, tlsCertFile);
    assert.ok((await servedCertificate(env.qtsp.url)).equals(pemDer(tlsCertFile)), 'serves the configured file');

    // the sandbox's TLS CA stands for the operator's: a certificate valid for three years this time
    const p = sandboxPaths(env.dataDir);
    const renewed = createTlsCertificate(loadKeyed(p.tlsCaCert, p.tlsCaKey), {
      commonName: 'Sandbox QTSP',
      usage: 'server',
      dnsNames: ['localhost'],
      ips: ['127.0.0.1'],
      years: 3,
    });
    writeFileSync(tlsKeyFile, renewed.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string);
    writeFileSync(tlsCertFile, toPem(renewed.der, 'CERTIFICATE'));

    const deadline = Date.now() + 60_000;
    let served = await servedCertificate(env.qtsp.url);
    while (!served.equals(renewed.der) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      served = await servedCertificate(env.qtsp.url);
    }
    assert.ok(served.equals(renewed.der), 'the running instance serves the renewed certificate');

    const endsAt = new Date(new X509Certificate(renewed.der).validTo).getTime();
    while (
      env.qtsp.calendar
        .entries()
        .find((e) => e.object === 'tls-server')
        ?.endsAt.getTime() !== endsAt
    ) {
      assert.ok(Date.now() < deadline, 'the calendar reads the new end');
      await new Promise((r) => setTimeout(r, 250));
    }
    const status = await qtsp(['pki', 'status', '--json', '--data-dir', env.dataDir]);
    const listed = (JSON.parse(status.output) as { object: string; endsAt: string }[]).find(
      (e) => e.object === 'tls-server',
    );
    assert.equal(listed && new Date(listed.endsAt).getTime(), endsAt, status.output);
  });
});
