/**
 * The root's delegated OCSP responder (id-pkix-ocsp-nocheck: whoever holds its key vouches "good" for the
 * issuing CA) with keys.provider=pkcs11, on a SoftHSM2 token:
 * - the key ceremony (`qtsp pki init`) makes its key in the token like the other long-lived keys: no key file of
 *   it in the data directory; pkcs11-tool (OpenSC) lists it as sensitive and never extractable, and reads the
 *   public key the responder certificate certifies;
 * - a B-LT signature embeds OCSP responses for the issuing CA that `openssl ocsp` verifies against that
 *   certificate (and not against the issuing CA's responder), and `openssl cms -verify` passes;
 * - a data directory made before (the key a file, the token without it) is refused at start, naming
 *   `qtsp pki ceremony --migrate`; that command moves the key into the token, and B-LT signs again.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, createPrivateKey, createPublicKey, X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadCeremonyRoot } from '../../src/ca/init.ts';
import { custodyMarkerFile, pkiPaths } from '../../src/ca/material.ts';
import { ocspNoCheckExtension, PKIX_OID } from '../../src/ca/publication.ts';
import { ConfigError } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { generateKeyPair } from '../../src/crypto/keys.ts';
import { authorizeSigning, callSignDoc } from '../../src/rp/flow.ts';
import { startQtsp } from '../../src/service.ts';
import { toPem } from '../../src/util/base64.ts';
import { PROFILE, SHA256_OID, startEnvironment } from '../helpers/environment.ts';
import { endEntityCertificate } from '../helpers/certificates.ts';
import { opensslCmsVerify, run, scratch } from '../helpers/openssl.ts';
import { cmsParts, ocspOfRevocationChoice } from '../helpers/pki-oracles.ts';
import { createTestToken, SOFTHSM2_MODULE, type TestToken } from '../helpers/softhsm.ts';

const QTSP = fileURLToPath(new URL('../../bin/qtsp.js', import.meta.url));
/** the token label docs/operations.md names for the key */
const LABEL = 'qtsp-root-ocsp-responder';
const DOC = Buffer.from('a document whose B-LT signature carries the issuing CA status\n');
const HASH = createHash('sha256').update(DOC).digest('base64');

let token: TestToken;
let dataDir: string;
/** the configuration the first environment ran with: the refused start uses it again */
let firstConfig: Config;

const keys = () => ({
  provider: 'pkcs11',
  pkcs11Module: SOFTHSM2_MODULE,
  tokenLabel: token.label,
  pinFile: token.pinFile,
});

const spkiOfCertificate = (file: string) =>
  new X509Certificate(readFileSync(file)).publicKey.export({ type: 'spki', format: 'der' });

/** every file under `dir` holding a private key, with that key's SubjectPublicKeyInfo */
function privateKeysUnder(dir: string): { file: string; spki: Buffer }[] {
  return readdirSync(dir).flatMap((name) => {
    const file = join(dir, name);
    if (statSync(file).isDirectory()) return privateKeysUnder(file);
    try {
      const spki = createPublicKey(createPrivateKey(readFileSync(file))).export({ type: 'spki', format: 'der' });
      return [{ file, spki }];
    } catch {
      return [];
    }
  });
}

/** The responder's key: no file of it in the data directory; in the token, sensitive, never extractable. */
function assertKeyInToken(): void {
  const p = pkiPaths(dataDir);
  const responderSpki = spkiOfCertificate(p.rootOcspCert);
  assert.ok(!existsSync(p.rootOcspKey), `${p.rootOcspKey} exists`);
  const files = privateKeysUnder(dataDir).filter((k) => k.spki.equals(responderSpki));
  assert.deepEqual(files, [], "a file in the data directory holds the root's responder key");
  const objects = token.listObjects().split(/\n(?=\S)/);
  const privateKey = objects.find(
    (o) => o.startsWith('Private Key Object') && new RegExp(`label:\\s+${LABEL}\\n`).test(`${o}\n`),
  );
  assert.ok(privateKey, `pkcs11-tool lists no private key ${LABEL}:\n${objects.join('\n')}`);
  assert.match(privateKey, /Access:\s+sensitive, always sensitive, never extractable/);
  assert.deepEqual(token.readPublicKey(LABEL), responderSpki, 'the certificate certifies the key in the token');
}

