/**
 * bench/perf-summary.ts: `perf script -F tid,ip,sym` text in, CPU time per call by thread, and on the
 * event loop by module. The input imitates what perf printed for the QTSP with --perf-basic-prof.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parsePerfScript, summarisePerf } from '../../../bench/perf-summary.ts';

const MAIN = 100;
const WRITER = 101;
const sample = (tid: number, ...frames: string[]) =>
  `${tid} \n${frames.map((f, i) => `\t    ${(0x1000 + i).toString(16)} ${f}`).join('\n')}\n`;

const text = [
  // RSA verify inlined into verifyRs256: charged to src/trust/jws.ts
  sample(
    MAIN,
    '__bn_sqrx8x_reduction',
    'JS:*verifyRs256 file:///w/src/trust/jws.ts:1:317',
    'JS:^checkSignature file:///w/src/trust/sad.ts:1:10',
    'JS:^validateSad file:///w/src/trust/sad.ts:1:2929',
    'JS:^signDoc file:///w/src/signing/sign-doc.ts:1:5763',
  ),
  sample(MAIN, 'JS:*validateSad file:///w/src/trust/sad.ts:1:2929'),
  // a native call under node's own JavaScript
  sample(
    MAIN,
    'writev',
    'JS:~writevGeneric node:internal/stream_base_commons:122:22',
    'JS:^mintSigner file:///w/src/signing/sign-doc.ts:1:99',
  ),
  // no JavaScript frame at all
  sample(MAIN, '__ecp_nistz256_sqr_montx'),
  sample(MAIN, 'node::crypto::TLSWrap::ClearOut', 'node::LibuvStreamWrap::ReadStart()::{lambda}', 'uv__read', 'uv_run'),
  sample(MAIN, 'something_else', 'uv_run'),
  // the store's writer thread: counted for its thread only
  sample(WRITER, 'sqlite3VdbeExec', 'JS:^runBatch file:///w/src/store/group-commit.ts:1:1'),
  sample(WRITER, 'fdatasync'),
].join('\n');

test('perf script text: one sample per tid line, frames innermost first, addresses dropped', () => {
  const samples = parsePerfScript(text);
  assert.equal(samples.length, 8);
  assert.equal(samples[0]!.tid, MAIN);
  assert.equal(samples[0]!.frames[0], '__bn_sqrx8x_reduction');
  assert.equal(samples[0]!.frames.length, 5);
  assert.equal(samples[7]!.tid, WRITER);
});

test('a short tid, right-aligned by perf, starts a sample and is no frame', () => {
  const samples = parsePerfScript(
    ` 2875 \n\t          858a3 __GI___pthread_disable_asynccancel\n\n 2875 \n\t     ae1a01 JS:*signDoc file:///w/src/signing/sign-doc.ts:1:5\n`,
  );
  assert.deepEqual(
    samples.map((s) => [s.tid, s.frames.length]),
    [
      [2875, 1],
      [2875, 1],
    ],
  );
});

test('CPU per call by thread, and on the event loop by module (native charged to its JavaScript caller)', () => {
  // 10 Hz and 2 calls: one sample is 100 ms of CPU, 50 ms per call
  const out = summarisePerf(
    parsePerfScript(text),
    MAIN,
    new Map([
      [MAIN, 'node'],
      [WRITER, 'qtsp-store'],
    ]),
    10,
    2,
  );
  const line = (label: string) => out.split('\n').find((l) => l.trimEnd().endsWith(label));
  assert.match(out, /^on-CPU\s+400\.000 ms per call in all threads \(2 calls, 8 samples at 10 Hz\)/);
  assert.match(line('event loop')!, /^\s+300\.000 ms/);
  assert.match(line('qtsp-store')!, /^\s+100\.000 ms/);
  assert.match(line('src/trust/sad.ts')!, /^\s+50\.000 ms\s+16\.7 %/);
  assert.match(line('src/trust/jws.ts')!, /^\s+50\.000 ms/);
  assert.match(line('node:stream_base_commons')!, /^\s+50\.000 ms/);
  assert.match(line('(OpenSSL, caller not seen: its assembly keeps no frame pointer)')!, /^\s+50\.000 ms/);
  assert.match(line('(socket reads and TLS decryption, before JavaScript runs)')!, /^\s+50\.000 ms/);
  assert.match(line('(other native or kernel work outside JavaScript)')!, /^\s+50\.000 ms/);
  assert.equal(line('src/store/group-commit.ts'), undefined, 'the writer thread is not the event loop');
});
