/**
 * A COMMIT whose answer is lost. signDoc runs on PostgreSQL through a TCP proxy (test/helpers/postgres-proxy.ts)
 * that forwards the COMMIT of the write keeping the signatures with their mediation record and then drops the
 * connection before the server's answer comes back: the server commits, the QTSP hears only that the
 * connection is gone. Shown:
 * - the database answers again at once: the call answers 200 with the very signatures it kept;
 * - the database stays unreachable past the store's confirmation deadline: 503, and the retry with the same SAD
 *   receives the kept signatures (nothing made or billed again);
 * - the COMMIT never reaches the server and the database stays unreachable past that deadline (so the request
 *   cannot give its documents back either): 503, and the retry with the same SAD once the database is back signs
 *   them, without waiting for the claim to go stale;
 * and after each, every mediation record in the store belongs to a signature the RP received.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { MEDIATION_TOPIC, referenceId } from '../../src/mediation/record.ts';
import { CLAIM_STALE_MS } from '../../src/signing/once.ts';
import { authorizeSigning, callSignDoc } from '../../src/rp/flow.ts';
import { sha256b64 } from '../helpers/delivery.ts';
import { signDocBody } from '../helpers/signing.ts';
import { SHA256_OID, startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { startPostgresProxy, type PostgresProxy } from '../helpers/postgres-proxy.ts';

/** the write of step 10: it sets the kept signatures (store/documents.ts keepQueries) */
const keepsSignatures = (statements: readonly string[]) =>
  statements.some((s) => /update "signed_documents" set "signature"/i.test(s));

type Answer = { status: number; body: { SignatureObject?: string[]; error?: string; error_description?: string } };

