/**
 * PostgreSQL lost under load: `qtsp serve` on PostgreSQL signs for a few concurrent callers while the server is
 * stopped with `pg_ctl stop -m immediate` (every connection cut at once, as in a crash) and started again, again
 * and again. Shown:
 * - the process stays up throughout (an unhandled 'error' of a pg client, one checked out between two statements
 *   of a transaction, used to end it);
 * - during an outage signDoc answers 503 temporarily_unavailable naming the evidence store, never another status
 *   and never a hang past the store's configured deadlines;
 * - after each restart calls succeed again;
 * - no record is lost or doubled. Every 200 has exactly one evidence record, its certificate is the one in the
 *   signature returned, and exactly one mediation record and one kept signature go with it. A call answered
 *   503 has neither a mediation record nor a kept signature. It may leave evidence behind: the evidence is
 *   written before signing (docs/architecture.md, "One signDoc request": claims and evidence are ordered writes,
 *   the signatures with the mediation record the durable one), so a call cut after it keeps its evidence
 *   without a signature having left. A commit whose answer the outage cut can have landed all the same: then
 *   the kept signature and the mediation record are there together, and the RP's retry receives that kept
 *   signature (nothing signed or billed twice).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { referenceId } from '../../src/mediation/record.ts';
import { authorizeSigning } from '../../src/rp/flow.ts';
import { rpAgent } from '../../src/rp/http.ts';
import { httpRequest, jsonBody, type HttpAgent } from '../../src/util/http-client.ts';
import { sha256b64, waitFor } from '../helpers/delivery.ts';
import { SHA256_OID } from '../helpers/environment.ts';
import {
  alive,
  spawnServe,
  startSharedPartsOnFreePorts,
  type ServeProcess,
  type SharedParts,
} from '../helpers/instances.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { signDocBody } from '../helpers/signing.ts';

const OUTAGES = 10;
const CALLERS = 3;
/** documents per consent (one signature each); a new consent is asked for when they are used up */
const DOCUMENTS_PER_CONSENT = 50;
/**
 * The longest a signDoc call may take: three store writes, each bounded by the pool's connection timeout (5 s)
 * or its query timeout (10 s), and a released claim. Past it, the call counts as hung.
 */
const CALL_DEADLINE_MS = 45_000;

interface Outcome {
  readonly sad: string;
  readonly hash: string;
  readonly status: number | undefined;
  readonly body: unknown;
  readonly ms: number;
  readonly error?: string;
}

interface EvidenceRow {
  readonly serial: string;
  readonly txn: string;
  readonly hashes: string;
  readonly der: Buffer;
}

async function query<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end();
  }
}

/** Hands out documents to sign, each once, asking the sandbox's AS for a new consent when they run out. */
function documentSource(shared: SharedParts): { next(): Promise<{ sad: string; hash: string }> } {
  let consent: Promise<{ sad: string; hashes: string[] }> | undefined;
  let consents = 0;
  const authorize = async () => {
    const label = `postgres loss ${consents++}`;
    const hashes = Array.from({ length: DOCUMENTS_PER_CONSENT }, (_, i) => sha256b64(`${label} ${i}`));
    const auth = await authorizeSigning(shared.endpoints, {
      documentDigests: hashes.map((hash, i) => ({ hash, label: `${label} ${i}` })),
      hashAlgorithmOID: SHA256_OID,
    });
    return { sad: auth.accessToken, hashes };
  };
  return {
    async next() {
      for (;;) {
        consent ??= authorize();
        const current = consent;
        const c = await current;
        const hash = c.hashes.shift();
        if (hash) return { sad: c.sad, hash };
        if (consent === current) consent = undefined;
      }
    },
  };
}

async function signOnce(url: string, agent: HttpAgent, sad: string, hash: string) {
  const res = await httpRequest(url, {
    method: 'POST',
    agent,
    timeoutMs: CALL_DEADLINE_MS,
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(signDocBody(sad, [hash])),
    maxResponseBytes: 1024 * 1024,
  });
  return { status: res.status, body: jsonBody(res) ?? res.body.toString('utf8') };
}

