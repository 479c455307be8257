/**
 * `npm run bench`: what one signDoc costs the QTSP, measured on the QTSP alone.
 *
 * Three kinds of process, as in production: the sandbox (the bank's AS, the platform) runs `qtsp sandbox`, the
 * QTSP runs `qtsp serve` (bench/qtsp-process.ts), and the load generator (bench/load-generator.ts) first
 * obtains one SAD per signDoc call from the sandbox, each for fresh random document digests (one consent per
 * call), and then spends them over keep-alive mutual TLS. SAD acquisition therefore never runs in the QTSP,
 * and the QTSP's CPU time (user + system of its process and its children, /proc/PID/stat) divided by the calls
 * served is its cost per signDoc. Then, in this process, the step costs of the pipeline and the raw
 * node:crypto floor of the same operations, and the ratios between them. Figures only: it never fails on timing.
 *
 *   npm run bench                  quick mode: CAdES B-B, B-T, B-LT, B-LTA x 1 and 10 hashes, PAdES B-B, B-T, B-LT
 *                                  and XAdES B-B, B-T with one hash; software keys
 *   npm run bench -- --full        more calls per row, and the half-load latency run for every row
 *   npm run bench -- --profile     also a V8 CPU profile of the QTSP during a run of the first level and hash
 *                                  count (B-B, one hash), written as a .cpuprofile in profiles/ (Chrome DevTools or
 *                                  speedscope) and summarised per module and per pipeline step
 *   npm run bench -- --perf        also an on-CPU profile of the QTSP with Linux perf (Debian package linux-perf)
 *                                  during such a run: CPU time per call by thread, and on the event loop by module
 *                                  (bench/perf-summary.ts says why: V8's profile counts wall time). The QTSP then
 *                                  runs with --perf-basic-prof for every row; perf.data stays in profiles/
 *   npm run bench -- --workers N   the QTSP with server.workers = N (one process per core) beside the
 *                                  single-process figures
 * Environment:
 *   BENCH_REQUESTS          calls per one-hash row, default 300 (2000 with --full)
 *   BENCH_CONCURRENCY       closed-loop connections, default 8
 *   BENCH_LEVELS            e.g. AdES-B-B,AdES-B-T,P:AdES-B-T,X:AdES-B-B
 *   BENCH_HASHES            e.g. 1,10
 *   BENCH_KEYS              software[,softhsm]
 *   BENCH_WORKER=inprocess  the delivery workers inside the QTSP process (default: off, as a deployment runs
 *                           `qtsp worker` beside it)
 *   BENCH_ITERATIONS        in-process step loops, default 2000
 *   BENCH_FLOOR_CALLS       calls of each store floor and of the queue floor (and as many to warm up), default 1000
 *   BENCH_WARMUP            signDoc calls before the first row, default 6000
 *   BENCH_IDLE_SECONDS      how long the QTSP is watched without calls after its warm-up and half as long again
 *                           (software keys), default 20; 0: not at all
 *   BENCH_QTSP_NODE_FLAGS   node flags for the QTSP process, e.g. --trace-opt
 *   BENCH_QTSP_PRELOAD      LD_PRELOAD for the QTSP process only, e.g. /usr/lib/x86_64-linux-gnu/libjemalloc.so.2
 *   BENCH_QTSP_STDOUT       a file for what the QTSP process prints, such as those traces
 *   BENCH_HEAP_SAMPLING=1   with --profile: also a V8 allocation profile of the same calls, collected objects
 *                           included, as a .heapprofile beside the .cpuprofile; =promoted: only what outlived the
 *                           young generation; =live: only what was still alive at the end
 * Each run of calls starts after the QTSP sealed its journal and ends once it sealed the run's own entries, both on
 * the bench's command: a run pays for sealing what it wrote, not what the runs before it wrote.
 * The B-B one-hash row (software keys, SQLite) is also run by a QTSP started with journal.enabled false, after the
 * rows above: the line "journal on vs off" gives the journal's share of signDoc's CPU (bench/journal-cost.ts).
 * Each row's ratio line sets its QTSP CPU against four floors: transport (bench/transport-floor.ts), the raw crypto
 * of its signatures and checks, and for a SQLite row the store floor (the bytes its calls wrote, written by a bare
 * writer thread, bench/store-floor.ts) and the queue floor (one bullmq add per outbox record, bench/queue-floor.ts).
 * The half-load run of B-B one hash is run against the transport floor too, at the same offered rate: the latency
 * any service gets from this machine, sandbox and load generator. Beside each half-load run of the QTSP: its
 * event-loop delay, and how many calls were slower than 10 / 25 / 50 ms at the load generator and inside the QTSP
 * (its own qtsp_signdoc_duration_seconds histogram, read from the operations port before and after): a tail
 * that the QTSP's histogram shows too is the QTSP's, not the machine's. The last line says how long the bench took.
 */
import { fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, generateKeyPairSync, randomBytes, sign, verify } from 'node:crypto';
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { prepare, qtspConfigInput, startSandboxProcess, type SandboxInfo } from '../src/cli/ecosystem.ts';
import { envName, loadConfig } from '../src/config/load.ts';
import type { ConfigInput } from '../src/config/schema.ts';
import { provideRedis } from '../src/util/redis-server.ts';
import { custodyVariant, type CustodyVariant } from './custody.ts';
import { startQtsp } from '../src/service.ts';
import { introspect, verifyIntrospectionResponse } from '../src/introspection/client.ts';
import { authorizeSigning } from '../src/rp/flow.ts';
import { checkConsent } from '../src/signing/consent.ts';
import { signConsented } from '../src/signing/sign-doc.ts';
import { chooseSigning } from '../src/ades/offer.ts';
import { parseSignDocRequest } from '../src/signing/request.ts';
import { x5tS256 } from '../src/trust/fingerprint.ts';
import { validateSad } from '../src/trust/sad.ts';
import { fromPem } from '../src/util/base64.ts';
import { generateKeyPair } from '../src/crypto/keys.ts';
import { SoftwareSigningKey } from '../src/crypto/signature.ts';
import { mintSignerCertificate } from '../src/ca/signer-certificate.ts';
import { buildCadesBaselineB } from '../src/ades/cades.ts';
import { SHA256 } from '../src/crypto/algorithms.ts';
import type { KeyCustody } from '../src/custody/types.ts';
import type { LoadCommand, RunResult } from './load-generator.ts';
import { journalCostLine } from './journal-cost.ts';
import { parsePerfScript, summarisePerf } from './perf-summary.ts';
import { CLK_TCK, ticksOf } from './proc-cpu.ts';
import { summariseProfile } from './profile-summary.ts';
import { startPostgres } from '../test/helpers/postgres.ts';
import { queueAddFloor } from './queue-floor.ts';
import { storeFloor, storeMark, storeWritten, type StoreFloor, type WrittenTable } from './store-floor.ts';

const { values: flags } = parseArgs({
  options: {
    full: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    perf: { type: 'boolean', default: false },
    workers: { type: 'string' },
  },
});
const FULL = flags.full!;
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? (FULL ? 2000 : 300));
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
/** signature cases: a level (CAdES), or FORMAT:level for PAdES (P) and XAdES (X) */
const LEVELS = (
  process.env.BENCH_LEVELS ??
  'AdES-B-B,AdES-B-T,AdES-B-LT,AdES-B-LTA,P:AdES-B-B,P:AdES-B-T,P:AdES-B-LT,X:AdES-B-B,X:AdES-B-T'
).split(',');
/** the format and conformance level of a case of LEVELS */
const caseOf = (entry: string) => {
  const [format, level] = entry.includes(':') ? (entry.split(':') as [string, string]) : ['C', entry];
  return { format, level };
};
const HASHES = (process.env.BENCH_HASHES ?? '1,10').split(',').map(Number);
const KEYS = (process.env.BENCH_KEYS ?? 'software').split(',');
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 2000);
/**
 * signDoc calls before any row is measured, run in chunks of WARMUP_CHUNK: V8 optimises the hot path over the
 * first thousands of calls, and that compiling (on its own threads) would count as the QTSP's CPU. On two busy
 * cores its compiler threads lag, so a warm-up of a third of this left compiling in the measured rows. Each
 * chunk's CPU is printed (printWarmUps): the last chunks should agree.
 */
