/**
 * PKCS#11 key custody through signDoc, on a SoftHSM2 token (keys.provider softhsm, in the environment's temp
 * data dir), looked at from outside with pkcs11-tool (OpenSC):
 * - after 100 signDoc calls (ECDSA and RSA keys, and calls that fail mid-signing: B-T against a TSA that does
 *   not answer, after the signature value was made) the token holds the long-lived keys and nothing else;
 * - the long-lived keys are sensitive, never extractable token objects;
 * - signer certificates made in a token the configuration does not declare a QSCD claim QCP-n, no QcSSCD;
 * - a token that disappears: 503 temporarily_unavailable "nothing was signed", readiness names the token;
 *   when it is back, signDoc signs again.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, renameSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import * as pkijs from 'pkijs';
import type { Pkcs11Custody } from '../../src/custody/pkcs11/custody.ts';
import { SOFTHSM2_MODULE } from '../../src/custody/softhsm/token.ts';
import { oid } from '../../src/util/der.ts';
import { httpRequest } from '../../src/util/http-client.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { opensslCmsVerify } from '../helpers/openssl.ts';
import { visibleObjects } from '../helpers/softhsm.ts';
import { signThroughSandbox } from '../helpers/signing.ts';

const DOC = Buffer.from('a document signed in the token\n');
const HASH = createHash('sha256').update(DOC).digest('base64');
const RSA_ENCRYPTION = '1.2.840.113549.1.1.1';
const QC_SSCD = '0.4.0.1862.1.4';
const QCP_N = '0.4.0.194112.1.0';
const QCP_N_QSCD = '0.4.0.194112.1.2';

let env: TestEnvironment;
let silentTsa: Server;

/** pkcs11-tool's view of the environment's token: its objects, one text block each */
function tokenObjects(): string[] {
  const dir = join(env.dataDir, 'softhsm');
  const pin = readFileSync(join(dir, 'user.pin'), 'utf8').trim();
  const listing = execFileSync(
    'pkcs11-tool',
    ['--module', SOFTHSM2_MODULE, '--token-label', 'qtsp-sandbox', '--login', '--pin', pin, '--list-objects'],
    {
      env: { ...process.env, SOFTHSM2_CONF: join(dir, 'softhsm2.conf') },
      encoding: 'utf8',
    },
  );
  return listing.split(/\n(?=\S)/).filter((o) => /Object;/.test(o));
}

/** pkcs11-tool's description of the slots and their tokens (label, serial number) */
function tokenSlots(): string {
  return execFileSync('pkcs11-tool', ['--module', SOFTHSM2_MODULE, '--list-token-slots'], {
    env: { ...process.env, SOFTHSM2_CONF: join(env.dataDir, 'softhsm', 'softhsm2.conf') },
    encoding: 'utf8',
  });
}

function signDoc(level: string, extra: Record<string, unknown> = {}) {
  return signThroughSandbox(env, [HASH], { fields: { conformance_level: level, ...extra } });
}

/** GET /health/ready on the operations listener, after a pause (readiness probes in the background) */
async function readiness(): Promise<{ status: number; reasons: string[] }> {
  await new Promise((resolve) => setTimeout(resolve, 100));
  const res = await httpRequest(`${env.qtsp.opsUrl}/health/ready`, { timeoutMs: 5000 });
  return {
    status: res.status,
    reasons: (JSON.parse(res.body.toString('utf8')) as { reasons?: string[] }).reasons ?? [],
  };
}

before(async () => {
  // an external TSA that accepts the connection and never answers: B-T fails after the signature value exists
  silentTsa = createServer(() => undefined);
  await new Promise<void>((resolve) => silentTsa.listen(0, '127.0.0.1', resolve));
  const port = (silentTsa.address() as { port: number }).port;
  env = await startEnvironment({
    keys: { provider: 'softhsm' },
    store: { pingIntervalMs: 200 },
    signer: { rsaPoolSize: 0 },
    tsa: { url: `http://127.0.0.1:${port}/tsa`, timeoutMs: 300, retries: 0 },
  });
});

