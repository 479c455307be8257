/**
 * The QTSP as the benchmark runs it: exactly `qtsp serve` (configuration from QTSP_* variables), in its own
 * process, plus two IPC commands from bench/sign-doc.bench.ts so a CPU profile covers only the measured calls:
 *   {type:'profile-start', intervalUs}  start the V8 sampling profiler (what `node --cpu-prof` uses)
 *   {type:'profile-stop', file}         stop it and write the .cpuprofile (Chrome DevTools / speedscope format)
 * In cluster mode (server.workers > 1) only the primary answers; the workers run `qtsp serve` as usual.
 */
import cluster from 'node:cluster';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { runServe } from '../src/cli/serve.ts';

type ProfileCommand = { type: 'profile-start'; intervalUs: number } | { type: 'profile-stop'; file: string };

if (cluster.isPrimary && process.send) {
  const session = new Session();
  session.connect();
  process.on('message', (msg: ProfileCommand) => {
    const work =
      msg.type === 'profile-start'
        ? (async () => {
            await session.post('Profiler.enable');
            await session.post('Profiler.setSamplingInterval', { interval: msg.intervalUs });
            await session.post('Profiler.start');
            return { type: 'profile-started' };
          })()
        : (async () => {
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

runServe([]).then(
  (code) => {
    process.exitCode = code;
    if (cluster.isPrimary && process.connected) process.disconnect(); // the IPC channel would keep us alive
  },
  (err: unknown) => {
    process.stderr.write(`qtsp serve: ${(err as Error).message}\n`);
    process.exitCode = 1;
  },
);