/** A CAdES B-LT signature through signDoc: openssl cms -verify; its OCSP responses for the issuing CA. */
async function signBlt(env: Awaited<ReturnType<typeof startEnvironment>>): Promise<Buffer[]> {
  const auth = await authorizeSigning(env.endpoints, {
    documentDigests: [{ hash: HASH, label: 'document' }],
    hashAlgorithmOID: SHA256_OID,
  });
  const res = await callSignDoc(env.qtsp.signDocUrl, env.endpoints, {
    SAD: auth.accessToken,
    credentialID: 'qes_eidas',
    documentDigests: { hashes: [HASH], hashAlgorithmOID: SHA256_OID },
    profile: PROFILE,
    signature_format: 'C',
    conformance_level: 'AdES-B-LT',
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const cms = Buffer.from((res.body as { SignatureObject: string[] }).SignatureObject[0]!, 'base64');
  const verified = await opensslCmsVerify(cms, DOC, env.rootCaFile);
  assert.ok(verified.ok, verified.output);
  const responses = await Promise.all((await cmsParts(cms)).crls.map(ocspOfRevocationChoice));
  return responses.filter((r): r is Buffer => r !== undefined);
}

/**
 * `openssl ocsp` with `responder` as the one trusted responder certificate (-VAfile): the responses that
 * verify with it and say "good" for the issuing CA.
 */
async function goodForIssuingCa(responses: Buffer[], responder: string): Promise<Buffer[]> {
  const p = pkiPaths(dataDir);
  const s = scratch();
  try {
    const good: Buffer[] = [];
    for (const [i, response] of responses.entries()) {
      const r = await run('openssl', [
        'ocsp',
        '-respin',
        s.file(`response-${i}.der`, response),
        '-issuer',
        p.rootCert,
        '-cert',
        p.issuingCert,
        '-VAfile',
        responder,
        '-no_nonce',
      ]);
      if (r.ok && /Response verify OK/.test(r.output) && r.output.includes(`${p.issuingCert}: good`))
        good.push(response);
    }
    return good;
  } finally {
    s.remove();
  }
}

async function assertBltVouchedByRootResponder(env: Awaited<ReturnType<typeof startEnvironment>>): Promise<void> {
  const p = pkiPaths(dataDir);
  const responses = await signBlt(env);
  assert.equal((await goodForIssuingCa(responses, p.rootOcspCert)).length, 1, 'one good response for the issuing CA');
  // the check tells responders apart: the issuing CA's own responder did not sign it
  assert.deepEqual(await goodForIssuingCa(responses, p.ocspCert), []);
}

/**
 * The layout of a data directory made before the token held the root's responder key: the key a PKCS#8 file
 * certified by the root, the token without it, and the marker as it was then written (no list of keys).
 */
function asMadeBefore(): void {
  const p = pkiPaths(dataDir);
  if (token.listObjects().includes(LABEL)) token.deleteKeyPair(LABEL);
  const root = loadCeremonyRoot({ dataDir });
  const pair = generateKeyPair('P-256');
  const der = endEntityCertificate({
    commonName: 'qtsp Sandbox Root OCSP Responder',
    publicKey: pair.publicKey,
    issuer: root.issuer,
    validHours: 2 * 365 * 24,
    keyUsage: ['digitalSignature'],
    extKeyUsage: [PKIX_OID.ocspSigning],
    extra: [ocspNoCheckExtension()],
  });
  writeFileSync(p.rootOcspCert, toPem(der, 'CERTIFICATE'));
  writeFileSync(p.rootOcspKey, pair.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  const { keys: kind, token: where, createdAt } = JSON.parse(readFileSync(custodyMarkerFile(dataDir), 'utf8'));
  writeFileSync(custodyMarkerFile(dataDir), `${JSON.stringify({ keys: kind, token: where, createdAt }, null, 2)}\n`);
}

/** `qtsp pki ceremony ARGS` on the data directory with the token's keys settings */
function qtspPki(args: string[]): Promise<{ code: number; output: string }> {
  const env = {
    ...process.env,
    QTSP_DATA_DIR: dataDir,
    QTSP_KEYS_PROVIDER: 'pkcs11',
    QTSP_KEYS_PKCS11_MODULE: SOFTHSM2_MODULE,
    QTSP_KEYS_TOKEN_LABEL: token.label,
    QTSP_KEYS_PIN_FILE: token.pinFile,
  };
  return new Promise((resolve) => {
    execFile(process.execPath, [QTSP, 'pki', ...args], { env, encoding: 'utf8' }, (err, stdout, stderr) =>
      resolve({ code: err ? Number(err.code ?? 1) : 0, output: `${stdout}${stderr}` }),
    );
  });
}

/** Why `qtsp serve` would not start on `config`; a start that was not refused is stopped again and fails the test. */
async function startRefusal(config: Config): Promise<unknown> {
  const started = await startQtsp(config, { defaultMetrics: false }).catch((err: unknown) => ({ refused: err }));
  if ('refused' in started) return started.refused;
  await started.close();
  return assert.fail('the start was not refused');
}

before(() => {
  token = createTestToken('root-responder');
  dataDir = mkdtempSync(join(tmpdir(), 'qtsp-root-responder-'));
});
after(() => {
  rmSync(dataDir, { recursive: true, force: true });
  token?.close();
});

describe("the root's OCSP responder key with keys.provider=pkcs11", { timeout: 240_000 }, () => {
  it('is made in the token at the key ceremony, and signs the B-LT status of the issuing CA from there', async () => {
    // the environment runs the key ceremony first (keyCeremony: what `qtsp pki init` runs)
    const env = await startEnvironment({ dataDir, keys: keys() });
    try {
      firstConfig = env.config;
      assertKeyInToken();
      await assertBltVouchedByRootResponder(env);
    } finally {
      await env.close();
    }
  });

  it('a data directory made before is refused at start; `qtsp pki ceremony --migrate` moves the key', async () => {
    const p = pkiPaths(dataDir);
    asMadeBefore();
    const refusal = await startRefusal(firstConfig);
    assert.ok(refusal instanceof ConfigError, String(refusal));
    assert.ok(refusal.message.includes(p.rootOcspKey), refusal.message);
    assert.ok(refusal.message.includes('qtsp pki ceremony --migrate'), refusal.message);
    const software = spkiOfCertificate(p.rootOcspCert);
    const migrated = await qtspPki(['ceremony', '--migrate']);
    assert.equal(migrated.code, 0, migrated.output);
    assertKeyInToken();
    assert.ok(!spkiOfCertificate(p.rootOcspCert).equals(software), 'a new key, certified anew by the root');
    const env = await startEnvironment({ dataDir, keys: keys() });
    try {
      await assertBltVouchedByRootResponder(env);
    } finally {
      await env.close();
    }
  });
});