after(async () => {
  await env?.close();
  silentTsa?.close();
});

describe('signDoc with PKCS#11 custody (SoftHSM2)', () => {
  it('signs in the token: openssl verifies; a token not declared a QSCD gives QCP-n and no QcSSCD', async () => {
    assert.equal(env.qtsp.deps.keys.kind, 'pkcs11');
    for (const extra of [{}, { signAlgo: RSA_ENCRYPTION }]) {
      const res = await signDoc('AdES-B-B', extra);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const cms = Buffer.from((res.body as { SignatureObject: string[] }).SignatureObject[0]!, 'base64');
      const ok = await opensslCmsVerify(cms, DOC, env.rootCaFile);
      assert.ok(ok.ok, ok.output);
      const signed = new pkijs.SignedData({ schema: pkijs.ContentInfo.fromBER(new Uint8Array(cms)).content });
      const der = Buffer.from((signed.certificates![0] as pkijs.Certificate).toSchema().toBER());
      assert.ok(der.includes(oid(QCP_N)), 'policy QCP-n');
      assert.ok(!der.includes(oid(QC_SSCD)), 'no QcSSCD');
      // the evidence records where the key lived: the token's label and serial, as the token reports them
      const [stored] = await env.qtsp.deps.store.getTransaction(String(res.headers['x-transaction-id']));
      const serial = /serial num\s*:\s*(\S+)/.exec(tokenSlots())?.[1];
      assert.ok(serial, tokenSlots());
      assert.equal(stored?.keyCustody, `pkcs11:qtsp-sandbox:${serial}`);
    }
  });

  it('after 100 signDoc calls, some failing mid-signing, the token holds only the long-lived keys', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 100; i++) {
      // every 10th call B-T: the signature value is made in the token, then the TSA does not answer (504/502)
      const level = i % 10 === 9 ? 'AdES-B-T' : 'AdES-B-B';
      const res = await signDoc(level, i % 10 === 4 ? { signAlgo: RSA_ENCRYPTION } : {});
      statuses.push(res.status);
    }
    assert.equal(statuses.filter((s) => s === 200).length, 90, statuses.join(','));
    assert.ok(
      statuses.filter((s) => s !== 200).every((s) => s === 502 || s === 504),
      statuses.join(','),
    );
    // our own view first: it includes this process's session objects, which no other process can see
    const custody = env.qtsp.deps.keys as Pkcs11Custody;
    const visible = await visibleObjects(custody.token);
    assert.deepEqual(visible.map((o) => `${o.label}/${o.token}`).sort(), [
      'qtsp-issuing-ca/true',
      'qtsp-issuing-ca/true',
      'qtsp-ocsp-responder/true',
      'qtsp-ocsp-responder/true',
      'qtsp-root-ocsp-responder/true',
      'qtsp-root-ocsp-responder/true',
      'qtsp-tsa/true',
      'qtsp-tsa/true',
    ]);
    // and pkcs11-tool's, the independent one: no token object but the long-lived keys
    const objects = tokenObjects();
    assert.equal(objects.length, 8, objects.join('\n'));
    for (const label of ['qtsp-issuing-ca', 'qtsp-tsa', 'qtsp-ocsp-responder', 'qtsp-root-ocsp-responder']) {
      const pair = objects.filter((o) => new RegExp(`label:\\s+${label}\\n`).test(`${o}\n`));
      assert.equal(pair.length, 2, `${label}: ${objects.join('\n')}`);
      const privateKey = pair.find((o) => o.startsWith('Private Key Object'))!;
      assert.match(privateKey, /Access:\s+sensitive, always sensitive, never extractable/);
    }
  });

  it('a token that disappears: 503 nothing was signed, readiness says why; back again, signDoc signs', async () => {
    const tokens = join(env.dataDir, 'softhsm', 'tokens');
    renameSync(tokens, `${tokens}.away`);
    try {
      const res = await signDoc('AdES-B-B');
      assert.equal(res.status, 503, JSON.stringify(res.body));
      assert.deepEqual(res.body, {
        error: 'temporarily_unavailable',
        error_description: 'the key custody (HSM) is unavailable; nothing was signed',
      });
      // two checks notice the token gone, in either order: the readiness probe (the issuing CA key no longer
      // signs) and the custody's own watch (the token does not answer); wait (bounded) until the watch has
      const custodyReason = /key custody: PKCS#11 token "qtsp-sandbox" does not answer/;
      let ready = await readiness();
      for (let i = 0; i < 300 && (ready.status === 200 || !custodyReason.test(ready.reasons.join('\n'))); i++)
        ready = await readiness();
      assert.equal(ready.status, 503);
      assert.match(ready.reasons.join('\n'), custodyReason);
    } finally {
      renameSync(`${tokens}.away`, tokens);
    }
    // the custody asks a token that is away again every quarter second, and readiness follows: ready within
    // about a second of its return (a bounded wait; the bound leaves room for a busy machine)
    const back = performance.now();
    let ready = await readiness();
    while (ready.status !== 200 && performance.now() - back < 10_000) ready = await readiness();
    const ms = performance.now() - back;
    assert.equal(ready.status, 200, ready.reasons.join('\n'));
    assert.ok(ms < 4000, `ready ${Math.round(ms)} ms after the token was back`);
    const res = await signDoc('AdES-B-B');
    assert.equal(res.status, 200, JSON.stringify(res.body));
  });
});