const WARMUP = Number(process.env.BENCH_WARMUP ?? 6000);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 20);
const WARMUP_CHUNK = 1000;
const WORKER_IN_PROCESS = process.env.BENCH_WORKER === 'inprocess';
const WORKERS = flags.workers ? Number(flags.workers) : undefined;
/** latency thresholds, ms, counted in half-load runs: bucket bounds of the QTSP's qtsp_signdoc_duration_seconds */
const SLOW_MS = [10, 25, 50];
const HERE = fileURLToPath(new URL('.', import.meta.url));
const silent = pino({ level: 'silent' });

/**
 * Key custody variants (bench/custody.ts): software keys, or every key in a SoftHSM2 token
 * (BENCH_KEYS=software,softhsm runs both).
 */
const variants = new Map<string, CustodyVariant | string>();
async function custodySettings(keys: string, dataDir: string, base: ConfigInput): Promise<CustodyVariant | string> {
  if (!variants.has(keys)) variants.set(keys, await custodyVariant(keys, dataDir, base));
  return variants.get(keys)!;
}

// ---------------------------------------------------------------------------------------------------------
// processes

/** user + system CPU seconds of a process and all its descendants (cluster workers), from /proc, by kind of thread */
interface CpuSeconds {
  readonly total: number;
  /** the event loop threads (the thread whose id is its process's id) */
  readonly main: number;
  /** the SQLite store's writer threads (named `qtsp-store`, sqlite-writer-thread.ts) */
  readonly store: number;
  /** everything else: V8's garbage collection and compiler threads, libuv's thread pool, other workers */
  readonly other: number;
  /** `other` by thread name (/proc/PID/task/TID/comm: V8's platform workers are "V8Worker", libuv's "libuv-worker") */
  readonly otherByName: Readonly<Record<string, number>>;
}

function treeCpuSeconds(pid: number): CpuSeconds {
  const ticks = { main: 0, store: 0, other: 0 };
  const byName: Record<string, number> = {};
  const visit = (p: number) => {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      return; // exited
    }
    for (const t of tasks) {
      let children = '';
      try {
        const n = ticksOf(`/proc/${p}/task/${t}/stat`);
        const name = readFileSync(`/proc/${p}/task/${t}/comm`, 'utf8').trim();
        const kind = Number(t) === p ? 'main' : name === 'qtsp-store' ? 'store' : 'other';
        ticks[kind] += n;
        if (kind === 'other') byName[name] = (byName[name] ?? 0) + n / CLK_TCK;
        children = readFileSync(`/proc/${p}/task/${t}/children`, 'utf8');
      } catch {
        continue; // the thread ended
      }
      for (const c of children.split(' ').filter(Boolean)) visit(Number(c));
    }
  };
  visit(pid);
  return {
    total: (ticks.main + ticks.store + ticks.other) / CLK_TCK,
    main: ticks.main / CLK_TCK,
    store: ticks.store / CLK_TCK,
    other: ticks.other / CLK_TCK,
    otherByName: byName,
  };
}

function flatten(
  input: Record<string, unknown>,
  path: string[] = [],
  out: Record<string, string> = {},
): Record<string, string> {
  for (const [k, v] of Object.entries(input)) {
    if (v === undefined) continue;
    if (v && typeof v === 'object' && !Array.isArray(v)) flatten(v as Record<string, unknown>, [...path, k], out);
    else out[envName([...path, k])] = String(v);
  }
  return out;
}

interface QtspProcess {
  readonly pid: number;
  readonly signDocUrl: string;
  /** the operations listener (health, metrics); none for the transport floor */
  readonly opsUrl?: string;
  command(msg: unknown): Promise<{ type: string; [k: string]: unknown }>;
  stop(): Promise<void>;
}

