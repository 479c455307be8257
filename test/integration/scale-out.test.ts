/**
 * Several instances: PostgreSQL, Redis, the sandbox, HAProxy with docker/haproxy.cfg (the file
 * compose uses) and two `qtsp serve` processes on loopback, a `qtsp worker` delivering for both. The sandbox's
 * service configuration names HAProxy as our signDoc endpoint. Shown:
 * - the load is split: both instances served signDoc calls made through HAProxy (their metrics);
 * - a certificate issued by one instance is "good" at the other's OCSP responder (openssl ocsp), and once
 *   revoked with `qtsp pki revoke` it is "revoked" there and listed by both instances' CRLs (openssl crl);
 *   cRLNumber never goes back, whichever instance answers;
 * - one instance killed with SIGKILL in the middle of a run: every signature answered 200 has its evidence,
 *   every evidence row its mediation record, and the mediation service received each record exactly once;
 * - configurations that cannot work are refused at start with a message that says why.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { referenceId } from '../../src/mediation/record.ts';
import { callSignDoc } from '../../src/rp/flow.ts';
import { refuseUnsharedRedis } from '../../src/cli/serve.ts';
import { loadConfig } from '../../src/config/load.ts';
import { startQtsp } from '../../src/service.ts';
import { openStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/types.ts';
import { partsOf } from '../../src/util/der.ts';
import { freePort } from '../../src/util/free-port.ts';
import { httpRequest } from '../../src/util/http-client.ts';
import { sha256b64, waitFor } from '../helpers/delivery.ts';
import { backendStatus, choosePorts, startHaproxy, type Ports } from '../helpers/haproxy.ts';
import { alive, spawnServe, startSharedParts, type ServeProcess, type SharedParts } from '../helpers/instances.ts';
import { opensslCmsVerify, run, scratch } from '../helpers/openssl.ts';
import { cmsParts } from '../helpers/pki-oracles.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { QTSP_BIN } from '../helpers/qtsp-cli.ts';
import { authorize, signaturesOf, signDocBody } from '../helpers/signing.ts';

function ended(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

describe('two qtsp serve instances behind HAProxy, sharing PostgreSQL and Redis', () => {
  let pg: PostgresServer;
  let storeUrl: string;
  let ports: Ports;
  let shared: SharedParts;
  let store: Store;
  let haproxy: { child: ChildProcess; output: () => string };
  let worker: ChildProcess;
  const instances: ServeProcess[] = [];
  const envs: Record<string, string>[] = [];

  before(async () => {
    pg = await startPostgres();
    storeUrl = await pg.freshSchemaUrl();
    ports = await choosePorts();
    shared = await startSharedParts({
      signDocUrl: `https://127.0.0.1:${ports.lb}/signDoc`,
      publicBaseUrl: `http://127.0.0.1:${ports.lbPublication}`,
    });
    const store_ = { driver: 'postgres' as const, url: storeUrl };
    // deliveries run in `qtsp worker`: an instance killed with SIGKILL then has no post of its own in flight
    const common = { QTSP_DELIVERY_IN_PROCESS_WORKER: 'false', QTSP_DELIVERY_RELAY_INTERVAL_MS: '200' };
    for (const i of [0, 1]) {
      envs.push(
        shared.instanceEnv(`qtsp${i + 1}`, {
          port: ports.signDoc[i]!,
          publicationPort: ports.publication[i]!,
          opsPort: ports.ops[i]!,
          store: store_,
          extra: { ...common, QTSP_INSTANCE_ID: `qtsp${i + 1}` },
        }),
      );
    }
    // the first start creates the schema (the second would wait on the migration lock anyway)
    instances.push(await spawnServe(envs[0]!));
    const workerEnv = shared.instanceEnv('worker', {
      port: 0,
      publicationPort: 0,
      store: store_,
      extra: { QTSP_DELIVERY_BACKOFF_MS: '200' },
    });
    worker = spawn(process.execPath, [QTSP_BIN, 'worker'], {
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', ...workerEnv },
      stdio: 'ignore',
    });
    instances.push(await spawnServe(envs[1]!));
    haproxy = startHaproxy(ports);
    await waitFor(
      'HAProxy to see both instances ready',
      async () => {
        if (haproxy.child.exitCode !== null) throw new Error(`haproxy exited with ${haproxy.child.exitCode}`);
        const s = await backendStatus(ports, 'qtsp_signdoc');
        return s.get('qtsp1') === 'UP' && s.get('qtsp2') === 'UP';
      },
      30_000,
      200,
    ).catch(async (err: Error) => {
      throw new Error(
        `${err.message}: ${JSON.stringify([...(await backendStatus(ports, 'qtsp_signdoc'))])}\n${haproxy.output()}`,
      );
    });
    store = await openStore({
      dataDir: shared.root,
      store: { driver: 'postgres', url: storeUrl, pingIntervalMs: 5000 },
    });
  });

  after(async () => {
    for (const i of instances) if (i.child.exitCode === null && i.child.signalCode === null) i.child.kill('SIGTERM');
    await Promise.all(instances.map((i) => i.exited));
    worker?.kill('SIGTERM');
    haproxy?.child.kill('SIGTERM');
    await Promise.all([worker && ended(worker), haproxy && ended(haproxy.child)]);
    await store?.close();
    await shared?.close();
    await pg?.stop();
  });

  /** one consent for `documents` documents; a consent signs each document once: call i signs hashes[i] */
  const authorizeAtLb = async (label: string, documents = 1) => {
    const hashes = Array.from({ length: documents }, (_, i) => sha256b64(i === 0 ? label : `${label} ${i}`));
    const auth = await authorize(
      shared.endpoints,
      hashes.map((hash, i) => ({ hash, label: `${label} ${i}` })),
    );
    return { ...auth, hash: hashes[0]! };
  };

  async function signDocCount(instance: number): Promise<number> {
    const res = await httpRequest(`http://127.0.0.1:${ports.ops[instance]}/metrics`, { timeoutMs: 5000 });
    const line = res.body
      .toString('utf8')
      .split('\n')
      .find((l) => l.startsWith('qtsp_signdoc_requests_total{') && l.includes('status="200"'));
    assert.ok(
      !line || line.includes(`qtsp_instance="qtsp${instance + 1}"`),
      `metrics carry the instance label: ${line}`,
    );
    return line ? Number(line.split(' ').pop()) : 0;
  }

  it('splits the load: the service configuration names HAProxy, and both instances serve signDoc', async () => {
    const calls = 10;
    const auth = await authorizeAtLb('split', calls);
    assert.equal(auth.qtsp.signDoc, `https://127.0.0.1:${ports.lb}/signDoc`, 'the relying party is sent to HAProxy');
    const before = [await signDocCount(0), await signDocCount(1)];
    for (let i = 0; i < calls; i++) {
      const res = await callSignDoc(
        auth.qtsp.signDoc,
        shared.endpoints,
        signDocBody(auth.accessToken, [auth.hashes[i]!]),
      );
      assert.equal(res.status, 200, JSON.stringify(res.body));
      if (i === 0) {
        const signature = Buffer.from((res.body as { SignatureObject: string[] }).SignatureObject[0]!, 'base64');
        assert.ok(
          (await opensslCmsVerify(signature, Buffer.from('split'), shared.rootCaFile)).ok,
          'openssl cms -verify -cades',
        );
      }
    }
    const served = [(await signDocCount(0)) - before[0]!, (await signDocCount(1)) - before[1]!];
    assert.equal(served[0]! + served[1]!, calls);
    assert.ok(served[0]! > 0 && served[1]! > 0, `both instances served calls: ${served.join(' + ')}`);
  });

  it('OCSP and CRLs agree across instances: good, then revoked by `qtsp pki revoke`; cRLNumber never goes back', async () => {
    const auth = await authorizeAtLb('revocation');
    // signed by instance 1 directly
    const res = await callSignDoc(
      `https://127.0.0.1:${ports.signDoc[0]}/signDoc`,
      shared.endpoints,
      signDocBody(auth.accessToken, [auth.hash]),
    );
    const signature = signaturesOf(res)[0]!;
    const leaf = (await cmsParts(signature)).certificates[0]!;
    const serialHex = partsOf(leaf).serialHex;
    const s = scratch();
    try {
      const pki = join(envs[0]!.QTSP_DATA_DIR!, 'pki');
      const files = {
        root: join(pki, 'root-ca.pem'),
        issuing: join(pki, 'issuing-ca.pem'),
        leaf: s.file('leaf.der', leaf),
      };
      const leafPem = s.file('leaf.pem');
      assert.ok((await run('openssl', ['x509', '-inform', 'DER', '-in', files.leaf, '-out', leafPem])).ok);
      const chain = s.file('chain.pem', readFileSync(files.root, 'utf8') + readFileSync(files.issuing, 'utf8'));
      const ocspAt = (instance: number) =>
        run('openssl', [
          'ocsp',
          '-url',
          `http://127.0.0.1:${ports.publication[instance]}/ocsp`,
          '-issuer',
          files.issuing,
          '-cert',
          leafPem,
          '-CAfile',
          files.root,
          '-verify_other',
          files.issuing,
          '-no_nonce',
        ]);
      const crlNumbers: bigint[] = [];
      const crlFrom = async (url: string): Promise<string> => {
        const crl = await httpRequest(url, { timeoutMs: 5000 });
        assert.equal(crl.status, 200);
        const file = s.file(`crl-${crlNumbers.length}.der`, crl.body);
        const text = await run('openssl', ['crl', '-inform', 'DER', '-in', file, '-CAfile', chain, '-noout', '-text']);
        assert.ok(text.ok && /verify OK/.test(text.output), text.output);
        const number =
          /X509v3 CRL Number:\s*\n\s*(\d+)/.exec(text.output)?.[1] ?? /crlNumber=(\S+)/.exec(text.output)?.[1];
        assert.ok(number, text.output);
        crlNumbers.push(BigInt(number));
        return text.output;
      };
      const viaLb = `http://127.0.0.1:${ports.lbPublication}/crl/issuing.crl`;

      const good = await ocspAt(1);
      assert.match(good.output, /leaf\.pem: good/, good.output);
      assert.match(good.output, /Response verify OK/);
      for (let i = 0; i < 4; i++) await crlFrom(viaLb);
      const beforeRevocation = crlNumbers[crlNumbers.length - 1]!;

      const revoke = spawnSync(process.execPath, [QTSP_BIN, 'pki', 'revoke', serialHex, '--reason', 'keyCompromise'], {
        env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', ...envs[1]! },
        encoding: 'utf8',
      });
      assert.equal(revoke.status, 0, revoke.stderr);

      for (const instance of [1, 0]) {
        const revoked = await ocspAt(instance);
        assert.match(revoked.output, /leaf\.pem: revoked/, revoked.output);
        assert.match(revoked.output, /Reason: keyCompromise/);
        const listed = await crlFrom(`http://127.0.0.1:${ports.publication[instance]}/crl/issuing.crl`);
        assert.match(
          listed.replace(/:/g, '').toLowerCase(),
          new RegExp(`serial number ${serialHex.replace(/^0+/, '')}`),
          `instance ${instance + 1} lists the certificate`,
        );
      }
      for (let i = 0; i < 4; i++) await crlFrom(viaLb);
      assert.ok(crlNumbers[crlNumbers.length - 1]! > beforeRevocation, 'a revocation raises the CRL number');
      for (let i = 1; i < crlNumbers.length; i++)
        assert.ok(crlNumbers[i]! >= crlNumbers[i - 1]!, `CRL number went back: ${crlNumbers.join(' ')}`);
    } finally {
      s.remove();
    }
  });

  it('refuses configurations that cannot work: sqlite with instance.id, no shared Redis, a data directory in use', async () => {
    // what `qtsp serve` runs at start, in this process (each `qtsp` process costs seconds of TypeScript loading);
    // one of them also as the command, to see the refusal reach the operator
    const p = async () => String(await freePort());
    const sqlite = shared.instanceEnv('sqlite', { port: 0, publicationPort: 0, extra: { QTSP_INSTANCE_ID: 'qtsp3' } });
    assert.throws(
      () => loadConfig({}, sqlite),
      /sqlite serves one instance on one machine, but instance\.id \(QTSP_INSTANCE_ID=qtsp3\) declares one of several/,
    );
    const noRedis = {
      ...shared.instanceEnv('no-redis', {
        port: 0,
        publicationPort: 0,
        store: { driver: 'postgres', url: storeUrl },
        extra: { QTSP_INSTANCE_ID: 'qtsp3' },
      }),
    };
    delete noRedis['QTSP_REDIS_URL'];
    assert.throws(() => refuseUnsharedRedis(loadConfig({}, noRedis), {}), /must share one Redis/);
    const sameDir = {
      ...envs[0]!,
      QTSP_SERVER_PORT: await p(),
      QTSP_SERVER_PUBLICATION_PORT: await p(),
      QTSP_OPS_PORT: '0',
      QTSP_INSTANCE_ID: 'qtsp3',
    };
    await assert.rejects(
      startQtsp(loadConfig({}, sameDir)),
      new RegExp(`${envs[0]!.QTSP_DATA_DIR} is in use by another running qtsp instance`),
    );
    const refused = spawnSync(process.execPath, [QTSP_BIN, 'serve'], {
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', ...sameDir },
      encoding: 'utf8',
    });
    assert.equal(refused.status, 1);
    assert.match(
      refused.stderr,
      /^configuration error:\n.*is in use by another running qtsp instance .*; each instance needs its own data directory/,
    );
    assert.ok(alive(instances[0]!.pid), 'the instance holding the directory runs on');
  });

  it('one instance killed with SIGKILL mid-run: no evidence lost, every record delivered, none sent twice', async () => {
    // everything signed so far is delivered first, so the mediation service's count starts clean
    await waitFor(
      'earlier records delivered',
      async () => {
        const c = await store.outboxCounts('mediation');
        return c.pending + c.queued === 0;
      },
      30_000,
      100,
    );
    const requestsBefore = shared.sandbox.mediation.requests;
    const total = 30;
    const auth = await authorizeAtLb('kill one instance', total);
    const concurrency = 3;
    let started = 0;
    let completed = 0;
    let killed = false;
    const results: { status?: number; serialHex?: string; txn?: string; error?: string }[] = [];
    const runner = async () => {
      while (started < total) {
        const document = started++;
        try {
          const res = await callSignDoc(
            auth.qtsp.signDoc,
            shared.endpoints,
            signDocBody(auth.accessToken, [auth.hashes[document]!]),
            { timeoutMs: 30_000 },
          );
          const so = (res.body as { SignatureObject?: string[] }).SignatureObject;
          const serialHex = so
            ? partsOf((await cmsParts(Buffer.from(so[0]!, 'base64'))).certificates[0]!).serialHex
            : undefined;
          results.push({
            status: res.status,
            txn: String(res.headers['x-transaction-id'] ?? ''),
            ...(serialHex ? { serialHex } : {}),
          });
        } catch (err) {
          results.push({ error: (err as Error).message });
        }
        completed++;
        if (completed === 8 && !killed) {
          killed = true;
          instances[1]!.child.kill('SIGKILL');
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, runner));
    assert.ok(killed);
    assert.equal((await instances[1]!.exited).signal, 'SIGKILL');

    const failed = results.filter((r) => r.status !== 200);
    // only calls in flight on the killed instance can be cut (a connection, not an HTTP error); the rest were
    // redispatched by HAProxy to the instance that lives
    assert.ok(failed.length <= concurrency, `at most the calls in flight fail: ${JSON.stringify(failed)}`);
    for (const f of failed)
      assert.ok(f.error && f.status === undefined, `a cut connection, not an error answer: ${JSON.stringify(f)}`);

    const txn = results.find((r) => r.txn)?.txn;
    assert.ok(txn, 'the answers name their transaction');
    const rows = await store.getTransaction(txn);
    const stored = new Set(rows.map((r) => r.certificateSerialHex));
    for (const r of results.filter((x) => x.status === 200))
      assert.ok(stored.has(r.serialHex!), `evidence of ${r.serialHex} answered 200`);
    assert.ok(rows.length >= total - failed.length && rows.length <= total);

    const expected = new Set(rows.map((r) => referenceId(r.txn, r.certificateSerialHex)));
    await waitFor(
      'every record at the mediation service',
      () => {
        const have = new Set(shared.sandbox.mediation.records().map((r) => r.record.reference_id));
        return [...expected].every((id) => have.has(id));
      },
      60_000,
      100,
    );
    await waitFor(
      'the outbox delivered',
      async () => {
        const c = await store.outboxCounts('mediation');
        return c.pending + c.queued === 0;
      },
      30_000,
      100,
    );
    assert.equal(
      shared.sandbox.mediation.requests - requestsBefore,
      expected.size,
      'each record was sent exactly once',
    );
  });
});
