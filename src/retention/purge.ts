/**
 * The scheduled purge (config `retention`): delivered outbox entries past `outboxDeliveredDays`, and evidence
 * past `evidenceDays` whose mediation record (spec 6.2) was delivered or never existed (a demo client, a
 * signing that failed before its record). Evidence whose record is pending, queued or failed stays whatever its
 * age: it is what backs a record still owed to the mediation service.
 *
 * It runs in the one process of an instance that owns the outbox relay (service.ts, or the primary of
 * cli/serve-cluster.ts); instances sharing PostgreSQL may each run it, as every delete repeats its conditions.
 * Work goes in batches of `purgeBatchSize` rows, one write each, with a turn of the event loop between them.
 */
import { setImmediate as turn } from 'node:timers/promises';
import type { Config } from '../config/schema.ts';
import { referenceId } from '../mediation/record.ts';
import type { Store } from '../store/types.ts';
import type { Logger } from '../util/logger.ts';
import { type PeriodicTask, runEvery } from '../util/periodic.ts';

const DAY_MS = 86_400_000;

/** What one purge deleted. */
export interface Purged {
  readonly outbox: number;
  readonly signings: number;
  readonly documents: number;
}

/** What to purge: cutoffs (undefined: keep for ever) and the rows one write deletes at most. */
export interface PurgeCutoffs {
  readonly outboxDeliveredBefore: Date | undefined;
  readonly evidenceBefore: Date | undefined;
  readonly batchSize: number;
}

/** the cutoffs of the configured periods as of `now` */
export function cutoffs(settings: Config['retention'], now: Date): PurgeCutoffs {
  const before = (days: number) => (days > 0 ? new Date(now.getTime() - days * DAY_MS) : undefined);
  return {
    outboxDeliveredBefore: before(settings.outboxDeliveredDays),
    evidenceBefore: before(settings.evidenceDays),
    batchSize: settings.purgeBatchSize,
  };
}

/** the outbox entries that report a signing: its mediation record (mediation/record.ts referenceId) */
const mediationRecordOf = (signing: { txn: string; certificateSerialHex: string }) => [
  referenceId(signing.txn, signing.certificateSerialHex),
];

/** calls `batch` until it reports fewer rows than a full batch; the sum of what it deleted */
async function inBatches(size: number, batch: () => Promise<{ read: number; deleted: number }>): Promise<number> {
  let deleted = 0;
  for (;;) {
    const done = await batch();
    deleted += done.deleted;
    if (done.read < size) return deleted;
    await turn(); // let signDoc's work in
  }
}

async function purgeEvidence(store: Store, before: Date, size: number): Promise<number> {
  let after: Awaited<ReturnType<Store['purgeEvidence']>>['last'];
  return inBatches(size, async () => {
    const page = await store.purgeEvidence(before, size, mediationRecordOf, after);
    after = page.last;
    return page;
  });
}

/** One purge of everything past its period; each part in bounded batches. */
export async function purgeExpired(store: Store, cut: PurgeCutoffs): Promise<Purged> {
  const size = cut.batchSize;
  const { outboxDeliveredBefore: outboxBefore, evidenceBefore } = cut;
  const outbox = outboxBefore
    ? await inBatches(size, async () => {
        const n = await store.purgeDeliveredOutbox(outboxBefore, size);
        return { read: n, deleted: n };
      })
    : 0;
  if (!evidenceBefore) return { outbox, signings: 0, documents: 0 };
  const signings = await purgeEvidence(store, evidenceBefore, size);
  // after the signings: a consent's documents go once none of its signings is left
  const documents = await inBatches(size, async () => {
    const n = await store.purgeDocuments(evidenceBefore, size);
    return { read: n, deleted: n };
  });
  return { outbox, signings, documents };
}

/** The purge journals itself: what it deleted and up to when (the entries it deleted left their leaf hashes). */
async function journalPurge(store: Store, cut: PurgeCutoffs, purged: Purged): Promise<void> {
  const iso = (d: Date | undefined) => d?.toISOString() ?? null;
  await store.journal.append({
    kind: 'retention.purged',
    ref: null,
    at: new Date(),
    data: {
      outboxDeliveredBefore: iso(cut.outboxDeliveredBefore),
      evidenceBefore: iso(cut.evidenceBefore),
      ...purged,
    },
  });
}

/** close(): stops the timer and waits for a purge under way */
export type RetentionJob = PeriodicTask;

/**
 * Purges every `purgeIntervalSeconds`, the first time one interval after the start (a restart loop does not
 * purge on every start). Nothing runs when no period is set. A failed purge is logged and tried next time.
 */
export function startRetention(config: Config, store: Store, logger: Logger): RetentionJob {
  const settings = config.retention;
  if (settings.evidenceDays === 0 && settings.outboxDeliveredDays === 0) return { close: async () => undefined };
  return runEvery(settings.purgeIntervalSeconds * 1000, async () => {
    try {
      const cut = cutoffs(settings, new Date());
      const purged = await purgeExpired(store, cut);
      if (purged.outbox + purged.signings + purged.documents > 0) {
        await journalPurge(store, cut, purged);
        logger.info({ event: 'retention.purged', ...purged }, 'rows past their retention period deleted');
      }
    } catch (err) {
      logger.warn(
        { event: 'retention.purge_failed', error: (err as Error).message },
        'purge failed; tried again later',
      );
    }
  });
}
