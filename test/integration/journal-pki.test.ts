/**
 * CA events in the journal (docs/evidence.md): `qtsp pki ceremony` journals what it issued (each certificate's
 * subject, serial, validity and SHA-256, the root CRL's SHA-256, the key custody) and `--renew-crl` the new
 * root CRL, in the store the service uses.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSqliteStore, sqlitePath } from '../../src/store/open.ts';

const QTSP = fileURLToPath(new URL('../../bin/qtsp.js', import.meta.url));

function qtsp(args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [QTSP, ...args], { encoding: 'utf8' }, (err, _stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr });
    });
  });
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

describe('CA events in the journal', () => {
  it('the key ceremony journals what it issued; a root CRL renewal journals the new CRL', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qtsp-journal-pki-'));
    const data = join(dir, 'data');
    const offline = join(dir, 'offline');
    try {
      const made = await qtsp(['pki', 'ceremony', '--data-dir', data, '--ceremony-dir', offline]);
      assert.equal(made.code, 0, made.stderr);
      const renewed = await qtsp(['pki', 'ceremony', '--renew-crl', '--data-dir', data, '--ceremony-dir', offline]);
      assert.equal(renewed.code, 0, renewed.stderr);
      const store = await openSqliteStore(sqlitePath(data));
      try {
        const entries = await store.journal.entries(0, await store.journal.horizon());
        const bodies = entries.map((e) => JSON.parse(e.body.toString('utf8')));
        const ceremony = bodies.find((b) => b.kind === 'pki.ceremony');
        assert.ok(ceremony, `kinds: ${bodies.map((b) => b.kind).join(', ')}`);
        const byName = new Map(
          (ceremony.data.certificates as { name: string; serialHex: string; sha256: string }[]).map((c) => [c.name, c]),
        );
        for (const [name, file] of [
          ['root', 'root-ca.pem'],
          ['issuingCa', 'issuing-ca.pem'],
          ['tsa', 'tsa.pem'],
        ] as const) {
          const cert = new X509Certificate(readFileSync(join(data, 'pki', file)));
          assert.equal(byName.get(name)?.sha256, sha256(cert.raw), name);
          assert.equal(byName.get(name)?.serialHex, cert.serialNumber.toLowerCase(), name);
        }
        const crl = bodies.find((b) => b.kind === 'pki.root_crl_renewed');
        assert.equal(crl?.data.sha256, sha256(readFileSync(join(data, 'pki', 'root-ca.crl'))));
        assert.notEqual(crl.data.sha256, ceremony.data.rootCrlSha256, 'the renewed CRL is a new one');
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a renewal at a ceremony journals the certificates it reissued', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qtsp-journal-pki-'));
    const data = join(dir, 'data');
    const offline = join(dir, 'offline');
    try {
      const made = await qtsp(['pki', 'ceremony', '--data-dir', data, '--ceremony-dir', offline]);
      assert.equal(made.code, 0, made.stderr);
      // everything is due within this many days: the TSA, both OCSP responders and the root CRL
      const args = ['pki', 'ceremony', '--renew', '--within', '100000', '--data-dir', data, '--ceremony-dir', offline];
      const renewed = await qtsp(args);
      assert.equal(renewed.code, 0, renewed.stderr);
      const store = await openSqliteStore(sqlitePath(data));
      try {
        const entries = await store.journal.entries(0, await store.journal.horizon());
        const bodies = entries.map((e) => JSON.parse(e.body.toString('utf8')));
        const event = bodies.find((b) => b.kind === 'pki.renewed');
        assert.ok(event, `kinds: ${bodies.map((b) => b.kind).join(', ')}`);
        const byName = new Map(
          (event.data.certificates as { name: string; serialHex: string; sha256: string }[]).map((c) => [c.name, c]),
        );
        for (const [name, file] of [
          ['tsa', 'tsa.pem'],
          ['ocsp-responder', 'ocsp-responder.pem'],
          ['root-ocsp-responder', 'root-ocsp-responder.pem'],
        ] as const) {
          assert.ok((event.data.objects as string[]).includes(name), name);
          const cert = new X509Certificate(readFileSync(join(data, 'pki', file)));
          assert.equal(byName.get(name)?.sha256, sha256(cert.raw), name);
          assert.equal(byName.get(name)?.serialHex, cert.serialNumber.toLowerCase(), name);
        }
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
