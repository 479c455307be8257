/**
 * Sealing the journal: the entries written since the last batch become the next batch, a hash tree (RFC 4998
 * 4.2, hash-tree.ts) whose first leaf is the previous batch's root, so each batch covers the whole chain before
 * it; the root is time-stamped (RFC 3161) and the batch stored with its leaves. Runs off the signDoc path on a
 * timer (startSealing) and once more at shutdown.
 *
 * A signing's two entries, signing.authorized and signing.returned, also form a data group (RFC 4998 4.2): the
 * batch that seals the signing.returned entry adds a leaf for the pair after the entries' leaves, so one
 * evidence record covers both (evidence-record.ts).
 *
 * With a second TSA configured (journal.secondTsaUrl, another operator's), the same root is time-stamped by it
 * too, and the batch is stored only with both tokens: a failure of either fails the seal, which is logged and
 * tried again at the next interval; the entries wait, none is sealed with one token by mistake.
 *
 * Several instances may seal the same database: each seals entries up to the store's horizon (store/journal.ts)
 * and inserts batch n+1; a batch number is inserted once, so the loser of a race drops its token and seals again
 * from the winner's batch. One chain, no fork, and each entry in exactly one batch.
 */
import { SHA256 } from '../crypto/algorithms.ts';
import type { JournalBatch, JournalGroup, JournalLeaf, Store, StoredJournalEntry } from '../store/types.ts';
import type { TimestampProvider } from '../timestamping/provider.ts';
import { genTimeOf } from '../timestamping/tsa.ts';
import type { Logger } from '../util/logger.ts';
import { runEvery } from '../util/periodic.ts';
import { groupHash, sha256, treeRoot } from './hash-tree.ts';

/** at most this many entries per batch: the leaves row and an audit's reads stay bounded */
export const MAX_BATCH_ENTRIES = 50_000;
const MAX_RACES = 10;
const AUTHORIZED = 'signing.authorized';
const RETURNED = 'signing.returned';

/**
 * the tree's leaves: the previous root first (the chain), then the entries' leaf hashes in seq order, then the
 * data groups' hashes
 */
export function batchLeaves(
  prevRoot: Buffer | null,
  leaves: readonly JournalLeaf[],
  groups: readonly JournalGroup[] = [],
): Buffer[] {
  return [...(prevRoot ? [prevRoot] : []), ...leaves.map((l) => l.hash), ...groups.map((g) => g.hash)];
}

/** the hash of a data group of two sealed leaves (RFC 4998 4.2: sorted, concatenated, hashed) */
export const signingGroupHash = (authorized: Buffer, returned: Buffer): Buffer =>
  groupHash(sha256, [authorized, returned]);

/**
 * The sealed leaf of a signing's signing.authorized entry from an earlier batch; each earlier batch read once
 * per seal, its leaves by seq.
 */
function earlierAuthorized(store: Store): (ref: string, before: number) => Promise<JournalLeaf | undefined> {
  const read: { batch: JournalBatch; bySeq: Map<number, Buffer> }[] = [];
  const batchOf = async (seq: number) => {
    const known = read.find(({ batch: b }) => b.firstSeq <= seq && seq <= b.throughSeq);
    if (known) return known;
    const batch = await store.journal.batchOf(seq);
    if (!batch) return undefined;
    const added = { batch, bySeq: new Map(batch.leaves.map((l) => [l.seq, l.hash])) };
    read.push(added);
    return added;
  };
  return async (ref, before) => {
    const entry = (await store.journal.entriesOf(ref)).find((e) => e.kind === AUTHORIZED && e.seq < before);
    const hash = entry && (await batchOf(entry.seq))?.bySeq.get(entry.seq);
    return hash && { seq: entry.seq, hash };
  };
}

/**
 * A data group per signing.returned entry of the batch with its signing's signing.authorized entry (in this
 * batch, or sealed in an earlier one; none when that entry is gone), so one evidence record covers both.
 */
