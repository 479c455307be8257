/**
 * Processes on a moved clock (libfaketime, Debian `faketime`): an offset file that every process started with
 * env() reads again at most once a second, so one started ecosystem moves through the years without a restart.
 * The monotonic clock stays real, so timers and timeouts keep their lengths. Commands (openssl, pdfsig, `qtsp`)
 * run on the same clock with run().
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import type { ConfigInput } from '../../src/config/schema.ts';
import { provideRedis } from '../../src/util/redis-server.ts';
import { QTSP_ID, TEST_KEY_CUSTODY } from './environment.ts';
import type { RpEndpoints } from '../../src/rp/flow.ts';
import type { ToolResult } from './openssl.ts';

/** libfaketime's library where Debian installs it (multiarch directory) */
function faketimeLibrary(): string {
  const dir = readdirSync('/usr/lib').find((d) => existsSync(join('/usr/lib', d, 'faketime', 'libfaketime.so.1')));
  if (!dir) throw new Error('libfaketime is not installed (Debian package faketime)');
  return join('/usr/lib', dir, 'faketime', 'libfaketime.so.1');
}

export class MovedClock {
  readonly #file: string;
  constructor(dir: string) {
    this.#file = join(dir, 'faketime-offset');
    this.set(0);
  }

  /** moves the clock of every process on it to `days` after the real time */
  set(days: number): void {
    writeFileSync(this.#file, `+${days}d\n`);
  }

  env(): Record<string, string> {
    return {
      LD_PRELOAD: faketimeLibrary(),
      FAKETIME_TIMESTAMP_FILE: this.#file,
      FAKETIME_CACHE_DURATION: '1',
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
    };
  }

  /** a command on this clock, with `env` beside the process's; `code` its exit status */
  run(cmd: string, args: readonly string[], env: Record<string, string> = {}): Promise<ToolResult & { code: number }> {
    return new Promise((resolve) => {
      execFile(cmd, args, { encoding: 'utf8', env: { ...process.env, ...env, ...this.env() } }, (err, stdout, stderr) =>
        resolve({
          ok: !err,
          code: err ? ((err as { code?: number }).code ?? 1) : 0,
          output: `${stdout}${stderr}`,
        }),
      );
    });
  }
}

export interface MovedEcosystem {
  readonly signDocUrl: string;
  readonly opsUrl: string;
  readonly publicationUrl: string;
  readonly endpoints: RpEndpoints;
  /** the sandbox platform's SP directory (our record, `qtsp pki client-cert`) */
  readonly spDirectoryUrl: string;
  stop(): Promise<void>;
}

const own = extname(fileURLToPath(import.meta.url));
const CHILD = fileURLToPath(new URL(`./clock-child${own}`, import.meta.url));
const RP = fileURLToPath(new URL(`./clock-rp${own}`, import.meta.url));

export interface ClockRpRequest {
  readonly endpoints: RpEndpoints;
  readonly signDocUrl: string;
  readonly document: Buffer;
  /** P: a PAdES signing of the PDF `document` */
  readonly format: 'C' | 'X' | 'P';
  readonly level: string;
}

/**
 * The relying party's flow in a process on `clock` (test/helpers/clock-rp.ts): it accepts the TLS certificates
 * the sandbox renews on that clock, which this process, on the real clock, takes for not yet valid, and presents
 * the client certificate the sandbox made again for it there.
 */
export async function clockRp(
  clock: MovedClock,
  request: ClockRpRequest,
): Promise<{ status?: number; body?: unknown; pdf?: string }> {
  const json = JSON.stringify({ ...request, document: request.document.toString('base64') });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await clock.run(process.execPath, [...(own === '.ts' ? ['--import', 'tsx'] : []), RP, json]);
    const line = r.output.split('\n').find((l) => l.startsWith('RP_RESULT '));
    if (line) return JSON.parse(line.slice('RP_RESULT '.length));
    // the sandbox renews its ended TLS server certificates, and its RP's client certificate the banks refuse
    // once ended, within seconds of the clock's move; an RP that read its files just before that renewal
    // presents the certificate the banks no longer have registered
    const renewing = [
      'certificate has expired',
      'the certificate is outside its validity period',
      'certificate not registered for it',
    ];
    if (!renewing.some((m) => r.output.includes(m)) || Date.now() > deadline)
      throw new Error(`the relying party on the moved clock failed: ${r.output.slice(-3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** The sandbox and the QTSP of `config` in a child process on `clock` (test/helpers/clock-child.ts). */
export async function startMovedEcosystem(clock: MovedClock, config: ConfigInput): Promise<MovedEcosystem> {
  const child = spawn(
    process.execPath,
    [...(own === '.ts' ? ['--import', 'tsx'] : []), CHILD, JSON.stringify(config)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, ...clock.env(), QTSP_LOG_LEVEL: 'silent', QTSP_LIFECYCLE_EXIT_WITH_PARENT: 'true' },
    },
  );
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  try {
    const info = await new Promise<Omit<MovedEcosystem, 'stop'>>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        if (line.startsWith('CLOCK_READY ')) resolve(JSON.parse(line.slice('CLOCK_READY '.length)));
      });
      child.once('exit', (code) => reject(new Error(`the ecosystem on the moved clock exited with ${code}`)));
    });
    return { ...info, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * The test ecosystem in `dir`/data on `clock`, with a Redis of its own on the real clock (redis-server does not
 * start under libfaketime); stop() stops both.
 */
export async function startClockEcosystem(
  clock: MovedClock,
  dir: string,
  calendar: NonNullable<ConfigInput['calendar']> = {},
): Promise<MovedEcosystem> {
  const redis = await provideRedis(undefined, {}, dir);
  try {
    const eco = await startMovedEcosystem(clock, {
      dataDir: join(dir, 'data'),
      qtspId: QTSP_ID,
      keys: { provider: TEST_KEY_CUSTODY },
      server: { port: 0, publicationPort: 0 },
      ops: { port: 0 },
      signer: { rsaPoolSize: 0 },
      trust: { jwksCooldownSeconds: 0 },
      calendar: { reloadCheckSeconds: 1, ...calendar },
      redis: { url: redis.url, prefix: `qtsp-clock-${randomUUID().slice(0, 8)}` },
    });
    return {
      ...eco,
      async stop() {
        await eco.stop();
        await redis.stop();
      },
    };
  } catch (err) {
    await redis.stop();
    throw err;
  }
}

export interface Readiness {
  readonly status: number;
  readonly reasons: string[];
}

export async function readiness(eco: Pick<MovedEcosystem, 'opsUrl'>): Promise<Readiness> {
  const res = await fetch(`${eco.opsUrl}/health/ready`);
  return { status: res.status, reasons: ((await res.json()) as { reasons: string[] }).reasons };
}

/** readiness once `wanted` holds (a moved clock or a renewal reaches the service within seconds) */
export async function readinessWhen(
  eco: Pick<MovedEcosystem, 'opsUrl'>,
  wanted: (r: Readiness) => boolean,
  what: string,
): Promise<Readiness> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const r = await readiness(eco);
    if (wanted(r)) return r;
    if (Date.now() > deadline) throw new Error(`readiness never ${what}: ${JSON.stringify(r)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** readiness once it names `object` as expired */
export const notReadyNaming = (eco: Pick<MovedEcosystem, 'opsUrl'>, object: string) =>
  readinessWhen(eco, (r) => r.reasons.some((reason) => reason.startsWith(`expired: ${object} `)), `named ${object}`);
