/**
 * Trust sources end to end, over real HTTPS and real git (spec 4.6, 4.7, 5.7, 5.8, 5.13): the IDP
 * directory (inactive IDP, a failing directory served from cache up to its maximum age), the long-term
 * public key archive (rotation, refused commits, the AS's JWKS unreachable) and `qtsp evidence verify` on a
 * transaction made by `qtsp sign`, including a tampered stored JWT.
 */
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac, randomUUID } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { decodeProtectedHeader } from 'jose';
import { callSignDoc } from '../../src/rp/flow.ts';
import { sqlitePath } from '../../src/store/open.ts';
import { EvidenceError, verifyEvidence } from '../../src/trust/evidence-verify.ts';
import { keySetAt, loadSignerKeys } from '../../src/trust/key-archive.ts';
import { x5tS256 } from '../../src/trust/fingerprint.ts';
import { fromPem } from '../../src/util/base64.ts';
import { httpRequest, jsonBody, tlsAgent, type HttpAgent } from '../../src/util/http-client.ts';
import { startEnvironment, QTSP_ID, type TestEnvironment } from '../helpers/environment.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';
import { authorize as authorizeAtBank, labelled, signDocBody } from '../helpers/signing.ts';

const FIXTURES = fileURLToPath(new URL('../../fixtures/documents/', import.meta.url));
const MAX_STALE_SECONDS = 2;
const DOC = Buffer.from('a contract the bank vouched for\n');
const HASH = createHash('sha256').update(DOC).digest('base64');

let env: TestEnvironment;
let agent: HttpAgent;

before(async () => {
  env = await startEnvironment({
    introspection: { timeoutMs: 3000 },
    trust: { idpCacheTtlSeconds: 0, idpMaxStaleSeconds: MAX_STALE_SECONDS, idpListPullSeconds: 0 },
  });
  agent = tlsAgent({ ca: readFileSync(env.sandbox.tlsCaFile) });
});
after(async () => {
  agent?.destroy();
  await env?.close();
});
afterEach(async () => {
  await env.sandbox.controls.reset();
  await env.qtsp.trust.keyArchive.pull(); // each test starts from the sandbox's current keys
});

async function authorize(): Promise<string> {
  return (await authorizeAtBank(env.endpoints, labelled([HASH]))).accessToken;
}

async function signDoc(SAD: string): Promise<{ status: number; body: Record<string, unknown>; txn: string }> {
  const res = await callSignDoc(env.qtsp.signDocUrl, env.endpoints, signDocBody(SAD, [HASH]));
  return {
    status: res.status,
    body: res.body as Record<string, unknown>,
    txn: String(res.headers['x-transaction-id'] ?? ''),
  };
}

async function expectStatus(SAD: string, status: number, description?: RegExp): Promise<string> {
  const res = await signDoc(SAD);
  assert.equal(res.status, status, JSON.stringify(res.body));
  if (description) assert.match(String(res.body['error_description']), description);
  if (status !== 200) assert.equal(res.body['SignatureObject'], undefined);
  return res.txn;
}

async function readiness(): Promise<{ status: number; reasons: string[] }> {
  const res = await httpRequest(`${env.qtsp.opsUrl}/health/ready`, { timeoutMs: 5000 });
  return { status: res.status, reasons: (jsonBody(res) as { reasons?: string[] }).reasons ?? [] };
}

function kidOf(jwt: string): string {
  return decodeProtectedHeader(jwt).kid!;
}

/** A SAD the sandbox signs as given (for keys the AS would never use itself). */
async function mintSad(options: { key: 'as' | 'foreign'; kid?: string }): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const fingerprint = x5tS256(fromPem(readFileSync(env.endpoints.rp.certFile, 'utf8'))[0]!);
  return env.sandbox.mintAccessToken(
    { iss: env.sandbox.issuer, iat: now - 5, exp: now + 300, jti: randomUUID(), cnf: { 'x5t#S256': fingerprint } },
    options,
  );
}

async function evidenceOptions() {
  return {
    archive: {
      gitdir: env.qtsp.trust.keyArchive.gitdir,
      signerKeys: await loadSignerKeys(env.config.trust.keyArchiveSignerKeyFile),
    },
    qtspId: QTSP_ID,
    skewSeconds: env.config.trust.clockSkewSeconds,
  };
}

