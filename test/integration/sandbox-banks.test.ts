/**
 * The sandbox's two banks against the real QTSP (spec 4.6, 4.7, 5.7): each bank its own issuer, AS signing key
 * and IDP record (with bic); a SAD from bank 2 signs end to end (openssl verifies the CMS); a SAD that names
 * bank 2 but carries bank 1's signature is refused; the key archive holds both banks' JWK Sets.
 */
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { authorizeSigning, callSignDoc, type RpEndpoints } from '../../src/rp/flow.ts';
import type { SandboxBank } from '../../src/sandbox/index.ts';
import { keySetAt } from '../../src/trust/key-archive.ts';
import { x5tS256 } from '../../src/trust/fingerprint.ts';
import { fromPem } from '../../src/util/base64.ts';
import { httpRequest, jsonBody, tlsAgent, type HttpAgent } from '../../src/util/http-client.ts';
import { QTSP_ID, SHA256_OID, startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { opensslCmsVerify } from '../helpers/openssl.ts';
import { authorize, signDocBody } from '../helpers/signing.ts';

const DOC = Buffer.from('a contract signed through the second bank\n');
const HASH = createHash('sha256').update(DOC).digest('base64');
const BANK2_BIC = 'SNDCDEFFXXX';

let env: TestEnvironment;
let agent: HttpAgent;
let bank2: SandboxBank;
/** the RP's endpoints with bank 2 as the bank its user chose */
let viaBank2: RpEndpoints;

before(async () => {
  // every SAD looks its issuer up in the IDP directory again: a status change counts at once
  env = await startEnvironment({ trust: { idpCacheTtlSeconds: 0 } });
  agent = tlsAgent({ ca: readFileSync(env.sandbox.tlsCaFile) });
  bank2 = env.sandbox.banks[1]!;
  viaBank2 = { ...env.endpoints, issuer: bank2.issuer };
});

after(async () => {
  agent?.destroy();
  await env?.close();
});

afterEach(async () => {
  await env.sandbox.controls.reset();
});

async function getJson(url: string): Promise<unknown> {
  const res = await httpRequest(url, { agent, timeoutMs: 10_000 });
  assert.equal(res.status, 200, `${url}: ${res.body.toString()}`);
  return jsonBody(res);
}

async function sadFrom(endpoints: RpEndpoints): Promise<string> {
  return (await authorize(endpoints, [{ hash: HASH, label: 'contract.txt' }])).accessToken;
}

async function signDoc(SAD: string, endpoints: RpEndpoints) {
  return callSignDoc(env.qtsp.signDocUrl, endpoints, signDocBody(SAD, [HASH]));
}

function refusedWith(res: { status: number; body: unknown }, status: number, description: RegExp): void {
  const body = res.body as Record<string, unknown>;
  assert.equal(res.status, status, JSON.stringify(body));
  assert.match(String(body['error_description']), description);
  assert.equal(body['SignatureObject'], undefined);
}

/** SAD claims for bank 2's issuer, bound to the RP's certificate: what only bank 2 may sign. */
function bank2Claims(): Record<string, unknown> {
  const now = Math.floor(Date.now() / 1000);
  const fingerprint = x5tS256(fromPem(readFileSync(env.endpoints.rp.certFile, 'utf8'))[0]!);
  return { iss: bank2.issuer, iat: now - 5, exp: now + 300, jti: randomUUID(), cnf: { 'x5t#S256': fingerprint } };
}

async function kidsOf(issuer: string): Promise<string[]> {
  const jwks = (await getJson(`${issuer}/jwks`)) as { keys: { kid: string }[] };
  return jwks.keys.map((k) => k.kid).sort();
}

describe('two sandbox banks', () => {
  it('each bank is its own issuer, bank 1 first; endpoints.json lists them with the account chooser', async () => {
    assert.deepEqual(env.sandbox.banks, [
      { issuer: env.sandbox.issuer, bic: 'SNDBDEFFXXX', name: 'Sandbox Bank' },
      { issuer: bank2.issuer, bic: BANK2_BIC, name: 'Second Sandbox Bank' },
    ]);
    assert.notEqual(bank2.issuer, env.sandbox.issuer);
    const md = (await getJson(`${bank2.issuer}/.well-known/oauth-authorization-server`)) as Record<string, unknown>;
    assert.equal(md['issuer'], bank2.issuer);
    assert.equal(md['jwks_uri'], `${bank2.issuer}/jwks`);
    const [kids1, kids2] = [await kidsOf(env.sandbox.issuer), await kidsOf(bank2.issuer)];
    assert.equal(kids2.length, 1);
    assert.ok(!kids1.includes(kids2[0]!), 'bank 2 signs with a key of its own');

    const file = JSON.parse(readFileSync(join(env.dataDir, 'sandbox', 'endpoints.json'), 'utf8'));
    assert.deepEqual(file.banks, env.sandbox.banks);
    assert.equal(file.accountChooserUrl, env.sandbox.accountChooserUrl);
    assert.equal(env.sandbox.accountChooserUrl, `${env.sandbox.platformUrl}/account-chooser/`);
  });

  it('the IDP directory lists both banks with bic; the service configuration answers for each issuer', async () => {
    const list = (await getJson(env.sandbox.idpDirectoryUrl)) as Record<string, unknown>[];
    assert.deepEqual(
      list.map((r) => [r['iss'], r['bic'], r['name'], r['status'], r['notification_email']]),
      [
        [env.sandbox.issuer, 'SNDBDEFFXXX', 'Sandbox Bank', 'active', 'notify@bank.sandbox.localhost'],
        [bank2.issuer, BANK2_BIC, 'Second Sandbox Bank', 'active', 'notify@bank2.sandbox.localhost'],
      ],
    );
    const one = (await getJson(`${env.sandbox.idpDirectoryUrl}?iss=${encodeURIComponent(bank2.issuer)}`)) as Record<
      string,
      unknown
    >;
    assert.equal(one['bic'], BANK2_BIC);
    assert.equal(one['jwks_uri'], `${bank2.issuer}/jwks`);
    for (const bank of env.sandbox.banks) {
      const url = `${env.sandbox.serviceConfigurationUrl}?iss=${encodeURIComponent(bank.issuer)}`;
      const config = (await getJson(url)) as Record<string, unknown>;
      assert.deepEqual(config['identity'], { iss: bank.issuer });
      assert.equal((config['remote_signature_creation'] as { qtsp_id: string }[])[0]!.qtsp_id, QTSP_ID);
    }
    assert.equal(await env.qtsp.trust.idps.refreshList(), 2);
  });

  it('a SAD from bank 2 signs: the QTSP checks it against bank 2 and openssl verifies the signature', async () => {
    const steps: string[] = [];
    const auth = await authorizeSigning(viaBank2, {
      documentDigests: [{ hash: HASH, label: 'contract.txt' }],
      hashAlgorithmOID: SHA256_OID,
      onStep: (m) => steps.push(m),
    });
    assert.ok(steps[0]?.includes(`issuer ${bank2.issuer}`), steps.join('\n'));
    assert.equal(decodeJwt(auth.accessToken).iss, bank2.issuer);
    assert.ok((await kidsOf(bank2.issuer)).includes(decodeProtectedHeader(auth.accessToken).kid!));

    const res = await signDoc(auth.accessToken, viaBank2);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const [signature] = (res.body as { SignatureObject: string[] }).SignatureObject;
    const verified = await opensslCmsVerify(Buffer.from(signature!, 'base64'), DOC, env.rootCaFile);
    assert.ok(verified.ok, verified.output);
    const txn = String(res.headers['x-transaction-id']);
    const [evidence] = await env.qtsp.deps.store.getTransaction(txn);
    assert.equal(decodeJwt(evidence!.introspectionJwt).iss, bank2.issuer, 'bank 2 answered the introspection');
  });

  it("a SAD naming bank 2 but signed with bank 1's key is refused 401", async () => {
    const bank1Signed = await env.sandbox.mintAccessToken(bank2Claims());
    assert.ok((await kidsOf(env.sandbox.issuer)).includes(decodeProtectedHeader(bank1Signed).kid!));
    refusedWith(await signDoc(bank1Signed, viaBank2), 401, /unknown kid/);

    // bank 1's key under bank 2's kid: the kid resolves, the signature does not verify
    const [bank2Kid] = await kidsOf(bank2.issuer);
    const underBank2Kid = await env.sandbox.mintAccessToken(bank2Claims(), { kid: bank2Kid! });
    refusedWith(await signDoc(underBank2Kid, viaBank2), 401, /signature does not verify/);

    // bank 2's own key passes the signature check; the bank never issued it, so its introspection says inactive
    const bank2Signed = await env.sandbox.mintAccessToken(bank2Claims(), { bic: BANK2_BIC });
    refusedWith(await signDoc(bank2Signed, viaBank2), 401, /the AS reports the SAD as not active/);
  });

  it("the key archive holds both banks' JWK Sets; the QTSP's verified clone has both", async () => {
    assert.notEqual((await env.qtsp.trust.keyArchive.pull()).status, 'refused');
    const head = env.qtsp.trust.keyArchive.verifiedHead();
    assert.ok(head, 'the QTSP holds a verified archive commit');
    for (const bank of env.sandbox.banks) {
      const archived = await keySetAt(env.qtsp.trust.keyArchive.gitdir, head, bank.issuer);
      assert.ok(archived, `the archive has a file for ${bank.name}`);
      assert.deepEqual([...archived.keys()].sort(), await kidsOf(bank.issuer), bank.name);
    }
  });

  it('bank 2 set inactive: its SADs are refused and its key set leaves the archive; bank 1 still signs', async () => {
    const sad2 = await sadFrom(viaBank2);
    env.sandbox.controls.setIdpStatus('inactive', BANK2_BIC);
    refusedWith(await signDoc(sad2, viaBank2), 401, /not an active IDP/);
    const sad1 = await sadFrom(env.endpoints);
    const ok = await signDoc(sad1, env.endpoints);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));

    // the collection service drops an inactive IDP's file (spec 4.7: one file per active IDP)
    const deadline = Date.now() + 20_000;
    let gone = false;
    while (!gone && Date.now() < deadline) {
      await env.qtsp.trust.keyArchive.pull();
      const head = env.qtsp.trust.keyArchive.verifiedHead()!;
      gone = (await keySetAt(env.qtsp.trust.keyArchive.gitdir, head, bank2.issuer)) === undefined;
      if (!gone) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(gone, "bank 2's key set is still in the archive");
  });
});
