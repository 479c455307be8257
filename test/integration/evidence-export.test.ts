/**
 * `qtsp evidence export` (src/retention/export.ts) against a running QTSP: the archive of a period holds the
 * introspection JWT, the certificate and the kept signature of a real signing, a manifest whose hashes match
 * every file, and our TSA's time-stamp over the manifest, which `openssl ts -verify` accepts.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { signAndCapture } from '../helpers/evidence.ts';
import { run } from '../helpers/openssl.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';

let env: TestEnvironment;
before(async () => {
  env = await startEnvironment();
});
after(async () => {
  await env.close();
});

describe('qtsp evidence export', () => {
  it('archives a period: JWTs, certificates, kept signatures, a manifest time-stamped by our TSA', async () => {
    const from = new Date(Date.now() - 3_600_000).toISOString();
    const signed = await signAndCapture(env);
    assert.equal(signed.status, 200, JSON.stringify(signed.body));
    await env.qtsp.sealJournal(); // the records' tokens name our TSA certificate, which the archive carries
    const to = new Date(Date.now() + 60_000).toISOString();
    const out = join(env.dataDir, 'archive');
    const exported = await qtsp([
      ...['evidence', 'export', '--from', from, '--to', to, '--out', out],
      ...['--data-dir', env.dataDir, '--publication-url', env.qtsp.publicationUrl],
    ]);
    assert.equal(exported.code, 0, exported.stdout + exported.stderr);

    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8')) as {
      format: string;
      signings: number;
      files: { path: string; sha256: string; bytes: number }[];
    };
    assert.equal(manifest.format, 'qtsp-evidence-archive/1');
    for (const f of manifest.files) {
      const bytes = readFileSync(join(out, f.path));
      assert.equal(createHash('sha256').update(bytes).digest('hex'), f.sha256, f.path);
      assert.equal(bytes.length, f.bytes);
    }
    const [stored] = await env.qtsp.deps.store.getTransaction(signed.txn);
    assert.ok(stored);
    const dir = manifest.files.find((f) => f.path.endsWith(`${stored.certificateSerialHex}/introspection.jwt`));
    assert.ok(dir, 'the signing is in the archive');
    const signingDir = join(out, dir.path, '..');
    assert.equal(readFileSync(join(signingDir, 'introspection.jwt'), 'utf8'), stored.introspectionJwt);
    const pem = readFileSync(join(signingDir, 'certificate.pem'), 'utf8');
    assert.equal(new X509Certificate(pem).serialNumber.toLowerCase(), stored.certificateSerialHex);
    assert.deepEqual(
      readFileSync(join(signingDir, 'signature-1.p7s')),
      Buffer.from(signed.body.SignatureObject![0]!, 'base64'),
      'the kept signature, as returned',
    );
    assert.ok(manifest.signings >= 1 && manifest.files.some((f) => f.path === 'ca/root.pem'));

    // the manifest's time-stamp verifies with openssl against our root
    const verified = await run('openssl', [
      ...['ts', '-verify', '-data', join(out, 'manifest.json'), '-in', join(out, 'manifest.tsr')],
      ...['-CAfile', join(out, 'ca', 'root.pem')],
    ]);
    assert.ok(verified.ok, verified.output);
    assert.match(verified.output, /Verification: OK/);
    // our TSA certificate the records' tokens name, issued by our root
    const tsa = await run('openssl', [
      'verify',
      '-CAfile',
      join(out, 'ca', 'root.pem'),
      join(out, 'ca', 'our-tsa-1.pem'),
    ]);
    assert.ok(tsa.ok, tsa.output);

    const again = await qtsp([
      ...['evidence', 'export', '--from', from, '--to', to, '--out', out],
      ...['--data-dir', env.dataDir, '--publication-url', env.qtsp.publicationUrl],
    ]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /is not empty: an archive goes into a new directory/);
    const usage = await qtsp(['evidence', 'export', '--from', to, '--to', from, '--out', out]);
    assert.equal(usage.code, 2);
  });
});
