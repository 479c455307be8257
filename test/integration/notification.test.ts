/**
 * End-user notification (spec 6.3) end to end: queued with `qtsp notify` or the admin endpoint (mutual TLS,
 * pinned admin certificate), relayed through real Redis, sent over real SMTP (STARTTLS) to the sandbox sink at
 * the IDP's notification_email; S/MIME signed (openssl smime -verify against our root accepts it and refuses
 * a tampered copy), and encrypted to the IDP when we hold its certificate (openssl cms -decrypt).
 */
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTlsCertificate, saveKeyed } from '../../src/ca/authority.ts';
import { generateKeyPairSync } from 'node:crypto';
import { recipientCertDir, recipientCertificateFile } from '../../src/notification/deliver.ts';
import { rpAgent } from '../../src/rp/http.ts';
import type { ReceivedMail } from '../../src/sandbox/mail/smtp-sink.ts';
import { x5tS256 } from '../../src/trust/fingerprint.ts';
import { toPem } from '../../src/util/base64.ts';
import { httpRequest, jsonBody, tlsAgent, type HttpAgent } from '../../src/util/http-client.ts';
import { childEnv, postSignDoc, sha256b64, waitFor } from '../helpers/delivery.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';
import { authorize } from '../helpers/signing.ts';
import { QTSP_ID, startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { endEntityCertificate } from '../helpers/certificates.ts';
import { run } from '../helpers/openssl.ts';

const BANK_ADDRESS = 'notify@bank.sandbox.localhost';
let env: TestEnvironment;
let rp: HttpAgent;
let work: string;
let admin: HttpAgent;

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'qtsp-notify-'));
  const adminCert = createTlsCertificate(undefined, { usage: 'client', commonName: 'qtsp operator' });
  saveKeyed(adminCert, join(work, 'admin.pem'), join(work, 'admin.key.pem'));
  env = await startEnvironment({
    delivery: { attempts: 3, backoffMs: 100, timeoutMs: 3000, relayIntervalMs: 200 },
    notification: { adminClientFingerprints: [x5tS256(adminCert.der)] },
  });
  rp = rpAgent(env.endpoints);
  admin = tlsAgent({
    ca: readFileSync(env.endpoints.tlsCaFile),
    cert: readFileSync(join(work, 'admin.pem')),
    key: readFileSync(join(work, 'admin.key.pem')),
  });
});
after(async () => {
  rp.destroy();
  admin.destroy();
  await env.close();
  rmSync(work, { recursive: true, force: true });
});
afterEach(async () => {
  await env.sandbox.controls.reset();
  rmSync(recipientCertificateFile(recipientCertDir(env.config), env.sandbox.issuer), { force: true });
});

/** A signature, so that the store holds the txn, iss and sub of its introspection (spec 6.3 step 1). */
async function signedTxn(): Promise<{ txn: string; sub: string }> {
  const auth = await authorize(env.endpoints, [{ hash: sha256b64(`doc ${Math.random()}`), label: 'doc' }]);
  const res = await postSignDoc(env, rp, auth.accessToken, auth.hashes);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const [row] = await env.qtsp.deps.store.getTransaction(res.txn);
  return { txn: res.txn, sub: row!.sub };
}

async function mailWith(marker: string): Promise<ReceivedMail> {
  return waitFor(`a mail at the sink carrying ${marker}`, () =>
    env.sandbox.smtp.messages().find((m) => m.raw.includes(marker)),
  );
}

/** openssl smime -verify against our root; the signed content (a MIME part) goes to `out`. */
async function verify(file: string, out: string) {
  return run('openssl', ['smime', '-verify', '-in', file, '-CAfile', env.rootCaFile, '-out', out]);
}

/** The text of the verified inner part (text/plain, base64). */
function innerText(part: string): string {
  const [, body] = part.split(/\r?\n\r?\n/, 2) as [string, string];
  return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
}

