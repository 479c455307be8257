/**
 * Issuing CA rollover while the service runs (real processes: the ecosystem in one, `qtsp pki ceremony` in
 * another): a CAdES B-LT signature before; `qtsp pki ceremony --rollover-issuing-ca`; the running instance
 * picks it up without a restart (its metrics and `qtsp pki status` list both CAs) and a new signature's signer
 * certificate comes from the new CA (`openssl verify` with the root and the new CA); both signatures pass
 * `openssl cms -verify -cades`; our OCSP responder answers "good" for a signer certificate of each CA, each under
 * its own CA's responder (`openssl ocsp`). `--destroy-issuing-ca` refuses while the old CA's certificates are
 * valid; a day on (libfaketime) it destroys the key, and OCSP and the CRL of the old CA go on without it. The
 * key is checked gone from outside: its key file, or in the token with pkcs11-tool, where the new CA's key is
 * sensitive and never extractable.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pkiPaths } from '../../src/ca/material.ts';
import { authorizeSigning, callSignDoc, signDocRequest } from '../../src/rp/flow.ts';
import { SHA256_OID, TEST_KEY_CUSTODY } from '../helpers/environment.ts';
import { cmsVerifyArgs } from '../helpers/openssl.ts';
import { MovedClock, startClockEcosystem, type MovedEcosystem } from '../helpers/moved-clock.ts';
import { cmsParts } from '../helpers/pki-oracles.ts';
import { openSqliteStore, sqlitePath } from '../../src/store/open.ts';

const QTSP = fileURLToPath(new URL('../../bin/qtsp.js', import.meta.url));
const IN_TOKEN = TEST_KEY_CUSTODY === 'softhsm';

interface Signed {
  readonly signature: Buffer;
  readonly document: Buffer;
  /** the signer certificate, PEM */
  readonly signer: string;
}