async function signingGroups(
  store: Store,
  entries: readonly StoredJournalEntry[],
  leaves: readonly JournalLeaf[],
): Promise<JournalGroup[]> {
  const authorizedHere = new Map<string, JournalLeaf>();
  const earlier = earlierAuthorized(store);
  const groups: JournalGroup[] = [];
  for (const [i, entry] of entries.entries()) {
    if (!entry.ref) continue;
    if (entry.kind === AUTHORIZED) authorizedHere.set(entry.ref, leaves[i]!);
    if (entry.kind !== RETURNED) continue;
    const authorized = authorizedHere.get(entry.ref) ?? (await earlier(entry.ref, entry.seq));
    if (!authorized) continue;
    groups.push({
      authorizedSeq: authorized.seq,
      returnedSeq: entry.seq,
      hash: signingGroupHash(authorized.hash, leaves[i]!.hash),
    });
  }
  return groups;
}

/** The TSAs that time-stamp each batch's root: ours, and another operator's when configured. */
export interface SealingTsas {
  readonly tsa: TimestampProvider;
  readonly second?: TimestampProvider | undefined;
}

/** Which part of a seal failed: our TSA, the second TSA, or neither (the store): the label of the metric. */
export type SealFailurePart = 'ours' | 'second' | 'none';

/** A seal that failed at a TSA's time-stamp. */
export class TsaSealError extends Error {
  constructor(
    readonly tsa: 'ours' | 'second',
    message: string,
  ) {
    super(message);
  }
}

/** both tokens over `root`, or an error saying which TSA failed */
async function timestamps(tsas: SealingTsas, root: Buffer): Promise<{ token: Buffer; secondToken?: Buffer }> {
  const [first, second] = await Promise.allSettled([
    tsas.tsa.timestamp(root, SHA256),
    tsas.second ? tsas.second.timestamp(root, SHA256) : Promise.resolve(undefined),
  ]);
  if (first.status === 'rejected') throw new TsaSealError('ours', `our TSA: ${(first.reason as Error).message}`);
  if (second.status === 'rejected')
    throw new TsaSealError('second', `the second TSA: ${(second.reason as Error).message}`);
  return { token: first.value, ...(second.value ? { secondToken: second.value } : {}) };
}

/** One batch over the entries after `last` up to `through`, time-stamped; undefined when there are none. */
async function nextBatch(
  store: Store,
  tsas: SealingTsas,
  last: JournalBatch | undefined,
  horizon: number,
): Promise<JournalBatch | undefined> {
  const after = last?.throughSeq ?? 0;
  const entries = (await store.journal.entries(after, horizon)).slice(0, MAX_BATCH_ENTRIES);
  if (entries.length === 0) return undefined;
  // the leaf is the hash of the body as it is now: what was written is what gets sealed
  const leaves = entries.map((e) => ({ seq: e.seq, hash: sha256(e.body) }));
  const groups = await signingGroups(store, entries, leaves);
  const prevRoot = last?.root ?? null;
  const root = treeRoot(sha256, batchLeaves(prevRoot, leaves, groups));
  const { token, secondToken } = await timestamps(tsas, root);
  return {
    batchNo: (last?.batchNo ?? 0) + 1,
    firstSeq: after + 1,
    throughSeq: entries.length === MAX_BATCH_ENTRIES ? entries.at(-1)!.seq : horizon,
    hashOid: SHA256.oid,
    prevRoot,
    root,
    leaves,
    ...(groups.length > 0 ? { groups } : {}),
    token,
    ...(secondToken ? { secondToken } : {}),
    sealedAt: genTimeOf(token),
  };
}

/**
 * Seals everything committed so far, in as many batches as it takes; the batches this call added. `tsa`: our
 * TSA alone, or ours and a second one.
 */
export async function sealJournal(store: Store, tsa: TimestampProvider | SealingTsas): Promise<JournalBatch[]> {
  const tsas = 'timestamp' in tsa ? { tsa } : tsa;
  const sealed: JournalBatch[] = [];
  const horizon = await store.journal.horizon();
  for (let races = 0; races < MAX_RACES; ) {
    const last = await store.journal.lastBatch();
    if ((last?.throughSeq ?? 0) >= horizon) return sealed;
    const batch = await nextBatch(store, tsas, last, horizon);
    if (!batch) return sealed;
    if (await store.journal.addBatch(batch)) sealed.push(batch);
    else races++; // another instance sealed this number first: go on from its batch
  }
  throw new Error(`journal: lost ${MAX_RACES} sealing races in a row`);
}