/** Signs one document after another on one kept-alive connection until `stopping()`; each outcome is pushed. */
async function caller(
  signDocUrl: string,
  shared: SharedParts,
  documents: ReturnType<typeof documentSource>,
  outcomes: Outcome[],
  stopping: () => boolean,
): Promise<void> {
  const agent = rpAgent(shared.endpoints);
  try {
    while (!stopping()) {
      const { sad, hash } = await documents.next();
      const started = performance.now();
      let outcome: Outcome;
      try {
        outcome = { sad, hash, ...(await signOnce(signDocUrl, agent, sad, hash)), ms: performance.now() - started };
      } catch (err) {
        const ms = performance.now() - started;
        outcome = { sad, hash, status: undefined, body: undefined, ms, error: String(err) };
      }
      outcomes.push(outcome);
      // a steady load, not a tight loop while every call fails at once
      await new Promise((r) => setTimeout(r, outcome.status === 200 ? 5 : 50));
    }
  } finally {
    agent.destroy();
  }
}

describe('PostgreSQL stopped with -m immediate under load, again and again', () => {
  let server: PostgresServer;
  let storeUrl: string;
  let shared: SharedParts;
  let qtsp: ServeProcess;
  let exitedEarly: { code: number | null; signal: NodeJS.Signals | null } | undefined;

  before(async () => {
    server = await startPostgres({ ownCluster: true });
    storeUrl = await server.freshSchemaUrl();
    const parts = await startSharedPartsOnFreePorts();
    shared = parts.shared;
    const env = shared.instanceEnv('qtsp', {
      port: parts.port,
      publicationPort: parts.publicationPort,
      store: { driver: 'postgres', url: storeUrl },
    });
    qtsp = await spawnServe(env);
    void qtsp.exited.then((how) => (exitedEarly ??= how));
  });

  after(async () => {
    if (qtsp && qtsp.child.exitCode === null && qtsp.child.signalCode === null) {
      qtsp.child.kill('SIGTERM');
      await qtsp.exited;
    }
    await shared?.close();
    await server?.stop();
  });

  it('stays up, answers 503 while the database is gone, recovers, and loses or doubles no record', async (t) => {
    const outage = server.outage;
    assert.ok(outage, 'the test cluster can be stopped and started');
    const documents = documentSource(shared);
    const outcomes: Outcome[] = [];
    let stopping = false;
    let broken: unknown; // a caller that could not go on (the sandbox failing to give a consent)
    const count = (status: number) => {
      if (broken) throw broken;
      if (exitedEarly)
        throw new Error(`qtsp serve ended (${JSON.stringify(exitedEarly)}):\n${qtsp.output().slice(-3000)}`);
      return outcomes.filter((o) => o.status === status).length;
    };
    const callers = Array.from({ length: CALLERS }, () =>
      caller(qtsp.signDocUrl, shared, documents, outcomes, () => stopping).catch((err: unknown) => {
        broken ??= err;
        stopping = true;
      }),
    );
    try {
      for (let i = 0; i < OUTAGES; i++) {
        const served = count(200);
        await waitFor(`a call signed after restart ${i}`, () => count(200) >= served + CALLERS, 60_000, 20);
        const refused = count(503);
        await outage.stopImmediate();
        await waitFor(`a 503 during outage ${i + 1}`, () => count(503) > refused, 30_000, 20);
        await outage.start();
      }
      const served = count(200);
      await waitFor('a call signed after the last restart', () => count(200) > served, 60_000, 20);
    } finally {
      stopping = true;
      await Promise.all(callers);
    }
    if (broken) throw broken;

    assert.equal(exitedEarly, undefined, `qtsp serve ended:\n${qtsp.output().slice(-3000)}`);
    assert.ok(alive(qtsp.pid), 'qtsp serve runs on');
    const ok = outcomes.filter((o) => o.status === 200);
    const refused = outcomes.filter((o) => o.status === 503);
    const slowest = Math.max(0, ...refused.map((o) => o.ms));
    t.diagnostic(
      `calls ${outcomes.length}, 200 ${ok.length}, 503 ${refused.length}, outages ${OUTAGES}, ` +
        `slowest 503 ${Math.round(slowest)} ms`,
    );
    for (const o of outcomes) {
      const { sad: _, ...shown } = o;
      assert.ok(o.status === 200 || o.status === 503, `only 200 and 503: ${JSON.stringify(shown).slice(0, 500)}`);
      if (o.status === 503) {
        const body = o.body as { error?: string; error_description?: string };
        assert.equal(body.error, 'temporarily_unavailable');
        assert.match(String(body.error_description), /evidence store is unavailable/);
      }
    }
    assert.ok(refused.length >= OUTAGES, 'every outage answered 503');

    await checkRecords(t, outcomes, qtsp.signDocUrl, shared, storeUrl);
  });
});

