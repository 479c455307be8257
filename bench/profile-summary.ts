/**
 * A text summary of a V8 .cpuprofile (what `node --cpu-prof` and the inspector's Profiler write), per call:
 *   - busy time by module: node_modules package, src/ file, node: internal module; native frames (no URL:
 *     the crypto, zlib, TLS bindings) are charged to the nearest JavaScript caller, so `sign` inside
 *     src/ades/cades.ts counts for src/ades/cades.ts; GC and (program) stay apart;
 *     Samples are taken on the thread's wall clock, not its CPU clock: a native call that wakes another thread
 *     or process (postMessage to the store's writer, a socket write to the peer on loopback) also counts the
 *     time this thread then waited for a core. On two busy cores that is a lot: postMessage shows many times
 *     its CPU cost (measured apart from the main thread's /proc/self/task stat), and busy time per call exceeds
 *     the event loop's CPU per call. The bench's CPU by thread is the measure; this summary says where to look;
 *   - inclusive time of each pipeline step (the functions sign-doc.ts calls), counting only what runs
 *     synchronously under that frame: work after an `await` is charged to the module doing it, not to the step.
 */

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string };
  readonly children?: readonly number[];
}

export interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** the function names of the pipeline steps and their modules (src/signing/sign-doc.ts and what it calls) */
const STEPS: readonly [label: string, file: string, fn: string][] = [
  ['HTTP: express app (routing, JSON body, response)', 'node_modules/express/', 'handle'],
  ['1 parse request', 'src/signing/request.ts', 'parseSignDocRequest'],
  ['3 SAD validation', 'src/trust/sad.ts', 'validateSad'],
  ['4 introspection call (sending)', 'src/introspection/client.ts', 'call'],
  ['4 introspection response check', 'src/introspection/client.ts', 'verifyIntrospectionResponse'],
  ['5 consent', 'src/signing/consent.ts', 'checkConsent'],
  ['7 key + signer certificate', 'src/signing/signer.ts', 'mintSigner'],
  ['6 evidence (store.recordSigning)', 'src/signing/evidence.ts', 'recordEvidence'],
  ['8 signatures', 'src/signing/signatures.ts', 'signHashes'],
  ['10 mediation record', 'src/signing/report.ts', 'report'],
];

export function moduleOf(url: string): string | undefined {
  if (!url) return undefined;
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith('node:')) {
    const path = url.slice(5).replace(/^internal\//, '');
    return `node:${path.split('/')[0]}`;
  }
  const src = url.lastIndexOf('/src/');
  if (src >= 0) return url.slice(src + 1);
  const bench = url.lastIndexOf('/bench/');
  if (bench >= 0) return url.slice(bench + 1);
  return url;
}

export function summariseProfile(profile: CpuProfile, calls: number): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>(); // µs per node
  for (let i = 0; i < profile.samples.length; i++)
    self.set(profile.samples[i]!, (self.get(profile.samples[i]!) ?? 0) + (profile.timeDeltas[i + 1] ?? 0));

  // busy time by module, native frames charged to the nearest caller with a URL
  const byModule = new Map<string, number>();
  let busy = 0;
  let idle = 0;
  for (const [id, us] of self) {
    const name = byId.get(id)!.callFrame.functionName;
    if (name === '(idle)') {
      idle += us;
      continue;
    }
    busy += us;
    let label: string | undefined;
    if (name === '(garbage collector)' || name === '(program)' || name === '(root)') label = name;
    for (let n: number | undefined = id; label === undefined && n !== undefined; n = parent.get(n))
      label = moduleOf(byId.get(n)!.callFrame.url);
    label ??= '(native, no JavaScript caller)';
    byModule.set(label, (byModule.get(label) ?? 0) + us);
  }

  // inclusive time per step: a node counts once, under its outermost matching frame
  const inclusive = new Map<number, number>();
  const total = (id: number): number => {
    const cached = inclusive.get(id);
    if (cached !== undefined) return cached;
    const t = (self.get(id) ?? 0) + (byId.get(id)!.children ?? []).reduce((s, c) => s + total(c), 0);
    inclusive.set(id, t);
    return t;
  };
  for (const n of profile.nodes) total(n.id);
  const stepTime = STEPS.map(([label, file, fn]) => {
    let us = 0;
    for (const n of profile.nodes) {
      if (n.callFrame.functionName !== fn || !n.callFrame.url.includes(file)) continue;
      let nested = false;
      for (let p = parent.get(n.id); p !== undefined && !nested; p = parent.get(p)) {
        const pf = byId.get(p)!.callFrame;
        nested = pf.functionName === fn && pf.url.includes(file);
      }
      if (!nested) us += inclusive.get(n.id)!;
    }
    return [label, us] as const;
  });

  const perCall = (us: number) => (us / 1000 / Math.max(1, calls)).toFixed(3).padStart(8);
  const lines = [
    `busy ${perCall(busy)} ms per call (${calls} calls, idle ${(idle / 1e6).toFixed(2)} s); by module, native work charged to its JavaScript caller (wall-clock samples: calls that wake another thread include its turn on the core):`,
  ];
  for (const [label, us] of [...byModule].sort((a, b) => b[1] - a[1]).slice(0, 25))
    lines.push(`  ${perCall(us)} ms  ${((us / busy) * 100).toFixed(1).padStart(5)} %  ${label}`);
  lines.push(
    'pipeline steps, inclusive synchronous time per call (after an await, work is charged to the module above):',
  );
  for (const [label, us] of stepTime) lines.push(`  ${perCall(us)} ms  ${label}`);
  return lines.join('\n');
}
