/**
 * Worker threads whose code is a module of this tree, so that `tsc`, the linter and the layer check read it
 * like any other file. A `.ts` entry needs tsx in the thread: the thread registers it itself, as bin/qtsp.js
 * does for the main thread (a process started with `node --import tsx` would pass that on through execArgv,
 * one started by bin/qtsp.js would not). In a compiled tree (`npm run build`) the entry is its compiled `.js`
 * sibling, started directly.
 */
import { Worker, type WorkerOptions } from 'node:worker_threads';

const BOOT = `
const { workerData } = require('node:worker_threads');
import(workerData.tsx).then(({ register }) => { register(); return import(workerData.entry); });
`;

/** this module compiled: every module of the tree is, and tsc rewrote import specifiers but not these URLs */
const COMPILED = new URL(import.meta.url).pathname.endsWith('.js');

/** Starts `entry` (a file URL, usually `new URL('./x-thread.ts', import.meta.url)`) in a worker thread. */
export function startModuleWorker(entry: URL, options: Omit<WorkerOptions, 'eval'> = {}): Worker {
  const file = COMPILED ? compiledSibling(entry) : entry;
  if (!file.pathname.endsWith('.ts')) return new Worker(file, { execArgv: [], ...options });
  return new Worker(BOOT, {
    execArgv: [],
    ...options,
    eval: true,
    workerData: { ...options.workerData, tsx: import.meta.resolve('tsx/esm/api'), entry: file.href },
  });
}

/** `x.ts` -> `x.js`, the name `npm run build` gives it (tsconfig.build.json) */
function compiledSibling(entry: URL): URL {
  const compiled = new URL(entry);
  compiled.pathname = compiled.pathname.replace(/\.ts$/, '.js');
  return compiled;
}
