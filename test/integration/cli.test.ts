/**
 * The `qtsp` command as a user runs it (bin/qtsp.js in a child process): pki init/root, a configuration
 * error naming the setting, and `qtsp sign` against a running sandbox, checked with openssl.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { opensslCmsVerify, run } from '../helpers/openssl.ts';
import { xmlsecVerify } from '../helpers/xmlsec.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';
import { createHash } from 'node:crypto';
import { pino } from 'pino';
import { startEcosystemWithSandboxProcess } from '../../src/cli/ecosystem.ts';
import { signaturesOf, signThroughSandbox } from '../helpers/signing.ts';

const FIXTURES = fileURLToPath(new URL('../../fixtures/documents/', import.meta.url));

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
      const chain = await run('openssl', [
        'verify',
        '-CAfile',
        join(dir, 'root.pem'),
        join(dir, 'pki', 'issuing-ca.pem'),
      ]);
      assert.ok(chain.ok, chain.output);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('ceremony keeps the root key in the ceremony directory only; --renew-crl signs a newer root CRL', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qtsp-cli-'));
    const data = join(dir, 'data');
    const offline = join(dir, 'offline');
    try {
      const made = await qtsp(['pki', 'ceremony', '--data-dir', data, '--ceremony-dir', offline]);
      assert.equal(made.code, 0, made.stderr);
      const rootCert = join(data, 'pki', 'root-ca.pem');
      const rootPublic = (await run('openssl', ['x509', '-in', rootCert, '-noout', '-pubkey'])).output;
      const publicOf = async (keyFile: string) => (await run('openssl', ['pkey', '-in', keyFile, '-pubout'])).output;
      assert.equal(await publicOf(join(offline, 'root-ca.key.pem')), rootPublic);
      for (const name of readdirSync(join(data, 'pki')).filter((n) => n.endsWith('.key.pem')))
        assert.notEqual(await publicOf(join(data, 'pki', name)), rootPublic, `${name} holds the root key`);
      const crl = join(data, 'pki', 'root-ca.crl');
      const lastUpdate = async () => {
        const text = await run('openssl', [
          'crl',
          '-inform',
          'DER',
          '-in',
          crl,
          '-CAfile',
          rootCert,
          '-noout',
          '-lastupdate',
        ]);
        assert.match(text.output, /verify OK/);
        return new Date(/lastUpdate=(.*)/.exec(text.output)![1]!).getTime();
      };
      const before = await lastUpdate();
      await sleep(1100); // CRL times have whole seconds
      const lost = await qtsp(['pki', 'ceremony', '--renew-crl', '--data-dir', data]);
      assert.equal(lost.code, 1);
      assert.match(lost.stderr, /root CA key is not in .*--ceremony-dir/);
      const renewed = await qtsp(['pki', 'ceremony', '--renew-crl', '--data-dir', data, '--ceremony-dir', offline]);
      assert.equal(renewed.code, 0, renewed.stderr);
      assert.ok((await lastUpdate()) > before, 'the renewed CRL is not newer');
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
    rmSync(`${file}.xml`, { force: true });
    // XAdES is offered with SHA-2 digests only (xmlsec1 has no SHA-3): a combination we refuse
    const res = await qtsp(['sign', file, '--format', 'X', '--hash-alg', 'sha3-256', '--data-dir', env.dataDir]);
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /HTTP 400 invalid_request signature_format X is offered with SHA-256/);
    assert.equal(existsSync(`${file}.xml`), false);
  });

  it('--hash B64 (repeatable) signs given digests: hash-1.p7s, hash-2.p7s in --out-dir, openssl verifies them against the documents', async () => {
    const docs = ['contract.txt', 'unicode.txt'].map((f) => readFileSync(join(work, f)));
    const hashes = docs.map((d) => createHash('sha256').update(d).digest('base64'));
    const out = mkdtempSync(join(work, 'hashes-'));
    const res = await qtsp([
      'sign',
      '--hash',
      hashes[0]!,
      '--hash',
      hashes[1]!,
      '--out-dir',
      out,
      '--data-dir',
      env.dataDir,
    ]);
    assert.equal(res.code, 0, res.stdout + res.stderr);
    assert.match(res.stdout, /2 given SHA-256 hash\(es\)/);
    assert.match(res.stdout, /signed 2 hash\(es\): .*hash-1\.p7s, .*hash-2\.p7s/);
    for (const [i, doc] of docs.entries()) {
      const ok = await opensslCmsVerify(readFileSync(join(out, `hash-${i + 1}.p7s`)), doc, env.rootCaFile);
      assert.ok(ok.ok, ok.output);
    }
  });

  it('--format X writes FILE.xml, which xmlsec1 verifies against the file', async () => {
    const file = join(work, 'contract.txt');
    const res = await qtsp(['sign', file, '--format', 'X', '--data-dir', env.dataDir]);
    assert.equal(res.code, 0, res.stdout + res.stderr);
    assert.match(res.stdout, /contract\.txt\.xml/);
    const ok = await xmlsecVerify(readFileSync(`${file}.xml`), readFileSync(file), {
      trustedPem: env.rootCaFile,
      untrustedPem: join(env.dataDir, 'pki', 'issuing-ca.pem'),
    });
    assert.ok(ok.ok, ok.output);
  });

  it('--sign-algo chooses the signer key (ecdsa-p384, rsa-pss), as openssl reads the certificate', async () => {
    const file = join(work, 'unicode.txt');
    for (const [algo, expected] of [
      ['ecdsa-p384', /Public-Key: \(384 bit\)[\s\S]*NIST CURVE: P-384/],
      ['rsa-pss', /Public-Key: \(3072 bit\)/],
    ] as const) {
      const res = await qtsp(['sign', file, '--sign-algo', algo, '--data-dir', env.dataDir]);
      assert.equal(res.code, 0, res.stdout + res.stderr);
      assert.ok((await opensslCmsVerify(readFileSync(`${file}.p7s`), readFileSync(file), env.rootCaFile)).ok);
      const certs = join(work, `${algo}.certs.pem`);
      assert.ok(
        (await run('openssl', ['pkcs7', '-inform', 'DER', '-in', `${file}.p7s`, '-print_certs', '-out', certs])).ok,
      );
      const text = await run('openssl', ['x509', '-in', certs, '-noout', '-text']);
      assert.match(text.output, expected);
      if (algo === 'rsa-pss')
        assert.match(
          (await run('openssl', ['cms', '-cmsout', '-print', '-inform', 'DER', '-in', `${file}.p7s`])).output,
          /rsassaPss/,
        );
    }
  });

  it('usage says how it finds the sandbox; a wrong data directory names --data-dir and QTSP_DATA_DIR', async () => {
    const help = await qtsp(['sign', '--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /--data-dir DIR[\s\S]*QTSP_DATA_DIR[\s\S]*endpoints\.json/);
    assert.match(help.stdout, /--sign-algo/);
    const nowhere = await qtsp(['sign', join(work, 'contract.txt'), '--data-dir', join(work, 'no-such-dir')]);
    assert.equal(nowhere.code, 2);
    assert.match(nowhere.stderr, /no sandbox found: cannot read .*endpoints\.json.*--data-dir DIR or QTSP_DATA_DIR/);
    const badHash = await qtsp(['sign', '--hash', 'AAAA', '--data-dir', env.dataDir]);
    assert.equal(badHash.code, 2);
    assert.match(badHash.stderr, /has 3 bytes; a SHA-256 digest has 32/);
    const both = await qtsp(['sign', join(work, 'contract.txt'), '--hash', 'AAAA', '--data-dir', env.dataDir]);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /give files or --hash, not both/);
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
      config: { dataDir, server: { port: 0, publicationPort: 0 }, ops: { port: 0 }, signer: { rsaPoolSize: 0 } },
      defaultMetrics: false,
      logger: pino({ level: 'silent' }),
    });
    try {
      const doc = readFileSync(join(FIXTURES, 'contract.txt'));
      const hash = createHash('sha256').update(doc).digest('base64');
      // signDoc where the AS sends the relying party: the QTSP of this ecosystem
      const [sig] = signaturesOf(await signThroughSandbox({ endpoints: eco.endpoints }, [hash]));
      assert.ok((await opensslCmsVerify(sig!, doc, join(dataDir, 'pki', 'root-ca.pem'))).ok);
    } finally {
      await eco.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