/** bench/qtsp-process.ts, or (`script` transport-floor.ts) the transport floor, configured as `qtsp serve` */
async function startQtspProcess(
  input: ConfigInput,
  extraEnv: Record<string, string>,
  script = 'qtsp-process.ts',
): Promise<QtspProcess> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...flatten(input as Record<string, unknown>),
    ...extraEnv,
    QTSP_LOG_LEVEL: 'silent',
  };
  delete env.REDIS_URL;
  // another malloc (jemalloc, say) for the QTSP process alone, to measure it against glibc's
  if (process.env.BENCH_QTSP_PRELOAD && script === 'qtsp-process.ts') env.LD_PRELOAD = process.env.BENCH_QTSP_PRELOAD;
  // --perf-basic-prof also turns on V8's event log, one isolate-*.log per thread in the working directory: into
  // one file in tmp instead
  const perfFlags =
    flags.perf && script === 'qtsp-process.ts'
      ? ['--perf-basic-prof', `--logfile=${join(tmpdir(), 'qtsp-bench-v8.log')}`, '--no-logfile-per-isolate']
      : [];
  const nodeFlags = [...(process.env.BENCH_QTSP_NODE_FLAGS ?? '').split(' ').filter(Boolean), ...perfFlags];
  const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', join(HERE, script)], {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    env,
  });
  if (process.env.BENCH_QTSP_STDOUT && script === 'qtsp-process.ts')
    child.stdout!.pipe(createWriteStream(process.env.BENCH_QTSP_STDOUT));
  let opsUrl: string | undefined;
  const signDocUrl = await new Promise<string>((resolve, reject) => {
    let signDoc: string | undefined;
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /^(?:qtsp serving signDoc|floor serving|qtsp operations \(health, metrics\)) at (\S+)/.exec(line);
      if (!m) return;
      if (line.startsWith('qtsp operations')) opsUrl = m[1]!;
      else signDoc = m[1]!;
      // serve prints the operations line last
      if (signDoc && (opsUrl || script !== 'qtsp-process.ts')) resolve(signDoc);
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code} before it listened`)));
  });
  return {
    pid: child.pid!,
    signDocUrl,
    ...(opsUrl ? { opsUrl } : {}),
    command: (msg) => ask(child, msg),
    stop: () => stopChild(child),
  };
}

const PERF_HZ = 999;

/** profiles/qtsp-signdoc-<time>.<extension>, the folder made if missing */
function profilePath(extension: string): string {
  mkdirSync(join(process.cwd(), 'profiles'), { recursive: true });
  return join(process.cwd(), 'profiles', `qtsp-signdoc-${new Date().toISOString().replace(/[:.]/g, '-')}.${extension}`);
}

/** the last line of a tool's error output */
const lastLine = (text: string) => text.trim().split('\n').pop();

/**
 * `perf record` (cpu-clock: CPU time, not wall time) on the QTSP process, every thread, while `run` runs; then the
 * summary of bench/perf-summary.ts, also written beside perf.data in profiles/. A missing or refused perf gives
 * a line saying so, not a failed bench.
 */
async function perfRun(pid: number, run: () => Promise<RunResult>): Promise<string> {
  if (spawnSync('perf', ['--version'], { stdio: 'ignore' }).status !== 0)
    return 'perf profile: perf is not installed (Debian package linux-perf); skipped';
  const file = profilePath('perf.data');
  const perf = spawn(
    'perf',
    ['record', '-e', 'cpu-clock', '-F', String(PERF_HZ), '-g', '-p', String(pid), '-o', file],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let perfErr = '';
  perf.stderr!.on('data', (d: Buffer) => (perfErr = (perfErr + d.toString()).slice(-2000)));
  const ended = new Promise<number | null>((resolve) => perf.once('exit', (code) => resolve(code)));
  await new Promise((r) => setTimeout(r, 500)); // perf attaches to every thread before the calls start
  if (perf.exitCode !== null) return `perf profile: perf record failed: ${lastLine(perfErr)}`;
  const threadNames = new Map<number, string>();
  for (const tid of readdirSync(`/proc/${pid}/task`))
    threadNames.set(Number(tid), readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim());
  const r = await run();
  perf.kill('SIGINT');
  if ((await ended) !== 0 && !existsSync(file)) return `perf profile: perf record failed: ${lastLine(perfErr)}`;
  const script = spawnSync('perf', ['script', '-i', file, '-F', 'tid,ip,sym'], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
  });
  if (script.status !== 0) return `perf profile: perf script failed: ${lastLine(script.stderr)}`;
  const summary = `on-CPU profile of the QTSP (perf, cpu-clock at ${PERF_HZ} Hz) over ${r.ok} ${LEVELS[0]} calls with ${HASHES[0]} hash(es) each: ${file}\n${summarisePerf(parsePerfScript(script.stdout), pid, threadNames, PERF_HZ, r.ok)}`;
  writeFileSync(file.replace(/\.perf\.data$/, '.perf.txt'), `${summary}\n`);
  return summary;
}

/**
 * Successful signDoc calls the QTSP itself counted slower than each of SLOW_MS (its qtsp_signdoc_duration_seconds
 * histogram on the operations port, from reading the request to the answer written), so far.
 */
async function qtspSlowCounts(opsUrl: string): Promise<number[]> {
  const text = await (await fetch(new URL('/metrics', opsUrl))).text();
  const bucket = (le: string) =>
    [...text.matchAll(/^qtsp_signdoc_duration_seconds_bucket\{([^}]*)\} (\d+)/gm)]
      .filter(([, labels]) => labels!.includes(`le="${le}"`) && labels!.includes('status="200"'))
      .reduce((sum, m) => sum + Number(m[2]), 0);
  const all = bucket('+Inf');
  return SLOW_MS.map((ms) => all - bucket(String(ms / 1000)));
}

function ask(child: ChildProcess, msg: unknown): Promise<{ type: string; [k: string]: unknown }> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: { type: string; message?: string }) => {
      if (m.type === 'mark') return; // the load generator's progress during a run (measure)
      child.off('message', onMessage).off('exit', onExit);
      if (m.type === 'error') reject(new Error(m.message));
      else resolve(m);
    };
    const onExit = (code: number | null) => {
      child.off('message', onMessage);
      reject(new Error(`child exited with ${code}`));
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
    child.send(msg as object);
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

async function startLoadGenerator(
  info: SandboxInfo,
  signDocUrl: string,
): Promise<{
  pid: number;
  send(cmd: LoadCommand): Promise<{ type: string; [k: string]: unknown }>;
  /** calls `listener` with each {type:'mark'} of the runs until the returned function is called */
  onMark(listener: (done: number) => void): () => void;
  stop(): Promise<void>;
}> {
  const child = fork(join(HERE, 'load-generator.ts'), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, BENCH_LOAD_SETUP: JSON.stringify({ endpoints: info.endpoints, signDocUrl }) },
  });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`load generator exited with ${code}`)));
  });
  const onMark = (listener: (done: number) => void) => {
    const heard = (m: { type: string; done?: number }) => {
      if (m.type === 'mark') listener(m.done!);
    };
    child.on('message', heard);
    return () => void child.off('message', heard);
  };
  return { pid: child.pid!, send: (cmd) => ask(child, cmd), onMark, stop: () => stopChild(child) };
}

// ---------------------------------------------------------------------------------------------------------
// over the wire

interface Row {
  readonly keys: string;
  readonly store: string;
  readonly level: string;
  readonly hashes: number;
  readonly workers: number;
  readonly saturated?: Measured;
  readonly halfLoad?: RunResult & { rate: number; delay?: EventLoopDelay; qtspSlow?: number[] };
  readonly note?: string;
  /** false: the QTSP ran with journal.enabled false (the journal's cost, journal-cost.ts) */
  readonly journal?: false;
  /** SQLite: the rows its measured calls added to the store, per call (store-floor.ts) */
  readonly written?: readonly WrittenTable[];
}

/** the QTSP event loop's delay during a run, ms (bench/qtsp-process.ts delay-stop) */
interface EventLoopDelay {
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /** the QTSP's garbage collections during the run: count and longest pause (ms) of minor and major ones */
  readonly gc?: {
    readonly minor: number;
    readonly minorMaxMs: number;
    readonly major: number;
    readonly majorMaxMs: number;
  };
  /** the QTSP process's resident memory at the end of the run (MB) */
  readonly rssMb?: number;
}

type LoadGenerator = Awaited<ReturnType<typeof startLoadGenerator>>;

type Measured = RunResult & {
  qtspCpuMs: number;
  qtspThreadsMs: { main: number; store: number; other: number; otherByName: Record<string, number> };
  sandboxCpuMs: number;
  loadCpuMs: number;
  drift?: Drift;
};

/** the QTSP's CPU per call over the first and the last `window` calls of a run: does the figure grow with the calls? */
interface Drift {
  readonly window: number;
  readonly firstMs: number;
  readonly lastMs: number;
}

/** calls per drift window: the first and last thousand of a run, or its first and last tenth when shorter */
const driftWindow = (count: number) => (count >= 2000 ? 1000 : Math.floor(count / 10));

async function measure(
  load: LoadGenerator,
  pids: MeasuredProcesses,
  entry: string,
  hashes: number,
  count: number,
  run: Extract<LoadCommand, { type: 'run' }>,
): Promise<Measured> {
  await load.send({ type: 'prefetch', count, hashes, ...caseOf(entry), parallel: 4 });
  const window = driftWindow(count);
  const atMarks = new Map<number, number>(); // finished calls -> the QTSP's CPU seconds then
  const unlisten = load.onMark((done) => atMarks.set(done, treeCpuSeconds(pids.qtsp).total));
  await pids.seal?.(); // what earlier runs wrote is sealed outside this one
  const q0 = treeCpuSeconds(pids.qtsp);
  const s0 = treeCpuSeconds(pids.sandbox);
  const l0 = treeCpuSeconds(load.pid);
  const result = (await load.send(
    window > 0 ? { ...run, marks: [window, count - window] } : run,
  )) as unknown as RunResult;
  const q1 = treeCpuSeconds(pids.qtsp);
  unlisten();
  await pids.seal?.(); // this run's journal entries: sealing them is part of what its calls cost
  const sealed = pids.seal ? treeCpuSeconds(pids.qtsp) : q1;
  const per = (a: number, b: number) => ((b - a) * 1000) / Math.max(1, result.ok);
  const first = atMarks.get(window);
  const last = atMarks.get(count - window);
  const drift =
    first !== undefined && last !== undefined
      ? { window, firstMs: ((first - q0.total) * 1000) / window, lastMs: ((q1.total - last) * 1000) / window }
      : undefined;
  return {
    ...(drift ? { drift } : {}),
    ...result,
    qtspCpuMs: per(q0.total, sealed.total),
    qtspThreadsMs: {
      main: per(q0.main, sealed.main),
      store: per(q0.store, sealed.store),
      other: per(q0.other, sealed.other),
      otherByName: Object.fromEntries(
        Object.entries(sealed.otherByName).map(([name, s]) => [name, per(q0.otherByName[name] ?? 0, s)]),
      ),
    },
    sandboxCpuMs: per(s0.total, treeCpuSeconds(pids.sandbox).total),
    loadCpuMs: per(l0.total, treeCpuSeconds(load.pid).total),
  };
}

/**
 * The processes a run is measured in. `seal`: the QTSP seals its journal now (qtsp-process.ts); a run seals
 * before it starts and again before its CPU is read, so each run pays for sealing the entries it wrote and
 * none of those before it (the timer's seal of a minute of entries would land in whichever short run it met).
 */
interface MeasuredProcesses {
  readonly qtsp: number;
  readonly sandbox: number;
  readonly seal?: () => Promise<unknown>;
}

/** the warm-up of one QTSP process (or of the transport floor): the CPU per call of each chunk */
interface WarmUp {
  readonly what: string;
  readonly chunks: readonly Measured[];
}
const warmUps: WarmUp[] = [];

/** WARMUP calls of B-B with one hash, chunk by chunk; their CPU is kept for printWarmUps */
async function warmUp(what: string, load: LoadGenerator, pids: MeasuredProcesses, calls: number): Promise<void> {
  const chunks: Measured[] = [];
  for (let done = 0; done < calls; done += WARMUP_CHUNK) {
    chunks.push(
      await measure(load, pids, 'AdES-B-B', 1, Math.min(WARMUP_CHUNK, calls - done), {
        type: 'run',
        concurrency: CONCURRENCY,
      }),
    );
  }
  warmUps.push({ what, chunks });
}

/**
 * CPU seconds of each thread of a process by thread name (the event loop as "event loop"), from
 * /proc/PID/task/TID/schedstat: nanoseconds on a core, where /proc's stat counts 10 ms ticks, too coarse for the
 * few milliseconds a second an idle process spends.
 */
function threadCpuSeconds(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      const name = Number(tid) === pid ? 'event loop' : readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      byName.set(name, (byName.get(name) ?? 0) + ns / 1e9);
    } catch {
      // the thread ended
    }
  }
  return byName;
}

/** what the QTSP spends while no call comes in, per second, by thread: printed beside the rows */
const idleLines: string[] = [];

/**
 * The QTSP's CPU per second over IDLE_SECONDS without calls (its timers, its threads' polls, the relay's reads,
 * the checkpoints, V8's idle work), once the collections after the warm-up are done. A row at R calls/s carries
 * about this divided by R per call: the slowest rows most.
 */
async function watchIdle(what: string, pid: number): Promise<void> {
  if (IDLE_SECONDS <= 0) return;
  // first the collections V8 runs once the load stops (its memory reducer): they belong to the calls before
  await new Promise((resolve) => setTimeout(resolve, (IDLE_SECONDS * 1000) / 2));
  const before = threadCpuSeconds(pid);
  await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000));
  const after = threadCpuSeconds(pid);
  const perSecond = [...after]
    .map(([name, s]) => [name, ((s - (before.get(name) ?? 0)) * 1000) / IDLE_SECONDS] as const)
    .filter(([, ms]) => ms >= 0.005)
    .sort((a, b) => b[1] - a[1]);
  const total = perSecond.reduce((sum, [, ms]) => sum + ms, 0);
  const parts = perSecond.map(([name, ms]) => `${name} ${f(ms, 2)}`).join(', ');
  idleLines.push(
    `  ${what}: ${f(total, 2)} ms CPU per second without calls (${IDLE_SECONDS} s, from ${IDLE_SECONDS / 2} s after the warm-up): ${parts}; at 100 calls/s that is ${f(total / 100, 3)} ms per call`,
  );
}

/** the transport floor's CPU per call by hash count (the request and the answer grow with the hashes) */
type TransportFloors = Measured & { halfLoad?: RunResult & { rate: number }; byHashes: Map<number, Measured> };

/**
 * The transport floor (bench/transport-floor.ts): the same load, bodies and TLS against a process that only
 * carries signDoc's traffic (mTLS in, one introspection call out, an answer of the same size), CPU per call,
 * for each hash count of the rows (B-B bodies: the signatures' size grows with the level, the transport barely).
 */
async function transportFloor(
  input: ConfigInput,
  sandbox: { pid: number; info: SandboxInfo },
  hashesList: readonly number[],
  halfLoadRate?: number,
): Promise<TransportFloors> {
  const floor = await startQtspProcess(
    input,
    { BENCH_FLOOR_ISSUER: sandbox.info.endpoints.issuer },
    'transport-floor.ts',
  );
  const load = await startLoadGenerator(sandbox.info, floor.signDocUrl);
  const pids = { qtsp: floor.pid, sandbox: sandbox.pid };
  try {
    await warmUp('transport floor', load, pids, WARMUP); // as the QTSP's
    const byHashes = new Map<number, Measured>();
    for (const hashes of new Set([1, ...hashesList])) {
      const count = Math.max(50, Math.round(REQUESTS / Math.sqrt(hashes)));
      byHashes.set(
        hashes,
        await measure(load, pids, 'AdES-B-B', hashes, count, { type: 'run', concurrency: CONCURRENCY }),
      );
    }
    const saturated = { ...byHashes.get(1)!, byHashes };
    if (halfLoadRate === undefined) return saturated;
    // the latency baseline: the same open loop, at the rate the QTSP's half-load run was offered, with the same
    // sandbox and load generator on the same cores; what the QTSP adds to the tail is the difference
    const halfLoad = await measure(
      load,
      pids,
      'AdES-B-B',
      1,
      Math.max(50, Math.round(halfLoadRate * (FULL ? 10 : 4))),
      { type: 'run', rate: halfLoadRate, slowMs: SLOW_MS },
    );
    return { ...saturated, halfLoad: { ...halfLoad, rate: halfLoadRate } };
  } finally {
    await load.stop();
    await floor.stop();
  }
}

// ---------------------------------------------------------------------------------------------------------
// in process: step costs and the crypto floor

/**
 * Calls of a step before it is timed in this process: as for the QTSP (WARMUP), V8 must have optimised it first,
 * or its compiling on the helper threads competes for the two cores and unoptimised code is timed
 */
const STEP_WARMUP = 2000;

/**
 * mean CPU ms per call of fn over n calls (this process, every thread: a PKCS#11 call's libuv thread too), after a
 * warm-up; CPU as the rows' figures are, so that a floor does not grow with the time other work holds the cores
 */
async function timeIt(n: number, fn: () => unknown): Promise<number> {
  for (let i = 0; i < STEP_WARMUP; i++) await fn();
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) await fn();
  const cpu = process.cpuUsage(c0);
  return (cpu.user + cpu.system) / 1000 / n;
}

/**
 * CPU per call (this whole process: every thread, the store's writer and the relay included) of `n` calls run
 * `concurrency` at a time, as the load generator's connections run them, so that commits are shared as in the
 * server; and the wall time per call. A step that waits for a durable commit is mostly that wait when it runs
 * alone; its cost is its CPU.
 */
async function cpuCost(
  n: number,
  concurrency: number,
  fn: () => Promise<unknown>,
): Promise<{ cpuMs: number; wallMs: number }> {
  const run = async (count: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < count) await fn();
      }),
    );
  };
  await run(STEP_WARMUP);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await run(n);
  const cpu = process.cpuUsage(c0);
  return { cpuMs: (cpu.user + cpu.system) / 1000 / n, wallMs: (performance.now() - t0) / n };
}

interface StepCosts {
  readonly verifyAndConsent: number;
  readonly core: number;
  readonly perHash: number;
  /** steps 3-10 with the store's durable writes, CONCURRENCY at a time: CPU and wall time per call */
  readonly durable: { cpuMs: number; wallMs: number };
  /** fresh signer key in the QTSP's key custody + certificate (issuing CA key in the custody) + CAdES-B-B + destroy */
  readonly custodyCore: number;
  readonly floor: CryptoFloor;
  /** a PKCS#11 custody's own floor (none for software keys): a P-256 key pair made and destroyed there, a signature */
  readonly tokenFloor?: { keygen: number; sign: number };
}

interface CryptoFloor {
  readonly rs256Verify: number;
  readonly keygen: number;
  readonly ecdsaSign: number;
  /** one B-B one-hash signDoc: two RS256 verifications, a key, the certificate's and the CMS's signatures */
  readonly signDoc: number;
  readonly perHash: number;
}

/** the floor of the rows run with these keys: in a token, its key generation and signatures replace node:crypto's */
function custodyFloor(c: StepCosts): CryptoFloor {
  const t = c.tokenFloor;
  if (!t) return c.floor;
  const signDoc = 2 * c.floor.rs256Verify + t.keygen + 2 * t.sign;
  return { ...c.floor, keygen: t.keygen, ecdsaSign: t.sign, signDoc, perHash: t.sign };
}

/** the token's floor: a fresh P-256 key pair made and destroyed in it, and one ECDSA signature made by it */
async function tokenFloor(keys: KeyCustody, msg: Buffer): Promise<{ keygen: number; sign: number }> {
  const n = Math.min(ITERATIONS, 500);
  const keygen = await timeIt(n, async () => (await keys.createSignerKey('P-256', 'ecdsa')).destroy());
  const key = await keys.createSignerKey('P-256', 'ecdsa');
  try {
    return { keygen, sign: await timeIt(n, () => key.sign('sha256', msg)) };
  } finally {
    await key.destroy();
  }
}

async function stepCosts(input: ConfigInput, info: SandboxInfo): Promise<StepCosts> {
  const qtsp = await startQtsp(loadConfig(input, {}), { logger: silent, defaultMetrics: false });
  try {
    const deps = qtsp.deps;
    const hash = createHash('sha256').update(randomBytes(1024)).digest('base64');
    const auth = await authorizeSigning(info.endpoints, {
      documentDigests: [{ hash, label: 'bench' }],
      hashAlgorithmOID: SHA256.oid,
    });
    const body = {
      SAD: auth.accessToken,
      credentialID: 'qes_eidas',
      documentDigests: { hashes: [hash], hashAlgorithmOID: SHA256.oid },
      profile: 'http://uri.etsi.org/19432/v1.1.1#/creationprofile#',
      signature_format: 'C',
    };
    const fp = x5tS256(fromPem(readFileSync(info.endpoints.rp.certFile, 'utf8'))[0]!);
    const request = parseSignDocRequest(body);
    const sad = await validateSad(auth.accessToken, fp, deps.sad);
    const { jwt } = await introspect(sad, deps.introspection);
    // steps 3 (SAD), 4 (verification of the introspection response, not the call) and 5 (consent)
    const verifyAndConsent = await timeIt(ITERATIONS, async () => {
      const s = await validateSad(auth.accessToken, fp, deps.sad);
      const { payload } = await verifyIntrospectionResponse(jwt, s.issuer, deps.introspection);
      return checkConsent(payload, request, deps.qtspId, fp);
    });
    const claims = { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1964-08-12', nationalities: ['DE'] };
    const keys = generateKeyPair('P-256');
    const cert = await mintSignerCertificate({
      claims,
      publicKey: keys.publicKey,
      issuingCa: deps.issuingCa,
      validitySeconds: 3600,
      profile: deps.signerProfile,
      keyInQscd: false,
      consent: { issuer: 'https://as.bench', txn: 'bench' },
    });
    // one signer key object for all of them, as signDoc signs every hash of a request with the one signer.key
    const signerKey = new SoftwareSigningKey(keys.privateKey);
    const cms = () =>
      buildCadesBaselineB({
        hash: request.hashes[0]!,
        hashAlgorithm: SHA256,
        signerCertificate: cert,
        chain: [deps.issuingCa.der],
        key: signerKey,
        signingTime: new Date(),
      });
    // the signing core: fresh key + signer certificate + CAdES-B-B, the unit to hold against other signing
    // libraries doing the same
    const core = await timeIt(ITERATIONS, async () => {
      const k = generateKeyPair('P-256');
      const c = await mintSignerCertificate({
        claims,
        publicKey: k.publicKey,
        issuingCa: deps.issuingCa,
        validitySeconds: 3600,
        profile: deps.signerProfile,
        keyInQscd: false,
        consent: { issuer: 'https://as.bench', txn: 'bench' },
      });
      return buildCadesBaselineB({
        hash: request.hashes[0]!,
        hashAlgorithm: SHA256,
        signerCertificate: c,
        chain: [deps.issuingCa.der],
        key: new SoftwareSigningKey(k.privateKey),
        signingTime: new Date(),
      });
    });
    const perHash = await timeIt(ITERATIONS, cms); // one more CAdES-B-B with the same signer: the cost of an extra hash
    // the same through the key custody the QTSP runs with (software, or a PKCS#11 token)
    const custodyCore = await timeIt(Math.min(ITERATIONS, 500), async () => {
      const key = await deps.keys.createSignerKey('P-256', 'ecdsa');
      try {
        const c = await mintSignerCertificate({
          claims,
          publicKey: key.publicKey,
          issuingCa: deps.issuingCa,
          validitySeconds: 3600,
          profile: deps.signerProfile,
          keyInQscd: deps.keys.qscd,
          consent: { issuer: 'https://as.bench', txn: 'bench' },
        });
        return await buildCadesBaselineB({
          hash: request.hashes[0]!,
          hashAlgorithm: SHA256,
          signerCertificate: c,
          chain: [deps.issuingCa.der],
          key,
          signingTime: new Date(),
        });
      } finally {
        await key.destroy();
      }
    });
    // steps 3-10 with the real store writes (signConsented: evidence and outbox, durable)
    const choice = chooseSigning('C', 'AdES-B-B', SHA256, undefined, undefined, deps.defaultAlgorithm);
    let consents = 0;
    const durable = await cpuCost(Math.min(ITERATIONS, 1000), CONCURRENCY, async () => {
      const s = await validateSad(auth.accessToken, fp, deps.sad);
      const intro = await verifyIntrospectionResponse(jwt, s.issuer, deps.introspection);
      // one consent signs each document once (signing/once.ts): every iteration stands for a consent of its own
      return signConsented(
        request,
        choice,
        { ...intro, payload: { ...intro.payload, txn: `${intro.payload.txn}-${++consents}` } },
        fp,
        deps,
      );
    });
    // the floor: the same cryptographic operations in raw node:crypto
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const msg = randomBytes(600);
    const rsaSig = sign('sha256', msg, rsa.privateKey);
    const rs256Verify = await timeIt(ITERATIONS, () => verify('sha256', msg, rsa.publicKey, rsaSig));
    const keygen = await timeIt(ITERATIONS, () => generateKeyPairSync('ec', { namedCurve: 'P-256' }));
    // not generateKeyPairSync: reading or signing with such a key can deadlock with its KeyGenJob's collection
    // (src/crypto/keys.ts)
    const ec = generateKeyPair('P-256');
    const ecdsaSign = await timeIt(ITERATIONS, () => sign('sha256', msg, { key: ec.privateKey, dsaEncoding: 'der' }));
    // one signDoc: SAD + introspection verification, a key, the certificate's and the CMS's signatures
    return {
      verifyAndConsent,
      core,
      perHash,
      durable,
      custodyCore,
      floor: { rs256Verify, keygen, ecdsaSign, signDoc: 2 * rs256Verify + keygen + 2 * ecdsaSign, perHash: ecdsaSign },
      ...(deps.keys.kind === 'software' ? {} : { tokenFloor: await tokenFloor(deps.keys, msg) }),
    };
  } finally {
    await qtsp.close();
  }
}

// ---------------------------------------------------------------------------------------------------------
// output

const f = (n: number | undefined, digits = 2) => (n === undefined || Number.isNaN(n) ? '-' : n.toFixed(digits));
const pad = (s: string, n: number) => s.padStart(n);

/**
 * Signatures a signDoc makes per hash at each level: the CMS signature, and its time-stamp token from B-T on
 * (our TSA signs in process); B-LTA adds the archive time-stamp. Per request at B-LT and B-LTA: one OCSP
 * response for the signer certificate (the CRLs are shared across requests).
 */
const SIGNATURES_PER_HASH: Readonly<Record<string, number>> = {
  'AdES-B-B': 1,
  'AdES-B-T': 2,
  'AdES-B-LT': 2,
  'AdES-B-LTA': 3,
};

/** the raw node:crypto cost of the signatures and checks one signDoc of this level and hash count needs */
function cryptoFloor(floor: CryptoFloor, entry: string, hashes: number): number {
  const { level } = caseOf(entry);
  const perRequest = level === 'AdES-B-LT' || level === 'AdES-B-LTA' ? floor.perHash : 0;
  return floor.signDoc + perRequest + (hashes * (SIGNATURES_PER_HASH[level] ?? 1) - 1) * floor.perHash;
}

function printRows(rows: Row[], floorOf: (keys: string) => CryptoFloor): void {
  console.log(
    '\nsignDoc over keep-alive mutual TLS, one fresh SAD per call (QTSP, sandbox and load generator in separate processes)',
  );
  console.log(
    `closed loop, ${CONCURRENCY} connections; CPU = user + system of each process tree per successful call; x floor: QTSP CPU over the raw node:crypto cost of the level's signatures and checks`,
  );
  console.log(
    [
      'keys',
      'store',
      'level',
      'hashes',
      'procs',
      'signDoc/s',
      'p50 ms',
      'p99 ms',
      'QTSP CPU ms',
      'x floor',
      'sandbox CPU ms',
      'loadgen CPU ms',
      'ok/failed',
    ]
      .map((h, i) => (i < 3 ? h.padEnd([9, 8, 10][i]!) : pad(h, h.length + 1)))
      .join(' '),
  );
  for (const r of rows) {
    if (!r.saturated) {
      console.log(
        `${r.keys.padEnd(9)} ${r.store.padEnd(8)} ${r.level.padEnd(10)} ${pad(String(r.hashes), 7)}   ${r.note ?? ''}`,
      );
      continue;
    }
    const s = r.saturated;
    const floorMs = cryptoFloor(floorOf(r.keys), r.level, r.hashes);
    console.log(
      [
        r.keys.padEnd(9),
        r.store.padEnd(8),
        r.level.padEnd(10),
        pad(String(r.hashes), 7),
        pad(String(r.workers), 6),
        pad(f((s.ok / s.wallMs) * 1000, 1), 10),
        pad(f(s.p50), 7),
        pad(f(s.p99), 7),
        pad(f(s.qtspCpuMs, 3), 12),
        pad(f(s.qtspCpuMs / floorMs, 1), 8),
        pad(f(s.sandboxCpuMs), 15),
        pad(f(s.loadCpuMs), 15),
        pad(`${s.ok}/${s.failed}`, 10),
        r.journal === false ? '  journal off' : '',
      ].join(' '),
    );
    if (s.firstFailure) console.log(`    first failure: ${s.firstFailure}`);
  }
  console.log(
    "\nQTSP CPU per signDoc by thread: the event loop, the SQLite store's writer thread, and the rest (V8 garbage collection and compiler threads, libuv pool)",
  );
  for (const r of rows) {
    if (!r.saturated) continue;
    const t = r.saturated.qtspThreadsMs;
    console.log(
      `  ${r.keys.padEnd(9)} ${r.store.padEnd(8)} ${r.level.padEnd(10)} ${pad(String(r.hashes), 2)} hash(es), ${r.workers} proc(s)${r.journal === false ? ', journal off' : ''}: event loop ${f(t.main, 3)} ms, store writer ${f(t.store, 3)} ms, other threads ${f(t.other, 3)} ms (${Object.entries(
        t.otherByName,
      )
        .filter(([, ms]) => ms >= 0.005)
        .sort((a, b) => b[1] - a[1])
        .map(([name, ms]) => `${name} ${f(ms, 3)}`)
        .join(', ')})`,
    );
  }
  const half = rows.filter((r) => r.halfLoad);
  if (half.length) {
    console.log(
      '\nlatency under half the saturating load (open loop at half the signDoc/s above; latency from the scheduled start)',
    );
    for (const r of half) {
      const h = r.halfLoad!;
      console.log(
        `  ${r.keys.padEnd(9)} ${r.store.padEnd(8)} ${r.level.padEnd(10)} ${pad(String(r.hashes), 2)} hash(es), ${r.workers} proc(s): ${f(h.rate, 1)}/s offered, p50 ${f(h.p50)} ms, p99 ${f(h.p99)} ms, max ${f(h.max)} ms (${h.ok} ok, ${h.failed} failed)`,
      );
      if (h.delay) {
        const gc = h.delay.gc;
        const gcText = gc
          ? `; garbage collections: ${gc.minor} minor (longest ${f(gc.minorMaxMs, 1)} ms), ${gc.major} major (longest ${f(gc.majorMaxMs, 1)} ms)`
          : '';
        const rssText = h.delay.rssMb !== undefined ? `; resident memory at the end ${f(h.delay.rssMb, 0)} MB` : '';
        console.log(
          `      the QTSP's event loop meanwhile: delay p50 ${f(h.delay.p50)} ms, p99 ${f(h.delay.p99)} ms, max ${f(h.delay.max)} ms${gcText}${rssText}`,
        );
      }
      if (h.qtspSlow)
        console.log(
          `      calls slower than ${SLOW_MS.join(' / ')} ms: ${h.slow.join(' / ')} at the load generator, ${h.qtspSlow.join(' / ')} inside the QTSP (its own signDoc duration histogram)`,
        );
    }
  }
  for (const keys of KEYS) {
    for (const level of LEVELS) {
      const one = rows.find(
        (r) =>
          r.keys === keys &&
          r.store === 'sqlite' &&
          r.level === level &&
          r.hashes === 1 &&
          r.workers === 1 &&
          r.journal !== false,
      )?.saturated;
      const many = rows.find(
        (r) => r.keys === keys && r.store === 'sqlite' && r.level === level && r.hashes > 1 && r.workers === 1,
      );
      if (!one || !many?.saturated) continue;
      const extra = (many.saturated.qtspCpuMs - one.qtspCpuMs) / (many.hashes - 1);
      const floor = floorOf(keys);
      const signatures = SIGNATURES_PER_HASH[caseOf(level).level] ?? 1;
      console.log(
        `each extra hash, ${keys} ${level}: ${f(extra, 3)} ms QTSP CPU = ${f(extra / (floor.perHash * signatures), 1)} x the signing floor (${signatures} x ECDSA sign ${f(floor.perHash, 3)} ms)`,
      );
    }
  }
}