function postAdmin(agent: HttpAgent, body: unknown, contentType = 'application/json') {
  return httpRequest(`${env.qtsp.url}/admin/v1/notifications`, {
    method: 'POST',
    agent,
    timeoutMs: 5000,
    headers: { 'content-type': contentType },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

describe('qtsp notify', () => {
  it('sends a signed mail with iss, sub, txn, our SP id and the message to the IDP; openssl verifies it with our root', async () => {
    const { txn, sub } = await signedTxn();
    const message = `Ihre Signatur wurde widerrufen. Grüße, Ihre Bank\nZeile 2 (${txn})`;
    writeFileSync(join(work, 'message.txt'), message);
    const queued = await qtsp(['notify', '--txn', txn, '--message-file', join(work, 'message.txt')], childEnv(env));
    assert.equal(queued.code, 0, queued.output);
    const id = /notification (ntf-[0-9a-f-]+) queued/.exec(queued.output)?.[1];
    assert.ok(id, queued.output);
    const mail = await mailWith(id);
    assert.deepEqual(mail.to, [BANK_ADDRESS]);
    assert.match(
      mail.raw.toString('latin1'),
      /Content-Type: multipart\/signed; protocol="application\/pkcs7-signature"; micalg=sha-256/,
    );

    const file = join(work, 'signed.eml');
    writeFileSync(file, mail.raw);
    const ok = await verify(file, join(work, 'inner.txt'));
    assert.ok(ok.ok, ok.output);
    const text = innerText(readFileSync(join(work, 'inner.txt'), 'utf8'));
    for (const line of [`iss: ${env.sandbox.issuer}`, `sub: ${sub}`, `txn: ${txn}`, `sp_id: ${QTSP_ID}`])
      assert.ok(text.includes(line), `${line} missing in:\n${text}`);
    assert.ok(text.includes(message.replace(/\n/g, '\r\n')), text);

    // one changed character in the signed part: openssl refuses it
    const raw = mail.raw.toString('latin1');
    const at = raw.indexOf('base64\r\n\r\n') + 'base64\r\n\r\n'.length + 10;
    writeFileSync(
      join(work, 'tampered.eml'),
      Buffer.from(raw.slice(0, at) + (raw[at] === 'A' ? 'B' : 'A') + raw.slice(at + 1), 'latin1'),
    );
    assert.equal(
      (await verify(join(work, 'tampered.eml'), '/dev/null')).ok,
      false,
      'openssl accepted a tampered notification',
    );
    await waitFor(
      'delivered in the outbox',
      async () => (await env.qtsp.deps.store.getOutbox(id))?.state === 'delivered',
    );
  });

  it('refuses a txn we never signed under', async () => {
    writeFileSync(join(work, 'message.txt'), 'hello');
    const res = await qtsp(
      ['notify', '--txn', 'no-such-txn', '--message-file', join(work, 'message.txt')],
      childEnv(env),
    );
    assert.equal(res.code, 1);
    assert.match(res.output, /no signature was created under txn no-such-txn/);
    // base64url txn values may start with '-': still the txn, not an option
    const dashed = await qtsp(['notify', '--txn', '-Zq1x', '--message-file', join(work, 'message.txt')], childEnv(env));
    assert.equal(dashed.code, 1, dashed.output);
    assert.match(dashed.output, /no signature was created under txn -Zq1x/);
  });
});

/** An encryption certificate of the bank (RSA, as most S/MIME recipients), issued by a CA of its own. */
function bankEncryptionCertificate(): { certFile: string; keyFile: string } {
  const keys = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const der = endEntityCertificate({
    commonName: BANK_ADDRESS,
    publicKey: keys.publicKey,
    selfSignKey: keys.privateKey,
    validHours: 24,
    keyUsage: ['keyEncipherment'],
    extKeyUsage: ['1.3.6.1.5.5.7.3.4'],
  });
  const certFile = recipientCertificateFile(recipientCertDir(env.config), env.sandbox.issuer);
  mkdirSync(recipientCertDir(env.config), { recursive: true });
  writeFileSync(certFile, toPem(der, 'CERTIFICATE'));
  const keyFile = join(work, 'bank.key.pem');
  writeFileSync(keyFile, keys.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string);
  return { certFile, keyFile };
}

describe('POST /admin/v1/notifications', () => {
  it('with the admin certificate: 202, and the mail arrives encrypted to the IDP, signed inside', async () => {
    const bank = bankEncryptionCertificate();
    const { txn, sub } = await signedTxn();
    const res = await postAdmin(admin, { txn, message: 'Bitte melden Sie sich bei Ihrer Bank.' });
    assert.equal(res.status, 202, res.body.toString());
    const { id } = jsonBody(res) as { id: string };
    const mail = await mailWith(id);
    const raw = mail.raw.toString('latin1');
    assert.match(raw, /Content-Type: application\/pkcs7-mime; smime-type=enveloped-data/);
    assert.ok(!raw.includes(txn) && !raw.includes(sub), 'txn or sub readable outside the encryption');
    writeFileSync(join(work, 'enc.eml'), mail.raw);
    const dec = await run('openssl', [
      'cms',
      '-decrypt',
      '-in',
      join(work, 'enc.eml'),
      '-recip',
      bank.certFile,
      '-inkey',
      bank.keyFile,
      '-out',
      join(work, 'dec.eml'),
    ]);
    assert.ok(dec.ok, dec.output);
    const ok = await verify(join(work, 'dec.eml'), join(work, 'inner.txt'));
    assert.ok(ok.ok, ok.output);
    assert.ok(innerText(readFileSync(join(work, 'inner.txt'), 'utf8')).includes(`txn: ${txn}`));
  });

  it('without the admin certificate: 401; unknown txn: 404; bad body: 400; never a 500', async () => {
    const { txn } = await signedTxn();
    const noAdmin = await postAdmin(rp, { txn, message: 'x' });
    assert.equal(noAdmin.status, 401);
    assert.equal((jsonBody(noAdmin) as { error: string }).error, 'unauthorized');
    const unknown = await postAdmin(admin, { txn: 'unknown-txn', message: 'x' });
    assert.equal(unknown.status, 404);
    assert.equal((jsonBody(unknown) as { error: string }).error, 'unknown_transaction');
    for (const body of [
      { txn },
      { txn, message: '' },
      { txn, message: 'a\u0000b' },
      { txn: 5, message: 'x' },
      '{not json',
    ]) {
      const bad = await postAdmin(admin, body);
      assert.equal(bad.status, 400, `${JSON.stringify(body)}: ${bad.body.toString()}`);
      assert.equal((jsonBody(bad) as { error: string }).error, 'invalid_request');
    }
    assert.equal((await postAdmin(admin, 'txn=1', 'application/x-www-form-urlencoded')).status, 415);
  });
});

describe('delivery failures', () => {
  it('a temporary refusal (451) is retried until the mail is taken', async () => {
    env.sandbox.controls.smtp.mode = 'reject-temporary';
    const { txn } = await signedTxn();
    const { id } = jsonBody(await postAdmin(admin, { txn, message: 'retry me' })) as { id: string };
    await waitFor('a failed attempt', async () => ((await env.qtsp.deps.store.getOutbox(id))?.attempts ?? 0) >= 1);
    env.sandbox.controls.smtp.mode = 'normal';
    await mailWith(id);
    await waitFor('delivered', async () => (await env.qtsp.deps.store.getOutbox(id))?.state === 'delivered');
  });

  it('a permanent refusal (550) is kept as failed and shown by qtsp mediation status', async () => {
    env.sandbox.controls.smtp.mode = 'reject-permanent';
    const { txn } = await signedTxn();
    const { id } = jsonBody(await postAdmin(admin, { txn, message: 'nobody home' })) as { id: string };
    const entry = await waitFor('failed', async () => {
      const e = await env.qtsp.deps.store.getOutbox(id);
      return e?.state === 'failed' ? e : undefined;
    });
    assert.equal(entry.attempts, 1, 'a permanent refusal is not retried');
    assert.match(entry.lastError ?? '', /550/);
    const status = await qtsp(['mediation', 'status', '--json'], childEnv(env));
    assert.ok(
      (JSON.parse(status.output) as Record<string, { outbox: { failed: number } }>)['notification']!.outbox.failed >= 1,
      status.output,
    );
  });
});
