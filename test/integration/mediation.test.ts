/**
 * Mediation records (spec 6.2) end to end, with a real redis-server (or REDIS_URL), real bullmq and the
 * sandbox mediation service over mutual TLS: one record per signDoc with exactly the fields of 6.2, none for
 * demo clients; retries, lost answers and permanent failures; Redis stopped in the middle of 200 signatures.
 */
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { REFERENCE_ID_PATTERN } from '../../src/mediation/record.ts';
import { rpAgent } from '../../src/rp/http.ts';
import { DEFAULT_SIGNING_DOCUMENTS } from '../../src/sandbox/index.ts';
import { httpRequest, jsonBody, tlsAgent, type HttpAgent } from '../../src/util/http-client.ts';
import { childEnv, median, percentile, postSignDoc, referenceIdsOf, sha256b64, waitFor } from '../helpers/delivery.ts';
import { QTSP_ID, startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';
import { authorize } from '../helpers/signing.ts';
import { REMOTE_SIGNATURE_CREATION_FIELDS as BASE_FIELDS } from '../helpers/mediation-record.ts';

let env: TestEnvironment;
let agent: HttpAgent;
const DOCS = [sha256b64('contract one\n'), sha256b64('contract two\n')];
const QID_HASH = sha256b64(Buffer.from(DEFAULT_SIGNING_DOCUMENTS[1]!.text, 'utf8'));

before(async () => {
  env = await startEnvironment({
    // lockMs 5000: a Redis stopped with SIGTERM may have moved a job to active whose answer the worker never
    // got (ioredis then sends the fetch again and gets the next job); that job runs once its lock expires and
    // the stalled check finds it, lockMs + lockMs/2 later at most: 7.5 s here, 45 s with the default 30 s
    delivery: { attempts: 4, backoffMs: 100, timeoutMs: 3000, relayIntervalMs: 200, lockMs: 5000 },
    redis: { commandTimeoutMs: 500 },
  });
  agent = rpAgent(env.endpoints);
});
after(async () => {
  agent.destroy();
  await env.close();
});
afterEach(async () => {
  await env.sandbox.controls.reset();
});

const docs = (hashes: string[]) => hashes.map((hash, i) => ({ hash, label: `contract ${i + 1}` }));
const recordsOf = (txn: string) => env.sandbox.mediation.records().filter((r) => r.record.transaction_id === txn);

/** One full flow and signDoc; returns the txn once its record(s) reached the mediation service. */
async function signAndWait(
  documentDigests: { hash: string; label: string }[],
  claims?: Record<string, null | { essential: true }>,
  hashes = documentDigests.map((d) => d.hash),
) {
  const auth = await authorize(env.endpoints, documentDigests, claims ? { claims } : {});
  const res = await postSignDoc(env, agent, auth.accessToken, hashes);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const [record] = await waitFor('the record at the mediation service', () =>
    recordsOf(res.txn).length ? recordsOf(res.txn) : undefined,
  );
  return { txn: res.txn, record: record!.record };
}

describe('one remote_signature_creation record per signDoc (spec 6.2)', () => {
  it('QES: exactly the fields of 6.2, our ids, the introspection txn, the count of documents', async () => {
    const { txn, record } = await signAndWait(docs(DOCS));
    assert.deepEqual(Object.keys(record).sort(), BASE_FIELDS);
    assert.equal(record.transaction_id, txn);
    assert.equal(record.owner_id, 'owner-qtsp-sandbox');
    assert.equal(record.service_provider_id, QTSP_ID);
    assert.equal(record.client_id, env.endpoints.rp.clientId);
    assert.equal(record.issuer, env.sandbox.issuer);
    assert.equal(record.credentialID, 'qes_eidas');
    assert.equal(record.count, 2);
    assert.ok(Math.abs(Date.parse(record.delivery_time) - Date.now()) < 60_000);
    assert.match(record.reference_id, REFERENCE_ID_PATTERN);
    assert.deepEqual([record.reference_id], await referenceIdsOf(env, txn));
    assert.equal(recordsOf(txn).length, 1);
    const entry = await env.qtsp.deps.store.getOutbox(record.reference_id);
    await waitFor(
      'the outbox entry marked delivered',
      async () => (await env.qtsp.deps.store.getOutbox(record.reference_id))?.state === 'delivered',
    );
    assert.equal(entry?.topic, 'mediation');
  });

  it('QESID: requested_claims as asked (essential flags), provided_claim_names as put into the certificate', async () => {
    const { record } = await signAndWait(docs(DOCS.slice(0, 1)), { nationalities: null, address: { essential: true } });
    assert.deepEqual(Object.keys(record).sort(), [...BASE_FIELDS, 'provided_claim_names', 'requested_claims'].sort());
    assert.deepEqual(record.requested_claims, {
      verified_claims: { claims: { nationalities: null, address: { essential: true } } },
    });
    for (const claim of ['given_name', 'family_name', 'nationalities', 'address']) {
      assert.ok(
        record.provided_claim_names!.includes(`verified_claims/claims/${claim}`),
        `${claim} missing in ${record.provided_claim_names}`,
      );
    }
    assert.ok(record.provided_claim_names!.every((n) => n.startsWith('verified_claims/claims/')));
    assert.equal(record.count, 1);
  });

  it('QID alone: the default document does not count (count 0)', async () => {
    const { record } = await signAndWait([{ hash: QID_HASH, label: '' }], { birthdate: null });
    assert.equal(record.count, 0);
    assert.deepEqual(record.requested_claims, { verified_claims: { claims: { birthdate: null } } });
  });

  it('QID with a custom document: only the custom document counts', async () => {
    const { record } = await signAndWait(
      [
        { hash: QID_HASH, label: '' },
        { hash: DOCS[0]!, label: 'contract' },
      ],
      { birthdate: null },
    );
    assert.equal(record.count, 1);
  });

  it('a demo client: signed, but no record and no outbox entry (spec 3)', async () => {
    const demo = await env.sandbox.registerClient({ clientId: 'demo-rp', state: 'demo' });
    const endpoints = { ...env.endpoints, rp: demo };
    const demoAgent = rpAgent(endpoints);
    try {
      const auth = await authorize(endpoints, docs(DOCS));
      const res = await postSignDoc(env, demoAgent, auth.accessToken, auth.hashes);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const [id] = await referenceIdsOf(env, res.txn);
      assert.equal(await env.qtsp.deps.store.getOutbox(id!), undefined);
      // an active client's record signed afterwards arrives; the demo one never does
      await signAndWait(docs(DOCS));
      await env.qtsp.delivery.idle();
      assert.equal(recordsOf(res.txn).length, 0);
    } finally {
      demoAgent.destroy();
    }
  });
});

describe('delivery to the mediation service', () => {
  it('failures are retried with backoff until the record is taken; the attempts are counted', async () => {
    env.sandbox.controls.mediation.failNext = 2;
    const { record } = await signAndWait(docs(DOCS));
    const entry = await waitFor('delivered', async () => {
      const e = await env.qtsp.deps.store.getOutbox(record.reference_id);
      return e?.state === 'delivered' ? e : undefined;
    });
    assert.equal(entry.attempts, 2);
    assert.match(entry.lastError ?? '', /HTTP 503/);
  });

  it('a lost answer: the retry is refused as a duplicate, which counts as delivered; stored once', async () => {
    env.sandbox.controls.mediation.mode = 'store-then-500';
    const before = env.sandbox.mediation.requests;
    const { txn, record } = await signAndWait(docs(DOCS));
    env.sandbox.controls.mediation.mode = 'normal';
    await waitFor(
      'delivered',
      async () => (await env.qtsp.deps.store.getOutbox(record.reference_id))?.state === 'delivered',
    );
    assert.ok(env.sandbox.mediation.requests - before >= 2, 'the record was posted only once');
    assert.equal(recordsOf(txn).length, 1);
  });

  it('a permanent failure stays in the outbox as failed, and `qtsp mediation status` shows it', async () => {
    env.sandbox.controls.mediation.mode = 'http500';
    const auth = await authorize(env.endpoints, docs(DOCS));
    const res = await postSignDoc(env, agent, auth.accessToken, auth.hashes);
    assert.equal(res.status, 200, 'a failing mediation service must not affect signDoc (spec 6.2)');
    const [id] = await referenceIdsOf(env, res.txn);
    const entry = await waitFor('failed', async () => {
      const e = await env.qtsp.deps.store.getOutbox(id!);
      return e?.state === 'failed' ? e : undefined;
    });
    assert.equal(entry.attempts, 4);
    assert.match(entry.lastError ?? '', /HTTP 500/);
    const status = await qtsp(['mediation', 'status', '--json'], childEnv(env));
    assert.equal(status.code, 0, status.output);
    const parsed = JSON.parse(status.output) as Record<
      string,
      { outbox: Record<string, number>; queue?: Record<string, number> }
    >;
    const counts = await env.qtsp.deps.store.outboxCounts('mediation');
    assert.deepEqual(parsed['mediation']!.outbox, counts);
    assert.ok(counts.failed >= 1 && parsed['mediation']!.queue!['failed']! >= 1);
    const text = await qtsp(['mediation', 'status'], childEnv(env));
    assert.match(text.output, new RegExp(`confirmed by the mediation service: ${counts.delivered}`));
    assert.match(text.output, /failed [1-9]/);
  });
});

describe('the sandbox mediation service', () => {
  const qtspAgent = () =>
    tlsAgent({
      ca: readFileSync(env.endpoints.tlsCaFile),
      cert: readFileSync(env.config.client.certFile),
      key: readFileSync(env.config.client.keyFile),
    });
  const record = (reference_id: string) => ({
    type: 'remote_signature_creation',
    record: {
      delivery_time: new Date().toISOString(),
      transaction_id: 't-1',
      owner_id: 'o',
      credentialID: 'qes_eidas',
      count: 1,
      service_provider_id: QTSP_ID,
      client_id: 'rp',
      issuer: env.sandbox.issuer,
      reference_id,
    },
  });
  const post = (a: HttpAgent, body: unknown) =>
    httpRequest(env.sandbox.mediationUrl, {
      method: 'POST',
      agent: a,
      timeoutMs: 5000,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('refuses a duplicate reference_id in its scope with 409 and a JSON error', async () => {
    const a = qtspAgent();
    try {
      assert.equal((await post(a, record('dup-1'))).status, 201);
      const again = await post(a, record('dup-1'));
      assert.equal(again.status, 409);
      assert.equal((jsonBody(again) as { error: string }).error, 'duplicate_reference_id');
      assert.match((jsonBody(again) as { error_description: string }).error_description, /dup-1/);
    } finally {
      a.destroy();
    }
  });

  it('refuses a record that is not exactly 6.2 (400), and a sender that is not that service provider (401)', async () => {
    const a = qtspAgent();
    try {
      const extra = record('x-1');
      const bad = await post(a, { ...extra, record: { ...extra.record, reference_id: 'has spaces', surplus: 1 } });
      assert.equal(bad.status, 400);
      assert.match((jsonBody(bad) as { error_description: string }).error_description, /reference_id/);
      const foreign = await post(agent, record('x-2')); // the RP's certificate
      assert.equal(foreign.status, 401);
    } finally {
      a.destroy();
    }
  });
});

describe('Redis stopped during a run of 200 signatures', () => {
  it('every signDoc succeeds, and after Redis returns the mediation service holds exactly 200 records', async (t) => {
    const local = env.redis.local;
    if (!local) return t.skip('REDIS_URL is shared: this test stops its own redis-server only');
    // 20 consents for 10 documents each, one signDoc call per document: 200 signatures, 200 records (one per call)
    const auths = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        authorize(env.endpoints, docs(Array.from({ length: 10 }, (_, j) => sha256b64(`batch document ${i}.${j}`)))),
      ),
    );
    const calls = auths.flatMap((a) => a.hashes.map((hash) => ({ accessToken: a.accessToken, hashes: [hash] })));
    const up: number[] = [];
    const down: number[] = [];
    const txns = new Set<string>();
    for (const [i, auth] of calls.entries()) {
      if (i === 100) await local.stop();
      const res = await postSignDoc(env, agent, auth.accessToken, auth.hashes);
      assert.equal(res.status, 200, `call ${i}: ${JSON.stringify(res.body)}`);
      (i < 100 ? up : down).push(res.ms);
      txns.add(res.txn);
    }
    const pendingWhileDown = (await env.qtsp.deps.store.outboxCounts('mediation')).pending;
    assert.ok(pendingWhileDown > 0, 'records written while Redis was down wait in the outbox');
    await local.restart();
    const ids = new Set((await Promise.all([...txns].map((txn) => referenceIdsOf(env, txn)))).flat());
    assert.equal(ids.size, 200);
    const held = () => env.sandbox.mediation.records().filter((r) => ids.has(r.record.reference_id));
    const restarted = Date.now();
    await waitFor('200 records at the mediation service', () => held().length === 200, 30_000).catch(
      async (err: Error) => {
        // what a CI log needs to tell a lost record from a late one: the outbox and queue counts
        throw new Error(`${err.message}; ${held().length} held; ${JSON.stringify(await env.qtsp.delivery.status())}`);
      },
    );
    t.diagnostic(`all 200 records at the mediation service ${Date.now() - restarted} ms after Redis returned`);
    await env.qtsp.delivery.idle();
    assert.equal(held().length, 200);
    assert.equal(new Set(held().map((r) => r.record.reference_id)).size, 200);
    t.diagnostic(
      `signDoc latency, Redis up:   median ${median(up).toFixed(1)} ms, p95 ${percentile(up, 95).toFixed(1)} ms (n=${up.length})`,
    );
    t.diagnostic(
      `signDoc latency, Redis down: median ${median(down).toFixed(1)} ms, p95 ${percentile(down, 95).toFixed(1)} ms (n=${down.length})`,
    );
  });
});