/** a row as the ratio lines name it: keys, store, format and level, hashes (and what else sets it apart) */
function rowName(r: Row): string {
  const { format, level } = caseOf(r.level);
  const extras = [r.workers > 1 ? `${r.workers} procs` : '', r.journal === false ? 'journal off' : ''].filter(Boolean);
  const hashes = `${r.hashes} hash${r.hashes === 1 ? '' : 'es'}`;
  return `${format}:${level.replace('AdES-', '')} ${hashes}, ${r.keys} keys, ${r.store}${extras.map((e) => `, ${e}`).join('')}`;
}

/** a row's floors of the work signDoc must do beside its transport and crypto: its store writes and queue adds */
interface WorkFloors {
  readonly store: StoreFloor;
  /** outbox records per call, each one bullmq add */
  readonly records: number;
  readonly queueMs: number;
}

/** calls of each store and queue floor (and as many again to warm up) */
const FLOOR_CALLS = Number(process.env.BENCH_FLOOR_CALLS ?? 1000);

/**
 * The store floor of each SQLite row (the bytes its calls wrote, store-floor.ts) and the queue floor (one
 * bullmq add per outbox record it wrote, queue-floor.ts), measured in this process after every QTSP stopped.
 */
async function workFloors(rows: readonly Row[], redisUrl: string): Promise<Map<Row, WorkFloors>> {
  const out = new Map<Row, WorkFloors>();
  const measured = rows.filter((r) => r.saturated && r.written);
  if (measured.length === 0) return out;
  const addMs = await queueAddFloor(redisUrl, FLOOR_CALLS, CONCURRENCY);
  console.log(
    `
queue floor (bench/queue-floor.ts): one bullmq add of an outbox record's job, ${CONCURRENCY} at a time: ${f(addMs, 3)} ms CPU`,
  );
  console.log(
    "store floor (bench/store-floor.ts): the bytes each row's calls wrote, per call in one durable transaction",
  );
  for (const r of measured) {
    const store = await storeFloor(r.written!, FLOOR_CALLS, CONCURRENCY);
    const records = Math.round(r.written!.find((w) => w.table === 'outbox')?.rowsPerCall ?? 0);
    out.set(r, { store, records, queueMs: records * addMs });
    const tables = r.written!.map((w) => `${w.table} ${f(w.rowsPerCall, 2)} x ${f(w.bytesPerRow, 0)} B`).join(', ');
    console.log(
      `  ${rowName(r)}: ${store.rowsPerCall} rows, ${store.bytesPerCall} bytes: ${f(store.cpuMs, 3)} ms CPU (${tables}${store.skipped.length ? `; not written: ${store.skipped.join(', ')}` : ''})`,
    );
  }
  return out;
}

