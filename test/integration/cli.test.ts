/**
 * The `qtsp` command as a user runs it (bin/qtsp.js in a child process): pki init/root, a configuration
 * error naming the setting, and `qtsp sign` against a running sandbox, checked with openssl.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { opensslCmsVerify, run } from '../helpers/openssl.ts';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { pino } from 'pino';
import { startEcosystemWithSandboxProcess } from '../../src/cli/ecosystem.ts';
import { authorizeSigning, callSignDoc } from '../../src/rp/flow.ts';

const QTSP = fileURLToPath(new URL('../../bin/qtsp.js', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../../fixtures/documents/', import.meta.url));

function qtsp(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [QTSP, ...args], { env: { ...process.env, ...env }, encoding: 'utf8' }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('qtsp pki', () => {
  it('init creates the CA material once, root prints a certificate openssl reads', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qtsp-cli-'));
    try {
      const first = await qtsp(['pki', 'init', '--data-dir', dir]);
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, /created CA material/);
      const again = await qtsp(['pki', 'init', '--data-dir', dir]);
      assert.match(again.stdout, /exists/);
      const root = await qtsp(['pki', 'root', '--data-dir', dir]);
      writeFileSync(join(dir, 'root.pem'), root.stdout);
      const text = await run('openssl', ['x509', '-in', join(dir, 'root.pem'), '-noout', '-subject']);
      assert.match(text.output, /qtsp Sandbox Root CA/);
      const chain = await run('openssl', ['verify', '-CAfile', join(dir, 'root.pem'), join(dir, 'pki', 'issuing-ca.pem')]);
      assert.ok(chain.ok, chain.output);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a bad setting stops the start with a message naming it', async () => {
    const res = await qtsp(['serve'], { QTSP_SERVER_PORT: 'eighty' });
    assert.equal(res.code, 1);
    assert.match(res.stderr, /server\.port \(QTSP_SERVER_PORT\)/);
  });
});

describe('qtsp sign', () => {
  let env: TestEnvironment;
  let work: string;
  before(async () => {
    env = await startEnvironment();
    work = mkdtempSync(join(tmpdir(), 'qtsp-sign-'));
    for (const f of ['contract.txt', 'unicode.txt']) copyFileSync(join(FIXTURES, f), join(work, f));
  });
  after(async () => {
    await env.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('signs files through the whole flow and writes .p7s files openssl accepts', async () => {
    const files = ['contract.txt', 'unicode.txt'].map((f) => join(work, f));
    const res = await qtsp(['sign', ...files, '--data-dir', env.dataDir]);
    assert.equal(res.code, 0, res.stdout + res.stderr);
    assert.match(res.stdout, /PAR/);
    assert.match(res.stdout, /token/);
    assert.match(res.stdout, /signed 2 file\(s\): .*contract\.txt\.p7s, .*unicode\.txt\.p7s \(txn [\w-]+\)/);
    for (const f of files) {
      const ok = await opensslCmsVerify(readFileSync(`${f}.p7s`), readFileSync(f), env.rootCaFile);
      assert.ok(ok.ok, ok.output);
    }
  });

  it('with SHA3-512', async () => {
    const file = join(work, 'contract.txt');
    const res = await qtsp(['sign', file, '--hash-alg', 'sha3-512', '--data-dir', env.dataDir]);
    assert.equal(res.code, 0, res.stdout + res.stderr);
    assert.ok((await opensslCmsVerify(readFileSync(`${file}.p7s`), readFileSync(file), env.rootCaFile)).ok);
  });

  it('exits non-zero and writes nothing when signDoc refuses', async () => {
    const file = join(work, 'unicode.txt');
    rmSync(`${file}.p7s`, { force: true });
    // XAdES is offered with SHA-2 digests only (xmlsec1 has no SHA-3): a combination we refuse
    const res = await qtsp(['sign', file, '--format', 'X', '--hash-alg', 'sha3-256', '--data-dir', env.dataDir]);
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /HTTP 400 invalid_request signature_format X is offered with SHA-256/);
    assert.equal(existsSync(`${file}.p7s`), false);
  });

  it('exits non-zero on an unknown hash algorithm', async () => {
    const res = await qtsp(['sign', join(work, 'contract.txt'), '--hash-alg', 'md5', '--data-dir', env.dataDir]);
    assert.equal(res.code, 2);
  });
});

describe('qtsp sandbox (the sandbox as a separate program)', () => {
  it('serves the whole flow from a child process; the QTSP signs against it', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'qtsp-sandbox-process-'));
    const eco = await startEcosystemWithSandboxProcess({
      config: { dataDir, server: { port: 0, publicationPort: 0 }, signer: { rsaPoolSize: 0 } },
      defaultMetrics: false,
      logger: pino({ level: 'silent' }),
    });
    try {
      const doc = readFileSync(join(FIXTURES, 'contract.txt'));
      const hash = createHash('sha256').update(doc).digest('base64');
      const auth = await authorizeSigning(eco.endpoints, { documentDigests: [{ hash, label: 'contract' }], hashAlgorithmOID: '2.16.840.1.101.3.4.2.1' });
      const res = await callSignDoc(auth.qtsp.signDoc, eco.endpoints, {
        SAD: auth.accessToken,
        credentialID: 'qes_eidas',
        documentDigests: { hashes: [hash], hashAlgorithmOID: '2.16.840.1.101.3.4.2.1' },
        profile: 'http://uri.etsi.org/19432/v1.1.1#/creationprofile#',
        signature_format: 'C',
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const sig = Buffer.from((res.body as { SignatureObject: string[] }).SignatureObject[0]!, 'base64');
      assert.ok((await opensslCmsVerify(sig, doc, join(dataDir, 'pki', 'root-ca.pem'))).ok);
    } finally {
      await eco.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
