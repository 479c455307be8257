/**
 * The export's journal/batches.json holds every leaf of every batch's tree, the data groups' leaves included,
 * so that each exported root recomputes from that file alone. The recomputation is a few lines of python3
 * (hashlib, the RFC 4998 4.2 rule), not our hash-tree code, over a store whose batches seal signings' data
 * groups (both entries in one batch, and across two batches) with time-stamp and hash-tree renewals between
 * the seals.
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { hashByName } from '../../src/crypto/algorithms.ts';
import { renewHashTree, renewTimeStamps } from '../../src/journal/renewal.ts';
import { sealJournal } from '../../src/journal/seal.ts';
import { exportEvidence } from '../../src/retention/export.ts';
import { openSqliteStore, sqlitePath } from '../../src/store/open.ts';
import type { RecordSigningInput, Store } from '../../src/store/types.ts';
import type { LocalTsa } from '../../src/timestamping/tsa.ts';
import { returnSignature, testTsa } from '../helpers/journal.ts';
import { signing } from '../store/store-contract.ts';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'qtsp-export-roots-'));
let tsa: LocalTsa;
let store: Store;

before(async () => {
  tsa = testTsa(join(dir, 'pki'));
  store = await openSqliteStore(sqlitePath(join(dir, 'data')));
});
after(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * Per batch: the tree's leaves are the previous root (but for batch 1), the entries' leaves, the groups'
 * leaves; a node is SHA-256 of its two children sorted and concatenated, a node without partner is carried up.
 * Also: each prevRoot is the root before it, and a group's hash is that of its two entries' leaves when both
 * are in the file. Prints per batch its number, its group count and "ok", or exits 1.
 */
const RECOMPUTE = `
import hashlib, json, sys
batches = json.load(open(sys.argv[1]))['batches']
def root(leaves):
    level = leaves
    while len(level) > 1:
        level = [hashlib.sha256(b''.join(sorted(level[i:i + 2]))).digest() if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    return level[0]
leaf_of = {seq: bytes.fromhex(h) for b in batches for seq, h in b['leaves']}
before = None
for b in batches:
    leaves = ([bytes.fromhex(b['prevRoot'])] if b['prevRoot'] else [])
    leaves += [bytes.fromhex(h) for _, h in b['leaves']] + [bytes.fromhex(h) for _, _, h in b.get('groups', [])]
    if root(leaves).hex() != b['root']: sys.exit('batch %d: root does not recompute' % b['batchNo'])
    if before is not None and b['prevRoot'] != before: sys.exit('batch %d: prevRoot' % b['batchNo'])
    for a, r, h in b.get('groups', []):
        if a in leaf_of and r in leaf_of and hashlib.sha256(b''.join(sorted([leaf_of[a], leaf_of[r]]))).hexdigest() != h:
            sys.exit('batch %d: group %d-%d' % (b['batchNo'], a, r))
    before = b['root']
    print(b['batchNo'], len(b.get('groups', [])), 'ok')
`;

async function authorize(txn: string): Promise<RecordSigningInput> {
  const input = signing(txn);
  await store.recordSigning(input);
  return input;
}

it('every root of batches.json recomputes from the file alone, data groups and renewals included', async () => {
  const a = await authorize('txn-roots-a');
  await returnSignature(store, a); // both entries of a's group in batch 1
  const b = await authorize('txn-roots-b');
  await sealJournal(store, tsa);
  await returnSignature(store, b); // b's group across batches 1 and 2
  const c = await authorize('txn-roots-c');
  await sealJournal(store, tsa);
  await renewTimeStamps(store, tsa, { force: true, marginMs: 0 });
  await returnSignature(store, c);
  await sealJournal(store, tsa);
  assert.ok(await renewHashTree(store, tsa, hashByName('SHA-512')!));
  for (const txn of ['txn-roots-d', 'txn-roots-e']) await returnSignature(store, await authorize(txn));
  await sealJournal(store, tsa);
  assert.equal((await store.journal.renewals()).length, 2);

  const out = join(dir, 'archive');
  await exportEvidence(store, {
    from: new Date(0),
    to: new Date(Date.now() + 86_400_000),
    out,
    tsa,
    caCertificates: [],
    qtspId: 'qtsp-export-roots-test',
  });
  const { stdout } = await run('python3', ['-c', RECOMPUTE, join(out, 'journal', 'batches.json')]);
  const lines = stdout.trim().split('\n');
  const batches = (await store.journal.batches(1, 100)).length;
  assert.equal(lines.length, batches, stdout);
  const groups = lines.map((l) => Number(l.split(' ')[1]));
  assert.ok(groups.filter((g) => g > 0).length >= 3, `batches with data groups: ${stdout}`);
  assert.equal(
    groups.reduce((x, y) => x + y),
    5,
    'a group per signing',
  );
});