/**
 * One line per row: its QTSP CPU per call against that row's own floors, the transport floor of its hash count,
 * the raw crypto of its signatures, time-stamps, OCSP responses and checks (cryptoFloor, with the token's
 * figures for a PKCS#11 custody), and for a SQLite row its store and queue floors (workFloors); and its drift,
 * the CPU per call of the run's first and last calls.
 */
function printFloorRatios(
  rows: Row[],
  transport: TransportFloors,
  floorOf: (keys: string) => CryptoFloor,
  work: ReadonlyMap<Row, WorkFloors>,
): void {
  console.log(
    '\neach row against its own floors (transport of its hash count + raw crypto of its signatures and checks + its store writes + its queue adds); drift: QTSP CPU per call of the first and last calls of its run',
  );
  for (const r of rows) {
    const s = r.saturated;
    const carried = s && (transport.byHashes.get(r.hashes) ?? transport.byHashes.get(1));
    if (!s || !carried) continue;
    const w = work.get(r);
    const parts = [
      ['transport', carried.qtspCpuMs],
      ['crypto', cryptoFloor(floorOf(r.keys), r.level, r.hashes)],
      ...(w ? [['store', w.store.cpuMs] as const, ['queue', w.queueMs] as const] : []),
    ] as const;
    const floors = parts.reduce((sum, [, ms]) => sum + ms, 0);
    const named = parts.map(([name, ms]) => `${name} ${f(ms, 3)}`).join(' + ');
    const d = s.drift;
    const drift = d
      ? `; first / last ${d.window} calls ${f(d.firstMs, 3)} / ${f(d.lastMs, 3)} ms (${d.lastMs >= d.firstMs ? '+' : ''}${f((d.lastMs / d.firstMs - 1) * 100, 0)} %)`
      : '';
    console.log(
      `  ${rowName(r)}: signDoc = ${f(s.qtspCpuMs / floors, 1)} x ${parts.map(([name]) => name).join(' + ')} floors (${f(floors, 3)} ms = ${named}); QTSP CPU ${f(s.qtspCpuMs, 3)} ms, above the floors ${f(s.qtspCpuMs - floors, 3)} ms${drift}`,
    );
  }
}