describe('IDP directory (spec 4.6, 5.7 step 1)', () => {
  it('an IDP deactivated in the directory: 401, also after a pull of the whole list', async () => {
    const sad = await authorize();
    env.sandbox.controls.setIdpStatus('inactive');
    await expectStatus(sad, 401, /not an active IDP/);
    assert.equal(await env.qtsp.trust.idps.refreshList(), 2, 'both sandbox banks are listed');
    await expectStatus(sad, 401, /not an active IDP/);
  });

  it('directory down: the cached answer serves, then SADs of that issuer fail closed after the maximum age', async () => {
    const sads = await Promise.all([authorize(), authorize(), authorize(), authorize()]);
    await expectStatus(sads[0]!, 200); // the directory answered: cached now
    const answeredBy = Date.now();
    env.sandbox.controls.idpDirectory.mode = 'reset';
    await expectStatus(sads[1]!, 200);
    const ready = await readiness();
    assert.equal(ready.status, 200);
    assert.match(ready.reasons.join('\n'), /IDP directory failing/);
    await sleep(answeredBy + MAX_STALE_SECONDS * 1000 + 100 - Date.now());
    const description = new RegExp(
      `issuer ${env.sandbox.issuer.replace(/[.]/g, '\\.')} is \\d+ s old, beyond the maximum of ${MAX_STALE_SECONDS} s \\(trust\\.idpMaxStaleSeconds\\)`,
    );
    await expectStatus(sads[2]!, 502, description);
    env.sandbox.controls.idpDirectory.mode = 'http500';
    await expectStatus(sads[2]!, 502, /trust\.idpMaxStaleSeconds/);
    env.sandbox.controls.idpDirectory.mode = 'normal';
    await expectStatus(sads[3]!, 200);
  });
});

describe('key resolution: archive first, then jwks_uri (spec 4.7, 5.7 step 4, 5.8)', () => {
  it('AS JWKS unreachable but the key is in the archive: signing works (and does not before the archive has it)', async () => {
    const kid = await env.sandbox.controls.rotateAsKey(); // committed to the archive; not pulled by the QTSP yet
    env.sandbox.controls.jwks.mode = 'http500';
    const sad = await authorize();
    assert.equal(kidOf(sad), kid);
    await expectStatus(sad, 502, /^the signing keys of the SAD issuer could not be obtained$/);
    assert.equal((await env.qtsp.trust.keyArchive.pull()).status, 'updated');
    await expectStatus(sad, 200);
    assert.deepEqual(env.qtsp.trust.servers.keySource(env.sandbox.issuer, kid), {
      source: 'archive',
      commit: env.qtsp.trust.keyArchive.verifiedHead(),
    });
  });

  it('a key known only to jwks_uri is taken from there, and the source says so', async () => {
    const kid = await env.sandbox.controls.rotateAsKey();
    await expectStatus(await authorize(), 200);
    assert.deepEqual(env.qtsp.trust.servers.keySource(env.sandbox.issuer, kid), { source: 'jwks_uri' });
  });

  it('a key rotated in the archive: new SADs verify, the removed key is refused, old evidence still verifies through history', async () => {
    const oldSad = await authorize();
    const oldTxn = await expectStatus(await authorize(), 200);
    const before = env.qtsp.trust.keyArchive.verifiedHead()!;
    const newKid = await env.sandbox.controls.rotateAsKey({ keepOld: false });
    assert.equal((await env.qtsp.trust.keyArchive.pull()).status, 'updated');
    const head = env.qtsp.trust.keyArchive.verifiedHead()!;
    const newTxn = await expectStatus(await authorize(), 200);
    assert.equal(env.qtsp.trust.servers.keySource(env.sandbox.issuer, newKid)?.source, 'archive');
    await expectStatus(oldSad, 401, /unknown kid/); // removed from the archive and from jwks_uri

    const options = await evidenceOptions();
    const [oldEvidence] = await env.qtsp.deps.store.getTransaction(oldTxn);
    const old = await verifyEvidence(oldEvidence!, options);
    assert.equal(old.vouchedBy.commit, before, 'the old key is vouched for by the commit that was HEAD at its iat');
    assert.notEqual(old.vouchedBy.commit, head);
    assert.equal(
      (await keySetAt(options.archive.gitdir, head, env.sandbox.issuer))?.has(old.kid),
      false,
      'and it is gone from HEAD',
    );
    assert.equal(old.vouchedBy.currentAtIat, true);
    const [newEvidence] = await env.qtsp.deps.store.getTransaction(newTxn);
    assert.equal((await verifyEvidence(newEvidence!, options)).vouchedBy.commit, head);

    // altered evidence: another sub in the payload, the bank's signature kept
    const [h, p, s] = oldEvidence!.introspectionJwt.split('.');
    const payload = JSON.parse(Buffer.from(p!, 'base64url').toString()) as Record<string, unknown>;
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...payload, sub: 'someone-else' })).toString('base64url')}.${s}`;
    await assert.rejects(
      verifyEvidence({ ...oldEvidence!, introspectionJwt: forged, sub: 'someone-else' }, options),
      (err: Error) => err instanceof EvidenceError && /was altered/.test(err.message),
    );
    await assert.rejects(
      verifyEvidence({ ...oldEvidence!, hashes: [createHash('sha256').update('other').digest('base64')] }, options),
      /not among the documentDigests/,
    );
  });
});

describe('key archive refusals (spec 4.7)', () => {
  it('a commit signed with a foreign key, then an unsigned one: ignored, the previous keys keep working, readiness reports it', async () => {
    const good = env.qtsp.trust.keyArchive.verifiedHead();
    const foreign = await env.sandbox.controls.keyArchive.commit({ signedBy: 'foreign', addForeignKey: true });
    assert.equal((await env.qtsp.trust.keyArchive.pull()).status, 'refused');
    assert.equal(env.qtsp.trust.keyArchive.verifiedHead(), good);
    await expectStatus(await mintSad({ key: 'foreign', kid: foreign.foreignKid! }), 401, /unknown kid/);
    await expectStatus(await authorize(), 200);
    let ready = await readiness();
    assert.equal(ready.status, 200, 'the last good state keeps serving');
    assert.match(
      ready.reasons.join('\n'),
      new RegExp(
        `key archive .*security event: update to ${foreign.commit} refused .*not signed by the operating party's key`,
      ),
    );

    const unsigned = await env.sandbox.controls.keyArchive.commit({ signedBy: 'none' });
    assert.equal((await env.qtsp.trust.keyArchive.pull()).status, 'refused');
    await expectStatus(await authorize(), 200);
    ready = await readiness();
    assert.match(ready.reasons.join('\n'), new RegExp(`update to ${unsigned.commit} refused`));

    await env.sandbox.controls.reset();
    await env.qtsp.trust.keyArchive.pull();
    assert.doesNotMatch((await readiness()).reasons.join('\n'), /key archive/);
  });
});