export interface SealingJob {
  /** seals now rather than at the next interval (a failure is logged, as the timer's) */
  sealNow(): Promise<void>;
  /** stops the timer, waits for a seal under way, then seals once more */
  close(): Promise<void>;
  /** readiness.ts: not ready once no seal has succeeded for longer than the stall bound; signing goes on */
  readiness(): { readonly ready: boolean; readonly reasons: string[] };
}

/** When sealing runs, and when readiness calls it stalled. */
export interface SealingSchedule {
  /** seconds between seals; 0: only at close */
  readonly intervalSeconds: number;
  /** seconds without a successful seal after which readiness reports it stalled; 0: three intervals */
  readonly stalledAfterSeconds: number;
}

/** the bound after which sealing counts as stalled (ms); 0: never (no timer, sealed only at close) */
export function stalledAfterMs(schedule: SealingSchedule): number {
  if (schedule.intervalSeconds === 0) return 0;
  return (schedule.stalledAfterSeconds || 3 * schedule.intervalSeconds) * 1000;
}

/**
 * The outcomes of the seals: when one last succeeded and the failures since. A run of failures logs one warning,
 * and one line when a seal succeeds again; each attempt in between only updates what readiness reports.
 */
function sealingWatch(stalledAfter: number, logger: Logger, now: () => number) {
  let lastSuccess = now();
  let failures = 0;
  let lastError: string | undefined;
  const seconds = (ms: number) => Math.round(ms / 1000);
  return {
    succeeded() {
      if (failures > 0)
        logger.info(
          { event: 'journal.seal_resumed', failed_attempts: failures, unsealed_seconds: seconds(now() - lastSuccess) },
          'sealing succeeded again',
        );
      lastSuccess = now();
      failures = 0;
      lastError = undefined;
    },
    failed(err: Error) {
      failures++;
      lastError = err.message;
      if (failures === 1)
        logger.warn(
          { event: 'journal.seal_failed', error: err.message },
          'sealing failed; tried again at every interval, logged again when it succeeds',
        );
    },
    readiness() {
      const since = now() - lastSuccess;
      const last = lastError ? `last error: ${lastError}` : 'a seal is under way';
      if (stalledAfter > 0 && since > stalledAfter)
        return {
          ready: false,
          reasons: [
            `journal sealing stalled: no seal succeeded for ${seconds(since)} s, ` +
              `more than ${seconds(stalledAfter)} s; ${last}`,
          ],
        };
      if (failures === 0) return { ready: true, reasons: [] };
      return { ready: true, reasons: [`journal sealing failing: ${failures} attempt(s) failed; ${last}`] };
    },
  };
}

/**
 * Seals every `schedule.intervalSeconds` (0: only at close). A failed seal is tried again next time, and told to
 * `failed` (the metrics: which TSA failed); signing never waits for it.
 */
export function startSealing(
  store: Store,
  tsa: SealingTsas,
  schedule: SealingSchedule,
  logger: Logger,
  now: () => number = Date.now,
  failed: (part: SealFailurePart) => void = () => undefined,
): SealingJob {
  const watch = sealingWatch(stalledAfterMs(schedule), logger, now);
  const seal = async () => {
    try {
      const batches = await sealJournal(store, tsa);
      for (const b of batches)
        logger.info(
          {
            event: 'journal.sealed',
            batch: b.batchNo,
            first_seq: b.firstSeq,
            through_seq: b.throughSeq,
            second_tsa: b.secondToken !== undefined,
          },
          'journal batch sealed',
        );
      watch.succeeded();
    } catch (err) {
      failed(err instanceof TsaSealError ? err.tsa : 'none');
      watch.failed(err as Error);
    }
  };
  const periodic = schedule.intervalSeconds > 0 ? runEvery(schedule.intervalSeconds * 1000, seal) : undefined;
  return {
    sealNow: seal,
    async close() {
      await periodic?.close();
      await seal();
    },
    readiness: watch.readiness,
  };
}