/**
 * Per document: a 200 has one evidence record, whose certificate is in the signature returned, one mediation
 * record and its signature kept; a call not answered 200 has neither record nor kept signature, unless its
 * durable write landed although the answer was cut (then both are there, and a retry returns the kept one).
 */
async function checkRecords(
  t: { diagnostic(message: string): void },
  outcomes: readonly Outcome[],
  signDocUrl: string,
  shared: SharedParts,
  storeUrl: string,
): Promise<void> {
  const evidence = await query<EvidenceRow>(
    storeUrl,
    `SELECT t.certificate_serial_hex AS serial, t.txn, t.hashes, c.der
       FROM signing_transactions t JOIN certificates c ON c.serial_hex = t.certificate_serial_hex`,
  );
  const outbox = new Set(
    (await query<{ id: string }>(storeUrl, `SELECT id FROM outbox WHERE topic = 'mediation'`)).map((r) => r.id),
  );
  const kept = new Map(
    (
      await query<{ hash: string; signature: string }>(
        storeUrl,
        'SELECT hash, signature FROM signed_documents WHERE signature IS NOT NULL',
      )
    ).map((r) => [r.hash, r.signature]),
  );
  const byHash = new Map<string, EvidenceRow[]>();
  for (const row of evidence)
    for (const hash of JSON.parse(row.hashes) as string[]) byHash.set(hash, [...(byHash.get(hash) ?? []), row]);

  let orphans = 0;
  const landed: Outcome[] = [];
  for (const o of outcomes) {
    const rows = byHash.get(o.hash) ?? [];
    const records = rows.filter((r) => outbox.has(referenceId(r.txn, r.serial)));
    if (o.status === 200) {
      const signature = (o.body as { SignatureObject: string[] }).SignatureObject[0]!;
      assert.equal(rows.length, 1, `one evidence record for a 200: ${rows.length}`);
      assert.ok(Buffer.from(signature, 'base64').includes(rows[0]!.der), 'the evidence names the certificate returned');
      assert.equal(records.length, 1, 'one mediation record for a 200');
      assert.equal(kept.get(o.hash), signature, 'the signature returned is the one kept');
      continue;
    }
    assert.ok(rows.length <= 1, `at most one evidence record for a call not answered 200: ${rows.length}`);
    if (!kept.has(o.hash)) {
      assert.equal(records.length, 0, 'no mediation record without a kept signature');
      if (rows.length === 1) orphans++;
      continue;
    }
    assert.equal(records.length, 1, 'a kept signature has its mediation record (one durable write)');
    landed.push(o);
  }
  assert.equal(outbox.size, outcomes.filter((o) => o.status === 200).length + landed.length, 'no other record');
  assert.equal(kept.size, outbox.size, 'one kept signature per mediation record');
  await retryLanded(landed, kept, signDocUrl, shared);
  t.diagnostic(
    `evidence ${evidence.length}, mediation records ${outbox.size}, evidence without signature ${orphans}, ` +
      `committed under a cut answer ${landed.length}`,
  );
}

/** A durable write that landed under a cut answer: the RP's retry receives the kept signature. */
async function retryLanded(
  landed: readonly Outcome[],
  kept: ReadonlyMap<string, string>,
  signDocUrl: string,
  shared: SharedParts,
): Promise<void> {
  if (landed.length === 0) return;
  const agent = rpAgent(shared.endpoints);
  try {
    for (const o of landed) {
      const res = await signOnce(signDocUrl, agent, o.sad, o.hash);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal((res.body as { SignatureObject: string[] }).SignatureObject[0], kept.get(o.hash));
    }
  } finally {
    agent.destroy();
  }
}
