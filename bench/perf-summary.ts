/**
 * An on-CPU profile of the QTSP process with Linux perf (`npm run bench -- --perf`), summarised per call by
 * thread and, on the event loop, by module, like profile-summary.ts summarises the V8 profile, but counting CPU
 * time only.
 *
 * Why a second profiler: V8's sampling profiler samples the event loop on its wall clock. A native call that
 * wakes another thread or process (postMessage to the store's writer, a socket write to a peer on loopback)
 * also collects the samples of the time the thread then waited for a core; on two busy cores that made
 * postMessage look many times dearer than its CPU cost. perf's cpu-clock event
 * samples a thread only while it runs, so samples / frequency is CPU time, kernel time (TLS records going
 * through loopback TCP) included, and every thread of the process is seen: the event loop, the store's writer,
 * V8's helpers.
 *
 * JavaScript frames get names because the QTSP runs with --perf-basic-prof (V8 writes /tmp/perf-<pid>.map);
 * a frame reads `JS:*name file:///…/src/x.ts:1:234` (`*` optimised, `^` baseline, `~` interpreted). Native frames
 * (OpenSSL, libuv, the kernel) are charged to the nearest JavaScript caller, as in profile-summary.ts; inlined
 * functions count for the function they were inlined into (node:crypto's verify inside src/trust/jws.ts).
 * No per-step figures: a step is an outer frame, and outer frames can carry the wrong name. perf names a JIT
 * address from perf-<pid>.map, where V8 appends every code object it creates; code that was discarded (a
 * deoptimisation, say) leaves its address to later code, and perf may name it after the earlier one: node:net's
 * Socket._writev has shown "under" sign-doc.ts recordEvidence, which writes to no socket. The innermost frame is
 * the code running, hot and stable after the warm-up, so modules are reliable.
 * The text format parsed is `perf script -F tid,ip,sym` (Linux perf 5 and 6): a line with the tid alone per sample
 * (right-aligned, so a short tid starts with spaces), then one indented line per frame, innermost first.
 */
import { moduleOf } from './profile-summary.ts';

interface Sample {
  readonly tid: number;
  /** frame symbols, innermost first */
  readonly frames: readonly string[];
}

export function parsePerfScript(text: string): Sample[] {
  const samples: { tid: number; frames: string[] }[] = [];
  let current: { tid: number; frames: string[] } | undefined;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const header = /^\s*(\d+)\s*$/.exec(line); // the tid alone, right-aligned to the widest tid (` 2875`)
    if (header) {
      current = { tid: Number(header[1]), frames: [] };
      samples.push(current);
    } else if (current) {
      current.frames.push(line.trim().replace(/^[0-9a-f]+\s+/, '')); // drop the address
    }
  }
  return samples;
}

/** `JS:*signDoc file:///…/sign-doc.ts:1:5763` -> 'file:///…/sign-doc.ts' */
function jsFrameUrl(symbol: string): string | undefined {
  return /^(?:JS|LazyCompile|Function):[*~^+]?\S* (\S+?)(?::\d+:\d+)?$/.exec(symbol)?.[1];
}

/** what the event loop did in a sample without any JavaScript frame, by the native frames it went through */
const NATIVE_ONLY: readonly [RegExp, string][] = [
  [/LibuvStreamWrap::ReadStart|uv__read\b/, '(socket reads and TLS decryption, before JavaScript runs)'],
  [/TLSWrap::OnStreamAfterWrite|TLSWrap::EncOut/, '(TLS after socket writes)'],
  [/MessagePort::/, '(messages from worker threads, native part)'],
  [/RunForegroundTask/, '(V8 tasks on the event loop: garbage collection steps, compilation)'],
  [
    /ecp_nistz256|bn_|sha\d*_block|aesni|gcm_|OPENSSL|EVP_/,
    '(OpenSSL, caller not seen: its assembly keeps no frame pointer)',
  ],
  [/malloc|_int_free|cfree|unlink_chunk/, '(malloc and free, caller not seen)'],
];

function nativeOnly(frames: readonly string[]): string {
  const chain = frames.join('\n');
  return NATIVE_ONLY.find(([re]) => re.test(chain))?.[1] ?? '(other native or kernel work outside JavaScript)';
}

export function summarisePerf(
  samples: readonly Sample[],
  mainTid: number,
  threadNames: ReadonlyMap<number, string>,
  hz: number,
  calls: number,
): string {
  const perCall = (n: number) => (((n / hz) * 1000) / Math.max(1, calls)).toFixed(3).padStart(8);
  const byThread = new Map<string, number>();
  const byModule = new Map<string, number>();
  let main = 0;
  for (const s of samples) {
    const thread =
      s.tid === mainTid ? 'event loop' : (threadNames.get(s.tid) ?? 'node').replace(/^node$/, 'V8 and libuv helpers');
    byThread.set(thread, (byThread.get(thread) ?? 0) + 1);
    if (s.tid !== mainTid) continue;
    main++;
    const url = s.frames.map(jsFrameUrl).find((u) => u && moduleOf(u));
    const label = url ? moduleOf(url)! : nativeOnly(s.frames);
    byModule.set(label, (byModule.get(label) ?? 0) + 1);
  }
  const total = samples.length;
  const lines = [
    `on-CPU ${perCall(total)} ms per call in all threads (${calls} calls, ${total} samples at ${hz} Hz); by thread:`,
  ];
  for (const [thread, n] of [...byThread].sort((a, b) => b[1] - a[1])) lines.push(`  ${perCall(n)} ms  ${thread}`);
  lines.push('event loop by module, native and kernel work charged to its JavaScript caller:');
  for (const [label, n] of [...byModule].sort((a, b) => b[1] - a[1]).slice(0, 25))
    lines.push(`  ${perCall(n)} ms  ${((n / Math.max(1, main)) * 100).toFixed(1).padStart(5)} %  ${label}`);
  return lines.join('\n');
}
