/**
 * One consent, one signature per document, through signDoc over mutual TLS: a repeated
 * request (the RP retrying after a lost response) gets the very signatures of the first, and nothing is
 * minted, recorded or billed again; other parameters for a signed document, or a mix of signed and new
 * documents, are a 400. On PostgreSQL with two QTSP instances sharing it: concurrent identical requests to
 * both instances give one certificate, one evidence row, one mediation record, and the same bytes to every
 * caller. openssl verifies what is returned.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { MEDIATION_TOPIC } from '../../src/mediation/record.ts';
import { pkiPaths } from '../../src/ca/material.ts';
import { callSignDoc, type RpEndpoints } from '../../src/rp/flow.ts';
import { startQtsp, type QtspService } from '../../src/service.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { opensslCmsVerify } from '../helpers/openssl.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { authorize, labelled, signDocBody } from '../helpers/signing.ts';

const DOCS = [Buffer.from('the first document\n'), Buffer.from('the second document\n')];
const HASHES = DOCS.map((d) => createHash('sha256').update(d).digest('base64'));

const body = signDocBody;

async function consent(endpoints: RpEndpoints, hashes: readonly string[] = HASHES): Promise<string> {
  return (await authorize(endpoints, labelled(hashes))).accessToken;
}

type Answer = {
  status: number;
  body: { SignatureObject?: string[]; revocationInfo?: unknown; error?: string; error_description?: string };
  headers: Record<string, unknown>;
};

async function post(url: string, endpoints: RpEndpoints, payload: Record<string, unknown>): Promise<Answer> {
  return (await callSignDoc(url, endpoints, payload)) as Answer;
}

/** what a call costs: certificates minted (metrics), evidence rows of the txn, mediation records */
async function costs(
  qtsps: readonly QtspService[],
  txn?: string,
): Promise<{ certificates: number; evidence: number; records: number }> {
  let certificates = 0;
  for (const q of qtsps) certificates += (await q.deps.metrics.certificates.get()).values[0]?.value ?? 0;
  const store = qtsps[0]!.deps.store;
  const counts = await store.outboxCounts(MEDIATION_TOPIC);
  return {
    certificates,
    evidence: txn ? (await store.getTransaction(txn)).length : 0,
    records: Object.values(counts).reduce((a, b) => a + b, 0),
  };
}

describe('signDoc signs each consented document once (SQLite, one instance)', () => {
  let env: TestEnvironment;
  before(async () => {
    env = await startEnvironment();
  });
  after(async () => {
    await env?.close();
  });
  const signDoc = (payload: Record<string, unknown>) => post(env.qtsp.signDocUrl, env.endpoints, payload);

  it('a repeated request gets the same signatures; nothing is minted, recorded or billed again', async () => {
    const SAD = await consent(env.endpoints);
    const first = await signDoc(body(SAD, HASHES));
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const txn = String(first.headers['x-transaction-id']);
    const before = await costs([env.qtsp], txn);
    assert.deepEqual({ evidence: before.evidence }, { evidence: 1 });

    const retry = await signDoc(body(SAD, HASHES));
    assert.equal(retry.status, 200, JSON.stringify(retry.body));
    assert.deepEqual(retry.body.SignatureObject, first.body.SignatureObject, 'the retry got other signatures');
    assert.equal(retry.headers['x-transaction-id'], txn);
    // one document of the two, and both in the other order: the kept signatures, in the order asked
    const one = await signDoc(body(SAD, [HASHES[1]!]));
    assert.deepEqual(one.body.SignatureObject, [first.body.SignatureObject![1]]);
    const reversed = await signDoc(body(SAD, [...HASHES].reverse()));
    assert.deepEqual(reversed.body.SignatureObject, [...first.body.SignatureObject!].reverse());
    assert.deepEqual(await costs([env.qtsp], txn), before, 'a repeated request minted, recorded or billed again');
    for (const [i, sig] of retry.body.SignatureObject!.entries()) {
      const verified = await opensslCmsVerify(Buffer.from(sig, 'base64'), DOCS[i]!, env.rootCaFile);
      assert.ok(verified.ok, verified.output);
    }
  });

  it('the same document with other parameters is a 400 that says why; so is a mix of signed and new documents', async () => {
    const SAD = await consent(env.endpoints);
    const first = await signDoc(body(SAD, [HASHES[0]!]));
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const txn = String(first.headers['x-transaction-id']);
    const before = await costs([env.qtsp], txn);
    const otherLevel = await signDoc(body(SAD, [HASHES[0]!], { conformance_level: 'AdES-B-T' }));
    assert.equal(otherLevel.status, 400, JSON.stringify(otherLevel.body));
    assert.equal(otherLevel.body.error, 'invalid_request');
    assert.match(
      otherLevel.body.error_description!,
      /hashes\[0\] was signed under this consent with signature_format C, AdES-B-B, ECDSA-P256 key/,
    );
    const mixed = await signDoc(body(SAD, [HASHES[1]!, HASHES[0]!]));
    assert.equal(mixed.status, 400, JSON.stringify(mixed.body));
    assert.match(
      mixed.body.error_description!,
      /hashes\[1\] was already signed under this consent by another request and others were not/,
    );
    assert.deepEqual(await costs([env.qtsp], txn), before);
    // the other consented document on its own is signed: once
    const second = await signDoc(body(SAD, [HASHES[1]!]));
    assert.equal(second.status, 200, JSON.stringify(second.body));
    assert.ok(
      (await opensslCmsVerify(Buffer.from(second.body.SignatureObject![0]!, 'base64'), DOCS[1]!, env.rootCaFile)).ok,
    );
    const after = await costs([env.qtsp], txn);
    assert.deepEqual(after, { certificates: before.certificates + 1, evidence: 2, records: before.records + 1 });
  });

  it('concurrent identical requests: one certificate, one evidence row, one record, the same bytes for all', async () => {
    const SAD = await consent(env.endpoints);
    const before = await costs([env.qtsp]);
    const answers = await Promise.all(Array.from({ length: 4 }, () => signDoc(body(SAD, HASHES))));
    for (const a of answers) assert.equal(a.status, 200, JSON.stringify(a.body));
    for (const a of answers.slice(1)) assert.deepEqual(a.body.SignatureObject, answers[0]!.body.SignatureObject);
    const txn = String(answers[0]!.headers['x-transaction-id']);
    assert.deepEqual(await costs([env.qtsp], txn), {
      certificates: before.certificates + 1,
      evidence: 1,
      records: before.records + 1,
    });
  });

  it('another consent for the same document signs it again (one signature per document per consent)', async () => {
    const a = await signDoc(body(await consent(env.endpoints, [HASHES[0]!]), [HASHES[0]!]));
    const b = await signDoc(body(await consent(env.endpoints, [HASHES[0]!]), [HASHES[0]!]));
    assert.equal(a.status, 200);
    assert.equal(b.status, 200);
    assert.notDeepEqual(a.body.SignatureObject, b.body.SignatureObject);
    assert.notEqual(a.headers['x-transaction-id'], b.headers['x-transaction-id']);
  });
});

