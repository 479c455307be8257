/**
 * The QTSP as the benchmark runs it: exactly `qtsp serve` (configuration from QTSP_* variables), in its own
 * process, plus IPC commands from bench/sign-doc.bench.ts so a CPU profile covers only the measured calls:
 *   {type:'profile-start', intervalUs}  start the V8 sampling profiler (what `node --cpu-prof` uses)
 *   {type:'profile-stop', file}         stop it and write the .cpuprofile (Chrome DevTools / speedscope format);
 *                                       with BENCH_HEAP_SAMPLING set, an allocation profile of the same span too
 *   {type:'seal'}                       seal the journal now (each measured row pays for sealing its own entries);
 *                                       answers {type:'sealed'}, also in cluster mode, where the primary serves nothing
 *   {type:'delay-start'}                start sampling the event loop's delay (perf_hooks, 1 ms resolution)
 *   {type:'delay-stop'}                 stop it and answer its p50, p99 and max in ms: how long the event loop was
 *                                       blocked when a call arrived, which the half-load latency tail is compared with;
 *                                       and the garbage collections meanwhile (perf_hooks 'gc' entries): how many
 *                                       minor (scavenge) and major (mark-compact) ones, and the longest of each;
 *                                       and the process's resident memory then (what server.heapGrowthPercent trades)
 * In cluster mode (server.workers > 1) only the primary answers; the workers run `qtsp serve` as usual.
 */
import cluster from 'node:cluster';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { constants, monitorEventLoopDelay, PerformanceObserver, type IntervalHistogram } from 'node:perf_hooks';
import { runServe } from '../src/cli/serve.ts';
import type { QtspService } from '../src/service.ts';

let service: QtspService | undefined;

type ProfileCommand =
  | { type: 'profile-start'; intervalUs: number }
  | { type: 'profile-stop'; file: string }
  | { type: 'seal' }
  | { type: 'delay-start' }
  | { type: 'delay-stop' };

if (cluster.isPrimary && process.send) {
  const session = new Session();
  session.connect();
  let delay: IntervalHistogram | undefined;
  const gc = { minor: 0, minorMaxMs: 0, major: 0, majorMaxMs: 0 };
  const gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = (entry as PerformanceEntry & { readonly detail?: { readonly kind?: number } }).detail?.kind;
      if (kind === constants.NODE_PERFORMANCE_GC_MINOR) {
        gc.minor++;
        gc.minorMaxMs = Math.max(gc.minorMaxMs, entry.duration);
      } else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
        gc.major++;
        gc.majorMaxMs = Math.max(gc.majorMaxMs, entry.duration);
      }
    }
  });
  process.on('message', (msg: ProfileCommand) => {
    if (msg.type === 'seal') {
      void (service?.sealJournal() ?? Promise.resolve()).then(() => process.send!({ type: 'sealed' }));
      return;
    }
    if (msg.type === 'delay-start') {
      delay = monitorEventLoopDelay({ resolution: 1 });
      delay.enable();
      Object.assign(gc, { minor: 0, minorMaxMs: 0, major: 0, majorMaxMs: 0 });
      gcObserver.observe({ entryTypes: ['gc'] });
      process.send!({ type: 'delay-started' });
      return;
    }
    if (msg.type === 'delay-stop') {
      delay?.disable();
      gcObserver.disconnect();
      const ms = (ns: number) => ns / 1e6;
      process.send!({
        type: 'delay',
        p50: ms(delay?.percentile(50) ?? NaN),
        p99: ms(delay?.percentile(99) ?? NaN),
        max: ms(delay?.max ?? NaN),
        gc: { ...gc },
        rssMb: process.memoryUsage.rss() / 2 ** 20,
      });
      delay = undefined;
      return;
    }
    const work =
      msg.type === 'profile-start'
        ? (async () => {
            await session.post('Profiler.enable');
            await session.post('Profiler.setSamplingInterval', { interval: msg.intervalUs });
            await session.post('Profiler.start');
            if (process.env.BENCH_HEAP_SAMPLING) {
              // 1: every allocation; 'promoted': without what the young generation collects, i.e. what outlived two
              // scavenges (the old generation's garbage, which is what makes full collections come) and what is still
              // alive; 'live': only what is still alive when the profile stops
              const mode = process.env.BENCH_HEAP_SAMPLING;
              await session.post('HeapProfiler.startSampling', {
                samplingInterval: 4096,
                includeObjectsCollectedByMajorGC: mode !== 'live',
                includeObjectsCollectedByMinorGC: mode !== 'live' && mode !== 'promoted',
              });
            }
            return { type: 'profile-started' };
          })()
        : (async () => {
            if (process.env.BENCH_HEAP_SAMPLING) {
              const { profile: heap } = await session.post('HeapProfiler.stopSampling');
              writeFileSync(msg.file.replace(/\.cpuprofile$/, '.heapprofile'), JSON.stringify(heap));
            }
            const { profile } = await session.post('Profiler.stop');
            writeFileSync(msg.file, JSON.stringify(profile));
            return { type: 'profile-written', file: msg.file };
          })();
    work.then(
      (m) => process.send!(m),
      (err: unknown) => process.send!({ type: 'error', message: (err as Error).message }),
    );
  });
}

runServe([], (qtsp) => {
  service = qtsp;
}).then(
  (code) => {
    process.exitCode = code;
    if (cluster.isPrimary && process.connected) process.disconnect(); // the IPC channel would keep us alive
  },
  (err: unknown) => {
    process.stderr.write(`qtsp serve: ${(err as Error).message}\n`);
    process.exitCode = 1;
  },
);
