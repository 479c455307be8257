/**
 * A third-party relying party registered at the sandbox from a file: its own self-signed
 * TLS client certificate and key, made with openssl (not by us), its own redirect URIs, its own client
 * state and allowed claims; the whole flow (service configuration, metadata, PAR, authorization, token,
 * signDoc) runs with it, and openssl verifies the signature. Also `qtsp sandbox --clients FILE --client JSON`
 * as a separate program, and the registration errors.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { prepare, startSandboxProcess } from '../../src/cli/ecosystem.ts';
import { authorizeSigning, type RpFlowError, type RpEndpoints } from '../../src/rp/flow.ts';
import { type ClientFileError, readClientFile, parseClientOption } from '../../src/sandbox/index.ts';
import { startEnvironment, SHA256_OID, type TestEnvironment } from '../helpers/environment.ts';
import { opensslCmsVerify, opensslNewKey, run } from '../helpers/openssl.ts';
import { signThroughSandbox } from '../helpers/signing.ts';

const DOC = Buffer.from('a contract between a third-party RP and its customer\n');
const HASH = createHash('sha256').update(DOC).digest('base64');

/** A self-signed EC client certificate and key made by openssl, as an RP operator would make them. */
async function opensslClientCertificate(dir: string, name: string): Promise<{ certFile: string; keyFile: string }> {
  const certFile = join(dir, `${name}.pem`);
  const keyFile = join(dir, `${name}.key`);
  const made = await opensslNewKey({ keyFile, out: certFile, subject: `/CN=${name}`, days: 30 });
  assert.ok(made.ok, made.output);
  return { certFile, keyFile };
}

/** The hex SHA-256 fingerprint as `openssl x509 -fingerprint -sha256` prints it (AB:CD:...). */
async function opensslFingerprint(certFile: string): Promise<string> {
  const out = await run('openssl', ['x509', '-in', certFile, '-noout', '-fingerprint', '-sha256']);
  assert.ok(out.ok, out.output);
  return out.output.trim().split('=')[1]!;
}

function endpointsFor(env: { endpoints: RpEndpoints }, rp: RpEndpoints['rp']): RpEndpoints {
  return { ...env.endpoints, rp };
}

/** the whole flow as the relying party of `e`, signDoc where the AS sends it */
const signOnce = (e: RpEndpoints, claims?: Record<string, null>) =>
  signThroughSandbox({ endpoints: e }, [HASH], claims ? { claims } : {});

describe('a relying party registered from a file', () => {
  let work: string;
  let env: TestEnvironment;
  let byFile: { certFile: string; keyFile: string };
  let byFingerprint: { certFile: string; keyFile: string };

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'qtsp-rp-registration-'));
    byFile = await opensslClientCertificate(work, 'shop-rp');
    byFingerprint = await opensslClientCertificate(work, 'bank-app-rp');
    writeFileSync(
      join(work, 'clients.yaml'),
      [
        'clients:',
        '  - client_id: shop-rp',
        '    redirect_uris: [https://shop.example/signing/callback, http://127.0.0.1:8000/callback]',
        '    tls_client_certificate: ./shop-rp.pem   # relative to this file',
        '    allowed_claims_qes: [given_name, family_name]',
        '  - client_id: bank-app-rp',
        '    redirect_uris: [com.example.bankapp:/oauth/callback]',
        `    x5t#S256: "${await opensslFingerprint(byFingerprint.certFile)}"`,
        '    client_state: demo',
        '',
      ].join('\n'),
    );
    env = await startEnvironment({}, { clients: readClientFile(join(work, 'clients.yaml')) });
  });
  after(async () => {
    await env?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('runs the whole flow with its own certificate and its second redirect URI; openssl verifies the signature', async () => {
    const e = endpointsFor(env, { clientId: 'shop-rp', ...byFile, redirectUri: 'http://127.0.0.1:8000/callback' });
    const res = await signOnce(e, { given_name: null });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const signature = Buffer.from((res.body as { SignatureObject: string[] }).SignatureObject[0]!, 'base64');
    const verified = await opensslCmsVerify(signature, DOC, env.rootCaFile);
    assert.ok(verified.ok, verified.output);
  });

  it('a client registered by its x5t#S256 fingerprint (hex, as openssl prints it) runs the flow too (state demo)', async () => {
    const e = endpointsFor(env, {
      clientId: 'bank-app-rp',
      ...byFingerprint,
      redirectUri: 'com.example.bankapp:/oauth/callback',
    });
    const res = await signOnce(e);
    assert.equal(res.status, 200, JSON.stringify(res.body));
  });

  it("is held to its registration: other redirect URI, claim not allowed, someone else's certificate", async () => {
    const unregistered = endpointsFor(env, {
      clientId: 'shop-rp',
      ...byFile,
      redirectUri: 'https://shop.example/other',
    });
    await assert.rejects(
      signOnce(unregistered),
      (err: RpFlowError) =>
        err.step === 'PAR' && err.status === 400 && /redirect_uri is not registered/.test(err.message),
    );
    // allowed_claims_qes lists given_name and family_name only: birthdate is not allowed (spec 7.4)
    const e = endpointsFor(env, {
      clientId: 'shop-rp',
      ...byFile,
      redirectUri: 'https://shop.example/signing/callback',
    });
    await assert.rejects(
      signOnce(e, { birthdate: null }),
      (err: RpFlowError) => err.step === 'PAR' && err.error === 'unable_to_meet_service_requirements',
    );
    // the default RP's certificate with shop-rp's client_id: mTLS client authentication fails (spec 5.1)
    const impostor = endpointsFor(env, {
      ...env.endpoints.rp,
      clientId: 'shop-rp',
      redirectUri: 'https://shop.example/signing/callback',
    });
    await assert.rejects(
      signOnce(impostor),
      (err: RpFlowError) => err.step === 'PAR' && err.status === 401 && err.error === 'invalid_client',
    );
    // and the default RP cannot use shop-rp's redirect URI
    const other = endpointsFor(env, { ...env.endpoints.rp, redirectUri: 'https://shop.example/signing/callback' });
    await assert.rejects(
      signOnce(other),
      (err: RpFlowError) => err.step === 'PAR' && /redirect_uri is not registered/.test(err.message),
    );
  });

  it('endpoints.json lists what the platform knows of every RP, with the qtsp_id', () => {
    const written = JSON.parse(readFileSync(join(env.dataDir, 'sandbox', 'endpoints.json'), 'utf8')) as {
      qtspId: string;
      clients: { client_id: string; client_state: string; redirect_uris: string[] }[];
    };
    assert.equal(written.qtspId, env.config.qtspId);
    assert.deepEqual(
      written.clients.map((c) => [c.client_id, c.client_state, c.redirect_uris.length]),
      [
        ['sandbox-rp', 'active', 1],
        ['shop-rp', 'active', 2],
        ['bank-app-rp', 'demo', 1],
      ],
    );
  });
});