/** the warm-up chunks' CPU per call: a total that still falls in the last chunks means WARMUP was too short */
function printWarmUps(): void {
  console.log(
    `\nwarm-up, B-B one hash, CPU per call of each ${WARMUP_CHUNK}-call chunk in order (total; V8 and libuv helper threads, where the JIT compiles):`,
  );
  for (const w of warmUps) {
    console.log(
      `  ${w.what}: ${w.chunks.map((c) => f(c.qtspCpuMs)).join(' ')} ms; helpers ${w.chunks.map((c) => f(c.qtspThreadsMs.otherByName['node'] ?? c.qtspThreadsMs.other)).join(' ')} ms`,
    );
  }
}

/** one line of printSteps: what was timed, its figure, and what to hold it against */
function printStep(what: string, figure: string, against: string): void {
  console.log(`  ${what.padEnd(70)} ${figure}  (${against})`);
}

function printSteps(c: StepCosts, keys: string): void {
  const fl = c.floor;
  const ms = (n: number) => `${f(n, 3)} ms`;
  const times = (n: number, floor: number) => `${f(n / floor, 1)} x`;
  const verifyFloor = 2 * fl.rs256Verify;
  const coreFloor = fl.keygen + 2 * fl.ecdsaSign;
  console.log(
    `\nin process, ${keys} keys (CPU, mean of ${ITERATIONS} loops), next to the raw node:crypto floor of the same operations:`,
  );
  printStep(
    'signer key in the custody + signer certificate + CAdES-B-B + destroy',
    ms(c.custodyCore),
    'the issuing CA key and the signer key where the custody keeps them',
  );
  printStep(
    'steps 3-5: SAD check, introspection response check, consent',
    ms(c.verifyAndConsent),
    `floor 2 x RS256 verify ${ms(verifyFloor)}: ${times(c.verifyAndConsent, verifyFloor)}`,
  );
  printStep(
    'fresh P-256 key + signer certificate + CAdES-B-B',
    ms(c.core),
    `floor keygen + 2 x ECDSA ${ms(coreFloor)}: ${times(c.core, coreFloor)}`,
  );
  printStep(
    'one more CAdES-B-B (an extra hash)',
    ms(c.perHash),
    `floor ECDSA sign ${ms(fl.ecdsaSign)}: ${times(c.perHash, fl.ecdsaSign)}`,
  );
  printStep(
    'steps 3-10 with durable evidence and outbox writes (no HTTP)',
    `${ms(c.durable.cpuMs)} CPU, all threads`,
    `floor ${ms(fl.signDoc)}: ${times(c.durable.cpuMs, fl.signDoc)}; ` +
      `${CONCURRENCY} at a time, ${ms(c.durable.wallMs)} wall per call`,
  );
  console.log(
    `  raw floor: RS256 verify ${ms(fl.rs256Verify)}, P-256 keygen ${ms(fl.keygen)}, ` +
      `ECDSA P-256 sign ${ms(fl.ecdsaSign)}; one B-B one-hash signDoc ${ms(fl.signDoc)}`,
  );
  if (c.tokenFloor)
    console.log(
      `  token floor (the rows' crypto floor with these keys): P-256 key pair made and destroyed ${ms(c.tokenFloor.keygen)}, ` +
        `ECDSA P-256 sign ${ms(c.tokenFloor.sign)}; one B-B one-hash signDoc ${ms(custodyFloor(c).signDoc)}`,
    );
}