describe('a request that fails after claiming gives its documents back', () => {
  let env: TestEnvironment;
  before(async () => {
    // a TSA that refuses connections: B-T fails after the documents were claimed and the evidence written
    env = await startEnvironment({ tsa: { url: 'http://127.0.0.1:1/tsa' } });
  });
  after(async () => {
    await env?.close();
  });

  it('B-T fails at the TSA (502); the same documents then sign at B-B under the same consent', async () => {
    const SAD = await consent(env.endpoints);
    const failed = await post(env.qtsp.signDocUrl, env.endpoints, body(SAD, HASHES, { conformance_level: 'AdES-B-T' }));
    assert.equal(failed.status, 502, JSON.stringify(failed.body));
    // had the claim stayed, this would be a 400 (signed under this consent with other parameters) or a wait
    const signed = await post(env.qtsp.signDocUrl, env.endpoints, body(SAD, HASHES));
    assert.equal(signed.status, 200, JSON.stringify(signed.body));
    assert.ok(
      (await opensslCmsVerify(Buffer.from(signed.body.SignatureObject![0]!, 'base64'), DOCS[0]!, env.rootCaFile)).ok,
    );
  });
});

describe('signDoc signs each consented document once across instances sharing PostgreSQL', () => {
  let pg: PostgresServer | undefined;
  let env: TestEnvironment | undefined;
  let second: QtspService | undefined;
  let secondDir: string | undefined;
  before(async () => {
    pg = await startPostgres();
    env = await startEnvironment({ store: { driver: 'postgres', url: await pg.freshSchemaUrl() } });
    // a second QTSP instance sharing the database and Redis (as behind a load balancer), with its own data
    // directory holding a copy of the CA material (each instance keeps its own files: key archive clone, lock)
    secondDir = mkdtempSync(join(tmpdir(), 'qtsp-second-'));
    cpSync(pkiPaths(env.dataDir).dir, pkiPaths(secondDir).dir, { recursive: true });
    second = await startQtsp(
      {
        ...env.config,
        dataDir: secondDir,
        server: { ...env.config.server, port: 0, publicationPort: 0 },
        ops: { ...env.config.ops, port: 0 },
      },
      { defaultMetrics: false, logger: pino({ level: 'silent' }) },
    );
  });
  after(async () => {
    await second?.close();
    await env?.close();
    await pg?.stop();
    if (secondDir) rmSync(secondDir, { recursive: true, force: true });
  });

  it('concurrent identical requests to both instances: one certificate, one evidence row, one record, the same bytes for all', async () => {
    const e = env!;
    const instances = [e.qtsp, second!];
    for (let round = 0; round < 3; round++) {
      const SAD = await consent(e.endpoints);
      const before = await costs(instances);
      const answers = await Promise.all(
        Array.from({ length: 4 }, (_, i) => post(instances[i % 2]!.signDocUrl, e.endpoints, body(SAD, HASHES))),
      );
      for (const a of answers) assert.equal(a.status, 200, JSON.stringify(a.body));
      for (const a of answers.slice(1))
        assert.deepEqual(
          a.body.SignatureObject,
          answers[0]!.body.SignatureObject,
          'two callers got different signatures of one document',
        );
      const txn = String(answers[0]!.headers['x-transaction-id']);
      const after = await costs(instances, txn);
      assert.deepEqual(
        after,
        { certificates: before.certificates + 1, evidence: 1, records: before.records + 1 },
        `round ${round}`,
      );
      for (const [i, sig] of answers[0]!.body.SignatureObject!.entries()) {
        assert.ok((await opensslCmsVerify(Buffer.from(sig, 'base64'), DOCS[i]!, e.rootCaFile)).ok);
      }
    }
  });
});