describe('qtsp sandbox --clients FILE --client JSON (a separate program)', () => {
  it('registers both and serves the flow to the client given on the command line', async () => {
    const work = mkdtempSync(join(tmpdir(), 'qtsp-rp-registration-cli-'));
    const dataDir = join(work, 'data');
    let stop: (() => Promise<void>) | undefined;
    try {
      const fileRp = await opensslClientCertificate(work, 'file-rp');
      const optionRp = await opensslClientCertificate(work, 'option-rp');
      const clientsFile = join(work, 'clients.json');
      writeFileSync(
        clientsFile,
        JSON.stringify([
          {
            client_id: 'file-rp',
            redirect_uris: ['https://file-rp.example/cb'],
            tls_client_certificate: fileRp.certFile,
          },
        ]),
      );
      const option = JSON.stringify({
        client_id: 'option-rp',
        redirect_uris: ['https://option-rp.example/cb'],
        tls_client_certificate: optionRp.certFile,
      });
      const { base, signDocUrl } = await prepare({
        config: { dataDir, server: { port: 0, publicationPort: 0 } },
        logger: pino({ level: 'silent' }),
      });
      const child = await startSandboxProcess(base, signDocUrl, ['--clients', clientsFile, '--client', option]);
      stop = child.stop;
      for (const [clientId, files, redirectUri] of [
        ['option-rp', optionRp, 'https://option-rp.example/cb'],
        ['file-rp', fileRp, 'https://file-rp.example/cb'],
      ] as const) {
        // the QTSP is not running here: the flow up to the access token is the sandbox's part
        const auth = await authorizeSigning(
          { ...child.info.endpoints, rp: { clientId, ...files, redirectUri } },
          { documentDigests: [{ hash: HASH, label: 'contract' }], hashAlgorithmOID: SHA256_OID },
        );
        assert.ok(auth.accessToken.split('.').length === 3);
      }
    } finally {
      await stop?.();
      rmSync(work, { recursive: true, force: true });
    }
  });
});

describe('registration errors name the entry and the field', () => {
  it('refuses what the platform could not serve', () => {
    const dir = mkdtempSync(join(tmpdir(), 'qtsp-rp-registration-bad-'));
    try {
      const bad = (entry: unknown) => {
        const file = join(dir, 'clients.yaml');
        writeFileSync(file, JSON.stringify({ clients: [entry] }));
        return () => readClientFile(file);
      };
      const fp = 'A'.repeat(43);
      assert.throws(
        bad({ client_id: 'x', redirect_uris: ['https://x.example/cb#frag'], 'x5t#S256': fp }),
        (e: ClientFileError) =>
          /clients\[0\]\.redirect_uris\.0: must be an absolute URI without fragment/.test(e.message),
      );
      assert.throws(
        bad({ client_id: 'x', redirect_uris: ['http://x.example/cb'], 'x5t#S256': fp }),
        /redirect_uris\.0/,
      );
      assert.throws(
        bad({ client_id: 'x', redirect_uris: ['https://x.example/cb'] }),
        /exactly one of tls_client_certificate/,
      );
      assert.throws(
        bad({ client_id: 'x', redirect_uris: ['https://x.example/cb'], 'x5t#S256': 'short' }),
        /x5t#S256: must be the base64url SHA-256/,
      );
      assert.throws(
        bad({ client_id: 'x', redirect_uris: ['https://x.example/cb'], 'x5t#S256': fp, client_state: 'paused' }),
        /client_state/,
      );
      assert.throws(
        bad({ client_id: 'x', redirect_uris: ['https://x.example/cb'], 'x5t#S256': fp, scope: 'openid' }),
        /scope|Unrecognized/i,
      );
      assert.throws(
        bad({ client_id: 'x', redirect_uris: ['https://x.example/cb'], tls_client_certificate: './missing.pem' }),
        /cannot read .*missing\.pem \(ENOENT\)/,
      );
      writeFileSync(
        join(dir, 'twice.json'),
        JSON.stringify([
          { client_id: 'x', redirect_uris: ['https://x.example/cb'], 'x5t#S256': fp },
          { client_id: 'x', redirect_uris: ['https://x.example/cb'], 'x5t#S256': fp },
        ]),
      );
      assert.throws(() => readClientFile(join(dir, 'twice.json')), /client_id x is registered twice/);
      assert.throws(() => parseClientOption('{client_id: x'), /--client is neither JSON nor YAML/);
      assert.throws(() => readClientFile(join(dir, 'absent.yaml')), /cannot read the clients file/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