describe('signDoc on PostgreSQL when the answer to its COMMIT is lost', () => {
  let server: PostgresServer | undefined;
  let proxy: PostgresProxy | undefined;
  let env: TestEnvironment | undefined;
  /** the store's schema, straight to the server (not through the proxy) */
  let directUrl: string;
  /** every signature an RP received from this file's calls */
  const received = new Set<string>();

  before(async () => {
    server = await startPostgres();
    directUrl = await server.freshSchemaUrl();
    const u = new URL(directUrl);
    proxy = await startPostgresProxy({ host: u.hostname, port: Number(u.port) });
    env = await startEnvironment({ store: { driver: 'postgres', url: proxy.via(directUrl) } });
  });
  after(async () => {
    await env?.close();
    await proxy?.close();
    await server?.stop();
  });

  async function query<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
    const client = new pg.Client({ connectionString: directUrl });
    await client.connect();
    try {
      return (await client.query<T>(text, values)).rows;
    } finally {
      await client.end();
    }
  }

  async function consentTo(count: number): Promise<{ SAD: string; hashes: string[] }> {
    const label = `lost answer ${randomUUID()}`;
    const hashes = Array.from({ length: count }, (_, i) => sha256b64(`${label} ${i}`));
    const auth = await authorizeSigning(env!.endpoints, {
      documentDigests: hashes.map((hash, i) => ({ hash, label: `${label} ${i}` })),
      hashAlgorithmOID: SHA256_OID,
    });
    return { SAD: auth.accessToken, hashes };
  }

  async function sign(SAD: string, hashes: readonly string[]): Promise<Answer> {
    const answer = (await callSignDoc(env!.qtsp.signDocUrl, env!.endpoints, signDocBody(SAD, hashes))) as Answer;
    if (answer.status === 200) for (const s of answer.body.SignatureObject ?? []) received.add(s);
    return answer;
  }

  /** the signatures kept for these documents, in their order */
  async function kept(hashes: readonly string[]): Promise<(string | null)[]> {
    const rows = await query<{ hash: string; signature: string | null }>(
      'SELECT hash, signature FROM signed_documents WHERE hash = ANY($1)',
      [hashes],
    );
    return hashes.map((h) => rows.find((r) => r.hash === h)?.signature ?? null);
  }

  /** every mediation record names a signer certificate that is inside a signature an RP received */
  async function assertEveryRecordReceived(): Promise<number> {
    const evidence = await query<{ txn: string; serial: string; der: Buffer }>(
      `SELECT t.txn, t.certificate_serial_hex AS serial, c.der
         FROM signing_transactions t JOIN certificates c ON c.serial_hex = t.certificate_serial_hex`,
    );
    const certificateOf = new Map(evidence.map((e) => [referenceId(e.txn, e.serial), e.der]));
    const records = await query<{ id: string }>('SELECT id FROM outbox WHERE topic = $1', [MEDIATION_TOPIC]);
    const signatures = [...received].map((s) => Buffer.from(s, 'base64'));
    for (const { id } of records) {
      const der = certificateOf.get(id);
      assert.ok(der, `mediation record ${id} has its evidence`);
      assert.ok(
        signatures.some((s) => s.includes(der)),
        `mediation record ${id} bills a signature no RP received`,
      );
    }
    return records.length;
  }

  it('the database answers again at once: 200 with the signatures that were kept', async () => {
    const { SAD, hashes } = await consentTo(2);
    const before = await assertEveryRecordReceived();
    proxy!.cutAfterCommit(keepsSignatures);
    const answer = await sign(SAD, hashes);
    assert.equal(proxy!.cuts, 1, 'the COMMIT keeping the signatures was cut');
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(answer.body.SignatureObject?.length, 2);
    assert.deepEqual(await kept(hashes), answer.body.SignatureObject, 'the signatures returned are the ones kept');
    assert.equal(await assertEveryRecordReceived(), before + 1, 'one mediation record for the call');

    const retry = await sign(SAD, hashes);
    assert.equal(retry.status, 200, JSON.stringify(retry.body));
    assert.deepEqual(retry.body.SignatureObject, answer.body.SignatureObject);
    assert.equal(await assertEveryRecordReceived(), before + 1, 'the retry billed again');
  });

  it('the database unreachable past the deadline: 503, and the retry with the same SAD receives the kept signatures', async () => {
    const { SAD, hashes } = await consentTo(1);
    const before = await assertEveryRecordReceived();
    proxy!.cutAfterCommit(keepsSignatures, { thenDown: true });
    let answer: Answer;
    try {
      answer = await sign(SAD, hashes);
    } finally {
      proxy!.up();
    }
    assert.equal(proxy!.cuts, 2, 'the COMMIT keeping the signatures was cut');
    assert.equal(answer.status, 503, JSON.stringify(answer.body));
    assert.equal(answer.body.error, 'temporarily_unavailable');
    assert.match(String(answer.body.error_description), /retry with the same SAD/);
    const [signature] = await kept(hashes);
    assert.ok(signature, 'the COMMIT landed: the signature is kept (and its record written)');

    const retry = await sign(SAD, hashes);
    assert.equal(retry.status, 200, JSON.stringify(retry.body));
    assert.deepEqual(retry.body.SignatureObject, [signature]);
    assert.equal(await assertEveryRecordReceived(), before + 1, 'one mediation record, for the signature received');
  });

  it('the COMMIT lost before the server and the database unreachable past the deadline: 503, and the retry signs', async () => {
    const { SAD, hashes } = await consentTo(1);
    const before = await assertEveryRecordReceived();
    proxy!.cutBeforeCommit(keepsSignatures, { thenDown: true });
    let answer: Answer;
    try {
      answer = await sign(SAD, hashes);
    } finally {
      proxy!.up();
    }
    assert.equal(answer.status, 503, JSON.stringify(answer.body));
    assert.match(String(answer.body.error_description), /retry with the same SAD/);
    assert.deepEqual(await kept(hashes), [null], 'nothing was kept: the COMMIT never reached the server');

    // the retry at once (the database is back): well within the two minutes after which a claim is stale
    const started = Date.now();
    const retry = await sign(SAD, hashes);
    assert.equal(retry.status, 200, JSON.stringify(retry.body));
    assert.ok(Date.now() - started < CLAIM_STALE_MS / 2, 'the retry did not wait for the claim to go stale');
    assert.deepEqual(await kept(hashes), retry.body.SignatureObject, 'the signature returned is the one kept');
    assert.equal(await assertEveryRecordReceived(), before + 1, 'one mediation record, for the signature received');
  });
});
