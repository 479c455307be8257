/**
 * The benchmark's load generator, a child process of bench/sign-doc.bench.ts (so its TLS client work and
 * JSON handling never land on the QTSP's CPU). Driven over IPC:
 *   {type:'prefetch', count, hashes, level, format?}  obtain `count` SADs from the sandbox's AS, each for its own fresh
 *                                            random document digests (one consent per signDoc call: a SAD is
 *                                            never reused), before any signDoc is timed
 *   {type:'run', concurrency, slowMs?, marks?} | {type:'run', rate, slowMs?, marks?}
 *                                            spend every prefetched SAD on one signDoc call: closed loop with
 *                                            `concurrency` connections, or open loop at `rate` calls/s
 *                                            (latency from the scheduled start, so queueing counts); the calls
 *                                            slower than each of slowMs are counted; {type:'mark', done} is sent
 *                                            when the number of finished calls reaches each of marks (so the
 *                                            bench can read the QTSP's CPU there: its drift across the run)
 *   {type:'exit'}
 * All signDoc calls go over keep-alive mutual TLS with the RP's certificate (the SAD's cnf binding).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as https from 'node:https';
import { performance } from 'node:perf_hooks';
import { authorizeSigning, type RpEndpoints } from '../src/rp/flow.ts';
import { rpAgent } from '../src/rp/http.ts';
import { SHA256 } from '../src/crypto/algorithms.ts';

export interface LoadGeneratorSetup {
  readonly endpoints: RpEndpoints;
  readonly signDocUrl: string;
}

export type LoadCommand =
  | { type: 'prefetch'; count: number; hashes: number; level: string; parallel: number; format?: string }
  | { type: 'run'; concurrency: number; rate?: undefined; slowMs?: readonly number[]; marks?: readonly number[] }
  | { type: 'run'; rate: number; concurrency?: undefined; slowMs?: readonly number[]; marks?: readonly number[] }
  | { type: 'exit' };

export interface RunResult {
  readonly type: 'result';
  readonly ok: number;
  readonly failed: number;
  readonly firstFailure?: string;
  readonly wallMs: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /** successful calls slower than each of the run's slowMs, in that order */
  readonly slow: readonly number[];
}

const PROFILE = 'http://uri.etsi.org/19432/v1.1.1#/creationprofile#';
const setup = JSON.parse(process.env.BENCH_LOAD_SETUP ?? '{}') as LoadGeneratorSetup;
const target = new URL(setup.signDocUrl);
let prepared: Buffer[] = [];

function percentile(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN;
}

async function prefetch(cmd: Extract<LoadCommand, { type: 'prefetch' }>): Promise<void> {
  const agent = rpAgent(setup.endpoints);
  const bodies: Buffer[] = [];
  let next = 0;
  const one = async () => {
    while (next < cmd.count) {
      next++;
      const hashes = Array.from({ length: cmd.hashes }, () => randomBytes(32).toString('base64'));
      const auth = await authorizeSigning(
        setup.endpoints,
        { documentDigests: hashes.map((hash, i) => ({ hash, label: `bench-${i}` })), hashAlgorithmOID: SHA256.oid },
        { agent },
      );
      const body = {
        SAD: auth.accessToken,
        credentialID: 'qes_eidas',
        documentDigests: { hashes, hashAlgorithmOID: SHA256.oid },
        profile: PROFILE,
        signature_format: cmd.format ?? 'C',
        conformance_level: cmd.level,
      };
      bodies.push(Buffer.from(JSON.stringify(body)));
    }
  };
  await Promise.all(Array.from({ length: cmd.parallel }, one));
  agent.destroy();
  prepared = bodies;
}

/** one signDoc; resolves to undefined on 200, else a short description of the failure */
function signDoc(agent: https.Agent, body: Buffer): Promise<string | undefined> {
  return new Promise((resolve) => {
    const req = https.request(
      target,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': body.length } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve(
            res.statusCode === 200
              ? undefined
              : `HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString('utf8').slice(0, 200)}`,
          ),
        );
        res.on('error', (err) => resolve(err.message));
      },
    );
    req.on('error', (err) => resolve(err.message));
    req.end(body);
  });
}

async function run(cmd: Extract<LoadCommand, { type: 'run' }>): Promise<RunResult> {
  const tls = {
    ca: readFileSync(setup.endpoints.tlsCaFile),
    cert: readFileSync(setup.endpoints.rp.certFile),
    key: readFileSync(setup.endpoints.rp.keyFile),
  };
  const agent = new https.Agent({ ...tls, keepAlive: true, maxSockets: cmd.concurrency ?? 256 });
  const bodies = prepared;
  prepared = [];
  const latencies: number[] = [];
  let failed = 0;
  let firstFailure: string | undefined;
  const marks = new Set(cmd.marks ?? []);
  const record = (t0: number, failure: string | undefined) => {
    if (failure === undefined) latencies.push(performance.now() - t0);
    else {
      failed++;
      firstFailure ??= failure;
    }
    const done = latencies.length + failed;
    if (marks.has(done)) process.send!({ type: 'mark', done });
  };
  // warm the connections first (TLS handshakes are not what we measure): one cheap GET per socket (signDoc
  // answers 405 to a GET without reading anything; health and metrics are on the operations port)
  const sockets = cmd.concurrency ?? Math.min(64, bodies.length);
  await Promise.all(
    Array.from(
      { length: sockets },
      () =>
        new Promise<void>((resolve) =>
          https.get(new URL(target), { agent }, (res) => res.resume().on('end', resolve)).on('error', () => resolve()),
        ),
    ),
  );
  const wall0 = performance.now();
  if (cmd.concurrency !== undefined) {
    let next = 0;
    await Promise.all(
      Array.from({ length: cmd.concurrency }, async () => {
        while (next < bodies.length) {
          const body = bodies[next++]!;
          const t0 = performance.now();
          record(t0, await signDoc(agent, body));
        }
      }),
    );
  } else {
    const interval = 1000 / cmd.rate!;
    await Promise.all(
      bodies.map(async (body, i) => {
        const scheduled = wall0 + i * interval;
        const wait = scheduled - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        record(scheduled, await signDoc(agent, body));
      }),
    );
  }
  const wallMs = performance.now() - wall0;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return {
    type: 'result',
    ok: latencies.length,
    failed,
    ...(firstFailure ? { firstFailure } : {}),
    wallMs,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: latencies[latencies.length - 1] ?? NaN,
    slow: (cmd.slowMs ?? []).map((ms) => latencies.filter((l) => l > ms).length),
  };
}

process.on('message', (msg: LoadCommand) => {
  const reply = (m: unknown) => process.send!(m);
  if (msg.type === 'exit') process.exit(0);
  const work =
    msg.type === 'prefetch' ? prefetch(msg).then(() => ({ type: 'prefetched', count: prepared.length })) : run(msg);
  work.then(reply, (err: unknown) => reply({ type: 'error', message: (err as Error).message }));
});
process.send!({ type: 'ready' });