describe('the QSCD claim follows the custody: only a token the configuration declares a QSCD', () => {
  /** one signDoc in a fresh environment: the signer certificate's DER and the evidence's keyCustody */
  async function signedIn(keys: {
    provider: 'software' | 'softhsm';
    tokenIsQscd: boolean;
  }): Promise<{ der: Buffer; keyCustody: string | null }> {
    const previous = env;
    await previous.close();
    env = await startEnvironment({ keys });
    const res = await signDoc('AdES-B-B');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const cms = Buffer.from((res.body as { SignatureObject: string[] }).SignatureObject[0]!, 'base64');
    const ok = await opensslCmsVerify(cms, DOC, env.rootCaFile);
    assert.ok(ok.ok, ok.output);
    const signed = new pkijs.SignedData({ schema: pkijs.ContentInfo.fromBER(new Uint8Array(cms)).content });
    const [stored] = await env.qtsp.deps.store.getTransaction(String(res.headers['x-transaction-id']));
    return {
      der: Buffer.from((signed.certificates![0] as pkijs.Certificate).toSchema().toBER()),
      keyCustody: stored?.keyCustody ?? null,
    };
  }

  it('software keys never claim a QSCD, even with keys.tokenIsQscd set', async () => {
    const { der, keyCustody } = await signedIn({ provider: 'software', tokenIsQscd: true });
    assert.ok(der.includes(oid(QCP_N)) && !der.includes(oid(QCP_N_QSCD)), 'policy QCP-n');
    assert.ok(!der.includes(oid(QC_SSCD)), 'no QcSSCD');
    assert.equal(keyCustody, 'software');
  });

  it('a token declared a QSCD: QcSSCD and QCP-n-qscd', async () => {
    const { der, keyCustody } = await signedIn({ provider: 'softhsm', tokenIsQscd: true });
    assert.ok(der.includes(oid(QCP_N_QSCD)) && !der.includes(oid(QCP_N)), 'policy QCP-n-qscd');
    assert.ok(der.includes(oid(QC_SSCD)), 'QcSSCD');
    assert.match(keyCustody ?? '', /^pkcs11:qtsp-sandbox:[0-9a-f]+$/);
  });
});