// ---------------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const t0 = performance.now();
  const dataDir = mkdtempSync(join(tmpdir(), 'qtsp-bench-'));
  const { base, port, publicationPort, signDocUrl } = await prepare({
    config: { dataDir, server: { port: 0, publicationPort: 0 } },
  });
  const sandbox = await startSandboxProcess(base, signDocUrl);
  const redis = await provideRedis(undefined, {}, dataDir);
  const rows: Row[] = [];
  let profileFile: string | undefined;
  let profileCalls = 0;
  let perfReport: string | undefined;
  const input = qtspConfigInput(
    {
      dataDir,
      ops: { port: 0 },
      server: { maxConnectionsPerAddress: 0 } /* one load generator, one address */,
      delivery: { inProcessWorker: WORKER_IN_PROCESS },
      signer: { rsaPoolSize: 0 },
    },
    sandbox.info,
    { port, publicationPort },
    redis.url,
  );
  try {
    const runAll = async (
      keys: string,
      workers: number,
      levels: string[],
      hashesList: number[],
      halfLoadFor: (level: string, hashes: number) => boolean,
      postgresUrl?: string,
      journal = true,
    ) => {
      const store = postgresUrl ? 'postgres' : 'sqlite';
      const custody = await custodySettings(keys, dataDir, input);
      if (typeof custody === 'string') {
        rows.push({ keys, store, level: '-', hashes: 0, workers, note: custody });
        return;
      }
      const storeEnv: Record<string, string> = postgresUrl
        ? { QTSP_STORE_DRIVER: 'postgres', QTSP_STORE_URL: postgresUrl }
        : {};
      const journalEnv: Record<string, string> = journal ? {} : { QTSP_JOURNAL_ENABLED: 'false' };
      const qtsp = await startQtspProcess(input, {
        ...custody.env,
        ...storeEnv,
        ...journalEnv,
        QTSP_SERVER_WORKERS: String(workers),
      });
      const load = await startLoadGenerator(sandbox.info, qtsp.signDocUrl);
      const pids = { qtsp: qtsp.pid, sandbox: sandbox.pid, seal: () => qtsp.command({ type: 'seal' }) };
      try {
        // warm-up: JIT, caches (IDP list, AS metadata and keys), connections; each worker process warms up its own
        const what = `QTSP, ${keys} keys, ${store}, ${workers} proc(s)${journal ? '' : ', journal off'}`;
        await warmUp(what, load, pids, WARMUP * workers);
        if (keys === 'software' && workers === 1 && journal && !postgresUrl) {
          await pids.seal(); // the warm-up's entries sealed first: the seal is a run's, not idle work
          await watchIdle(what, qtsp.pid);
        }
        for (const level of levels) {
          // PAdES and XAdES: one hash count (the per-hash figures are CAdES's)
          for (const hashes of caseOf(level).format === 'C' ? hashesList : hashesList.slice(0, 1)) {
            const count = Math.max(50, Math.round(REQUESTS / Math.sqrt(hashes)));
            // the code paths of this level and hash count warm up too (the first warm-up ran B-B, one hash), as
            // many calls as are measured: with a third as many, the ten-hash row still carried compiling
            if (level !== 'AdES-B-B' || hashes !== 1)
              await measure(load, pids, level, hashes, count, { type: 'run', concurrency: CONCURRENCY });
            const storeFile = postgresUrl ? undefined : join(custody.env['QTSP_DATA_DIR'] ?? dataDir, 'qtsp.sqlite');
            const mark = storeFile && storeMark(storeFile);
            const saturated = await measure(load, pids, level, hashes, count, {
              type: 'run',
              concurrency: CONCURRENCY,
            });
            // what this row's calls wrote to the store, for its store floor
            const written = storeFile && mark ? storeWritten(storeFile, mark, saturated.ok) : undefined;
            let halfLoad: Row['halfLoad'];
            if (halfLoadFor(level, hashes) && saturated.ok > 0) {
              const rate = (saturated.ok / saturated.wallMs) * 1000 * 0.5;
              // the event loop's delay beside the latency: a tail the QTSP's own blocking explains shows in both
              if (workers === 1) await qtsp.command({ type: 'delay-start' });
              const slow0 = qtsp.opsUrl ? await qtspSlowCounts(qtsp.opsUrl) : undefined;
              const r = await measure(load, pids, level, hashes, Math.max(50, Math.round(rate * (FULL ? 10 : 4))), {
                type: 'run',
                rate,
                slowMs: SLOW_MS,
              });
              const delay =
                workers === 1 ? ((await qtsp.command({ type: 'delay-stop' })) as unknown as EventLoopDelay) : undefined;
              const qtspSlow = slow0 ? (await qtspSlowCounts(qtsp.opsUrl!)).map((n, i) => n - slow0[i]!) : undefined;
              halfLoad = { ...r, rate, ...(delay ? { delay } : {}), ...(qtspSlow ? { qtspSlow } : {}) };
            }
            rows.push({
              keys,
              store,
              level,
              hashes,
              workers,
              saturated,
              ...(written ? { written } : {}),
              ...(halfLoad ? { halfLoad } : {}),
              ...(journal ? {} : { journal: false as const }),
            });
          }
        }
        // the profiled calls: REQUESTS of the first level and hash count, their SADs fetched before any profile
        // starts (the sandbox's work is not the QTSP's)
        const prefetchProfiled = () =>
          load.send({ type: 'prefetch', count: REQUESTS, hashes: HASHES[0]!, ...caseOf(LEVELS[0]!), parallel: 4 });
        const runProfiled = async () =>
          (await load.send({ type: 'run', concurrency: CONCURRENCY })) as unknown as RunResult;
        const profiled = workers === 1 && keys === 'software' && !postgresUrl && journal;
        if (flags.profile && profiled) {
          profileFile = profilePath('cpuprofile');
          await prefetchProfiled();
          await qtsp.command({ type: 'profile-start', intervalUs: 200 });
          const r = await runProfiled();
          await qtsp.command({ type: 'profile-stop', file: profileFile });
          profileCalls = r.ok;
        }
        if (flags.perf && profiled) {
          await prefetchProfiled();
          perfReport = await perfRun(qtsp.pid, runProfiled);
        }
      } finally {
        await load.stop();
        await qtsp.stop();
      }
    };
    for (const keys of KEYS)
      await runAll(keys, 1, LEVELS, HASHES, (level, hashes) => FULL || (level === 'AdES-B-B' && hashes === 1));
    // the journal's cost: the B-B one-hash row again, its QTSP started with journal.enabled false
    if (LEVELS.includes('AdES-B-B') && HASHES.includes(1))
      await runAll('software', 1, ['AdES-B-B'], [1], () => false, undefined, false);
    // the B-B one-hash row with the journal on, in one process on SQLite: what the floors are set against
    const bbRow = rows.find(
      (r) =>
        r.keys === 'software' &&
        r.store === 'sqlite' &&
        r.level === 'AdES-B-B' &&
        r.hashes === 1 &&
        r.workers === 1 &&
        r.journal !== false,
    );
    const bbHalfLoad = bbRow?.halfLoad;
    // every row's ratio stands on it
    const transport = await transportFloor(input, sandbox, HASHES, bbHalfLoad?.rate);
    if (WORKERS && WORKERS > 1) {
      // several processes need PostgreSQL (serve-cluster.ts): the gain is shown against one process on the same store
      const pg = await startPostgres();
      try {
        const url = await pg.freshSchemaUrl();
        for (const n of [1, WORKERS]) await runAll('software', n, ['AdES-B-B'], [1], () => true, url);
      } finally {
        await pg.stop();
      }
    }
    const stepsByKeys = new Map<string, StepCosts>();
    for (const keys of KEYS) {
      const custody = await custodySettings(keys, dataDir, input);
      if (typeof custody !== 'string')
        stepsByKeys.set(keys, await stepCosts({ ...input, ...custody.config }, sandbox.info));
    }
    const steps = stepsByKeys.get('software') ?? [...stepsByKeys.values()][0]!;
    const floorOf = (keys: string) => custodyFloor(stepsByKeys.get(keys) ?? steps);
    printRows(rows, floorOf);
    printWarmUps();
    if (idleLines.length > 0)
      console.log(`QTSP without calls (CPU per second by thread, /proc schedstat):\n${idleLines.join('\n')}`);
    for (const [keys, s] of stepsByKeys) printSteps(s, keys);
    const bb = bbRow?.saturated;
    if (bb)
      console.log(
        `\nQTSP CPU per B-B one-hash signDoc over the wire: ${f(bb.qtspCpuMs, 3)} ms = ${f(bb.qtspCpuMs / steps.floor.signDoc, 1)} x the crypto floor, ${f(bb.qtspCpuMs / steps.durable.cpuMs, 1)} x the in-process steps 3-10 (what HTTP, TLS and the introspection call add: ${f(bb.qtspCpuMs - steps.durable.cpuMs, 3)} ms)`,
      );
    for (const [hashes, t] of transport.byHashes) {
      console.log(
        `transport floor, ${hashes} hash(es) (bench/transport-floor.ts: mTLS POST in, JSON, one kept-alive mTLS introspection call out, an answer of the same size; no QTSP logic): ${f(t.qtspCpuMs, 3)} ms CPU per call (${f((t.ok / t.wallMs) * 1000, 1)} calls/s, ${t.ok}/${t.failed} ok/failed)`,
      );
      if (t.firstFailure) console.log(`    first failure: ${t.firstFailure}`);
    }
    const h = transport.halfLoad;
    if (h)
      console.log(
        `  transport floor at the B-B half-load rate (${f(h.rate, 1)}/s offered, open loop): p50 ${f(h.p50)} ms, p99 ${f(h.p99)} ms, max ${f(h.max)} ms, slower than ${SLOW_MS.join(' / ')} ms: ${h.slow.join(' / ')} (${h.ok} ok, ${h.failed} failed): the latency the machine, the sandbox and the load generator give any service`,
      );
    printFloorRatios(rows, transport, floorOf, await workFloors(rows, redis.url));
    if (profileFile) {
      writeFileSync(
        profileFile.replace(/\.cpuprofile$/, '.txt'),
        summariseProfile(JSON.parse(readFileSync(profileFile, 'utf8')), profileCalls),
      );
      console.log(
        `\nCPU profile of the QTSP over ${profileCalls} ${LEVELS[0]} calls with ${HASHES[0]} hash(es) each: ${profileFile}`,
      );
      console.log(summariseProfile(JSON.parse(readFileSync(profileFile, 'utf8')), profileCalls));
    }
    if (perfReport) console.log(`\n${perfReport}`);
    const journalOff = rows.find((r) => r.journal === false)?.saturated;
    if (bb && journalOff) {
      const row = (m: Measured) => ({ qtspCpuMs: m.qtspCpuMs, perSecond: (m.ok / m.wallMs) * 1000 });
      console.log(`\n${journalCostLine('SQLite, software keys, B-B, one hash', row(bb), row(journalOff))}`);
    }
    const cluster = rows.filter((r) => r.store === 'postgres' && r.saturated);
    if (cluster.length === 2) {
      const [a, b] = cluster.map((r) => (r.saturated!.ok / r.saturated!.wallMs) * 1000) as [number, number];
      console.log(
        `\n${cluster[1]!.workers} QTSP processes vs 1 (PostgreSQL store, B-B, one hash): ${f(b / a, 2)} x the signDoc/s (${f(a, 1)} -> ${f(b, 1)}); this machine has ${availableParallelism()} cores, shared with the sandbox and the load generator`,
      );
    }
    console.log(
      `\n(bench took ${f((performance.now() - t0) / 1000, 0)} s; delivery workers ${WORKER_IN_PROCESS ? 'inside the QTSP process' : 'not running (as beside `qtsp worker`)'})`,
    );
  } finally {
    await sandbox.stop();
    await redis.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