describe(`issuing CA rollover while the service runs (${TEST_KEY_CUSTODY} keys)`, () => {
  let dir: string;
  let clock: MovedClock;
  let eco: MovedEcosystem;
  let before_: Signed;
  let after_: Signed;
  let oldCa: string;
  let oldTag: string;
  const data = () => join(dir, 'data');
  const file = (name: string, bytes: Uint8Array | string) => {
    const path = join(dir, name);
    writeFileSync(path, bytes);
    return path;
  };
  /** a command on the moved clock, with keys.provider as the ecosystem has it */
  const run = (cmd: string, args: readonly string[]) =>
    new Promise<{ code: number; output: string }>((resolve) => {
      const env = { ...process.env, ...clock.env(), QTSP_KEYS_PROVIDER: TEST_KEY_CUSTODY, QTSP_LOG_LEVEL: 'silent' };
      execFile(cmd, args, { encoding: 'utf8', env }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: `${stdout}${stderr}` }),
      );
    });
  const qtsp = (...args: string[]) => run(process.execPath, [QTSP, 'pki', ...args, '--data-dir', data()]);
  /** pkcs11-tool's object list of the sandbox's token */
  const tokenObjects = () => {
    const softhsm = join(data(), 'softhsm');
    return execFileSync(
      'pkcs11-tool',
      [
        '--module',
        '/usr/lib/softhsm/libsofthsm2.so',
        '--token-label',
        'qtsp-sandbox',
        '--login',
        '--pin',
        readFileSync(join(softhsm, 'user.pin'), 'utf8').trim(),
        '--list-objects',
      ],
      { env: { ...process.env, SOFTHSM2_CONF: join(softhsm, 'softhsm2.conf') }, encoding: 'utf8' },
    )
      .split(/\n(?=\S)/)
      .filter((o) => /Object;/.test(o));
  };
  const privateKeyLabelled = (label: string) =>
    tokenObjects().find((o) => o.startsWith('Private Key Object') && new RegExp(`label:\\s+${label}\\n`).test(o));

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'qtsp-rollover-'));
    clock = new MovedClock(dir);
    eco = await startClockEcosystem(clock, dir);
  });
  after(async () => {
    await eco?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const sign = async (text: string, level = 'AdES-B-LT'): Promise<Signed> => {
    const document = Buffer.from(text);
    const hash = createHash('sha256').update(document).digest('base64');
    const auth = await authorizeSigning(eco.endpoints, {
      documentDigests: [{ hash, label: text }],
      hashAlgorithmOID: SHA256_OID,
    });
    const res = await callSignDoc(
      eco.signDocUrl,
      eco.endpoints,
      signDocRequest(auth, { hashes: [hash], hashAlgorithmOID: SHA256_OID, format: 'C', level }),
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const signature = Buffer.from((res.body as { SignatureObject: string[] }).SignatureObject[0]!, 'base64');
    const signer = (await cmsParts(signature)).certificates
      .map((der) => new X509Certificate(der))
      .find((c) => !c.ca && c.issuer.includes('Qualified Signing CA'))!;
    return { signature, document, signer: signer.toString() };
  };
  const cmsVerify = (s: Signed) =>
    run('openssl', cmsVerifyArgs(file('sig.p7s', s.signature), file('doc', s.document), pkiPaths(data()).rootCert));
  const ocsp = (issuerFile: string, certPem: string) =>
    run('openssl', [
      'ocsp',
      '-resp_text',
      '-issuer',
      issuerFile,
      '-cert',
      file('cert.pem', certPem),
      '-url',
      `${eco.publicationUrl}/ocsp`,
      '-CAfile',
      pkiPaths(data()).rootCert,
    ]);
  const metrics = async () => (await fetch(`${eco.opsUrl}/metrics`)).text();

  it('before the rollover: a CAdES B-LT signature under the first issuing CA', async () => {
    oldCa = file('old-ca.pem', readFileSync(pkiPaths(data()).issuingCert, 'utf8'));
    before_ = await sign('signed before the rollover');
    const verified = await run('openssl', [
      'verify',
      '-CAfile',
      pkiPaths(data()).rootCert,
      '-untrusted',
      oldCa,
      file('before.pem', before_.signer),
    ]);
    assert.equal(verified.code, 0, verified.output);
    const ok = await cmsVerify(before_);
    assert.equal(ok.code, 0, ok.output);
  });

  it('--rollover-issuing-ca: a new CA; the running instance lists both CAs without a restart', async () => {
    const plan = await qtsp('ceremony', '--rollover-issuing-ca', '--dry-run');
    assert.equal(plan.code, 0, plan.output);
    assert.equal(
      readFileSync(pkiPaths(data()).issuingCert, 'utf8'),
      readFileSync(oldCa, 'utf8'),
      'a dry run rolled over',
    );
    const rolled = await qtsp('ceremony', '--rollover-issuing-ca');
    assert.equal(rolled.code, 0, rolled.output);
    const tag = /retired ([0-9a-f]{16});/.exec(rolled.output);
    assert.ok(tag, rolled.output);
    oldTag = tag[1]!;
    assert.notEqual(readFileSync(pkiPaths(data()).issuingCert, 'utf8'), readFileSync(oldCa, 'utf8'));
    const deadline = Date.now() + 120_000;
    while (!(await metrics()).includes(`object="issuing-ca-${oldTag}"`)) {
      assert.ok(Date.now() < deadline, 'the instance never listed the retired CA in its metrics');
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    assert.match(await metrics(), /qtsp_pki_end_timestamp_seconds\{[^}]*object="issuing-ca"/);
    const status = await qtsp('status');
    assert.match(status.output, new RegExp(`^issuing-ca-${oldTag} `, 'm'));
    assert.match(status.output, /^issuing-ca /m);
    assert.match(status.output, new RegExp(`^ocsp-responder-${oldTag} `, 'm'));
    if (IN_TOKEN) {
      const newKey = privateKeyLabelled('qtsp-issuing-ca');
      assert.ok(newKey, 'no current issuing CA key in the token');
      assert.match(newKey, /Access:\s+sensitive, always sensitive, never extractable/);
      assert.ok(privateKeyLabelled(`qtsp-issuing-ca\\.${oldTag}`), 'the retired CA key is not kept in the token');
    }
  });

  it('after the rollover: the signer certificate comes from the new CA; both signatures pass openssl cms', async () => {
    after_ = await sign('signed after the rollover');
    const p = pkiPaths(data());
    const chain = await run('openssl', [
      'verify',
      '-CAfile',
      p.rootCert,
      '-untrusted',
      p.issuingCert,
      file('after.pem', after_.signer),
    ]);
    assert.equal(chain.code, 0, chain.output);
    const notOld = await run('openssl', [
      'verify',
      '-CAfile',
      p.rootCert,
      '-untrusted',
      oldCa,
      file('after.pem', after_.signer),
    ]);
    assert.notEqual(notOld.code, 0, 'the new signer certificate verifies under the old CA');
    const archived = await sign('signed at B-LTA after the rollover', 'AdES-B-LTA');
    assert.equal(
      new X509Certificate(archived.signer).issuer,
      new X509Certificate(readFileSync(p.issuingCert)).subject,
      'the B-LTA signer certificate is not from the new CA',
    );
    for (const s of [before_, after_, archived]) {
      const ok = await cmsVerify(s);
      assert.equal(ok.code, 0, ok.output);
    }
  });

  it("each CA's certificate and CRL at the paths its certificates point at (AIA caIssuers, CRL DP)", async () => {
    const p = pkiPaths(data());
    for (const [signer, caFile] of [
      [before_.signer, oldCa],
      [after_.signer, p.issuingCert],
    ] as const) {
      const text = (await run('openssl', ['x509', '-in', file('s.pem', signer), '-noout', '-text'])).output;
      const caIssuers = /CA Issuers - URI:(\S+)/.exec(text)![1]!;
      const crlUrl = /Full Name:\s+URI:(\S+)/.exec(text)![1]!;
      const path = (url: string) => `${eco.publicationUrl}${new URL(url).pathname}`;
      const ca = Buffer.from(await (await fetch(path(caIssuers))).arrayBuffer());
      assert.ok(ca.equals(new X509Certificate(readFileSync(caFile)).raw), `${caIssuers} is not the signer's CA`);
      const crl = file('ca.crl', Buffer.from(await (await fetch(path(crlUrl))).arrayBuffer()));
      const verified = await run('openssl', ['crl', '-inform', 'DER', '-in', crl, '-CAfile', caFile, '-noout']);
      assert.match(verified.output, /verify OK/, `${crlUrl}: ${verified.output}`);
    }
    for (const path of ['/ca/issuing-0000000000000000.crt', '/crl/issuing-..%2Froot.crl']) {
      const res = await fetch(`${eco.publicationUrl}${path}`);
      assert.equal(res.status, 404, path);
      assert.equal(((await res.json()) as { error: string }).error, 'not_found');
    }
  });

  it("OCSP answers good for a signer certificate of each CA, each under its own CA's responder", async () => {
    const old = await ocsp(oldCa, before_.signer);
    assert.match(old.output, /Response verify OK/);
    assert.match(old.output, /cert\.pem: good/);
    const current = await ocsp(pkiPaths(data()).issuingCert, after_.signer);
    assert.match(current.output, /Response verify OK/);
    assert.match(current.output, /cert\.pem: good/);
  });

  it('--destroy-issuing-ca refuses while the old CA is needed; a day on it destroys the key', async () => {
    const refused = await qtsp('ceremony', '--destroy-issuing-ca', oldTag);
    assert.equal(refused.code, 1, refused.output);
    assert.match(refused.output, /still needed/);
    const retiredKey = join(pkiPaths(data()).dir, 'retired-issuing-ca', oldTag, 'issuing-ca.key.pem');
    if (IN_TOKEN) assert.ok(privateKeyLabelled(`qtsp-issuing-ca\\.${oldTag}`));
    else assert.ok(existsSync(retiredKey));

    clock.set(1); // past the end of every certificate the old CA issued
    const destroyed = await qtsp('ceremony', '--destroy-issuing-ca', oldTag);
    assert.equal(destroyed.code, 0, destroyed.output);
    if (IN_TOKEN) assert.equal(privateKeyLabelled(`qtsp-issuing-ca\\.${oldTag}`), undefined, 'the key is in the token');
    else assert.equal(existsSync(retiredKey), false, 'the key file is still there');
    // the instance reloads: OCSP for the old CA's certificate goes on under the responder certified before
    const caEnd = new X509Certificate(readFileSync(oldCa)).validTo; // e.g. "Nov 27 01:50:00 2036 GMT"
    const deadline = Date.now() + 120_000;
    for (;;) {
      const old = await ocsp(oldCa, before_.signer);
      const verified = /Response verify OK/.test(old.output) && /cert\.pem: good/.test(old.output);
      // the responder certificate in the answer is the one certified until the old CA ends
      if (verified && old.output.includes(`Not After : ${caEnd}`)) break;
      assert.ok(Date.now() < deadline, `no OCSP answer under the last responder certificate: ${old.output}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const crl = Buffer.from(await (await fetch(`${eco.publicationUrl}/crl/issuing.crl`)).arrayBuffer());
    const verified = await run('openssl', [
      'crl',
      '-inform',
      'DER',
      '-in',
      file('old.crl', crl),
      '-CAfile',
      oldCa,
      '-noout',
    ]);
    assert.equal(verified.code, 0, verified.output);
    assert.match(verified.output, /verify OK/);
  });

  it('the rollover and the destruction are in the journal', async () => {
    const store = await openSqliteStore(sqlitePath(data()));
    try {
      const entries = await store.journal.entries(0, await store.journal.horizon());
      const bodies = entries.map((e) => JSON.parse(e.body.toString('utf8')) as { kind: string; data: never });
      const data = (kind: string) => bodies.find((b) => b.kind === kind)?.data as Record<string, unknown> | undefined;
      assert.equal(data('pki.issuing_ca_rollover')?.['retired'], oldTag, bodies.map((b) => b.kind).join(', '));
      assert.equal(data('pki.issuing_ca_key_destroyed')?.['tag'], oldTag);
    } finally {
      await store.close();
    }
  });
});