describe('qtsp evidence verify (spec 5.13)', () => {
  const quietQtsp = (args: string[]) => qtsp(args, { QTSP_LOG_LEVEL: 'silent' });

  it('refuses a stored response re-headed to alg none or HS256 keyed with the archived public key', async () => {
    const [evidence] = await env.qtsp.deps.store.getTransaction(await expectStatus(await authorize(), 200));
    const options = await evidenceOptions();
    assert.equal((await verifyEvidence(evidence!, options)).kid, kidOf(evidence!.introspectionJwt));
    const [, payload] = evidence!.introspectionJwt.split('.');
    const kid = kidOf(evidence!.introspectionJwt);
    const head = env.qtsp.trust.keyArchive.verifiedHead()!;
    const archived = (await keySetAt(options.archive.gitdir, head, env.sandbox.issuer))!.get(kid)!;
    const header = (alg: string) => Buffer.from(JSON.stringify({ alg, kid })).toString('base64url');
    const hs256 = `${header('HS256')}.${payload}`;
    const secret = archived.export({ type: 'spki', format: 'pem' });
    const forged = {
      none: `${header('none')}.${payload}.`,
      HS256: `${hs256}.${createHmac('sha256', secret).update(hs256).digest('base64url')}`,
    };
    for (const [alg, jwt] of Object.entries(forged)) {
      await assert.rejects(
        verifyEvidence({ ...evidence!, introspectionJwt: jwt }, options),
        (err: Error) => err instanceof EvidenceError && err.message.includes(`is not RS256 (alg ${alg})`),
      );
    }
  });

  it('succeeds for a transaction made by `qtsp sign`, and fails once the stored JWT is tampered with', async () => {
    const work = mkdtempSync(join(tmpdir(), 'qtsp-evidence-'));
    try {
      const file = join(work, 'contract.txt');
      copyFileSync(join(FIXTURES, 'contract.txt'), file);
      const signed = await quietQtsp(['sign', file, '--data-dir', env.dataDir]);
      assert.equal(signed.code, 0, signed.stdout + signed.stderr);
      const txn = /\(txn ([\w-]+)\)/.exec(signed.stdout)?.[1];
      assert.ok(txn, signed.stdout);

      const ok = await quietQtsp(['evidence', 'verify', txn, '--data-dir', env.dataDir]);
      assert.equal(ok.code, 0, ok.stdout + ok.stderr);
      const fileHash = createHash('sha256').update(readFileSync(file)).digest('base64');
      assert.match(ok.stdout, new RegExp(`evidence for txn ${txn} verifies`));
      assert.ok(ok.stdout.includes(`the bank ${env.sandbox.issuer} signed this introspection response`), ok.stdout);
      assert.ok(ok.stdout.includes(`key archive commit ${env.qtsp.trust.keyArchive.verifiedHead()}`), ok.stdout);
      assert.ok(ok.stdout.includes(fileHash), ok.stdout);

      const db = new Database(sqlitePath(env.dataDir));
      try {
        const { introspection_jwt: jwt } = db
          .prepare('SELECT introspection_jwt FROM signing_transactions WHERE txn = ?')
          .get(txn) as { introspection_jwt: string };
        const [h, p, s] = jwt.split('.');
        const payload = JSON.parse(Buffer.from(p!, 'base64url').toString()) as Record<string, unknown>;
        const tampered = `${h}.${Buffer.from(JSON.stringify({ ...payload, client_state: 'demo' })).toString('base64url')}.${s}`;
        db.prepare('UPDATE signing_transactions SET introspection_jwt = ? WHERE txn = ?').run(tampered, txn);
      } finally {
        db.close();
      }
      const bad = await quietQtsp(['evidence', 'verify', txn, '--data-dir', env.dataDir]);
      assert.equal(bad.code, 1, bad.stdout + bad.stderr);
      assert.match(bad.stderr, new RegExp(`evidence for txn ${txn} does NOT verify: .*the stored JWT was altered`));
      assert.doesNotMatch(bad.stdout, /verifies/);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});
