/**
 * The state of the journal's sealing as an operator watches it (GET /metrics, the status page): the newest
 * batch without its leaves, and the entries after it, counted. Two small reads, no lock: a scrape must not queue
 * behind the writers (the sealer's horizon takes a SHARE lock on PostgreSQL; this does not).
 */
import type { StoreAccess } from './access.ts';
import type { JournalSealState } from './types.ts';

export async function sealState(a: StoreAccess): Promise<JournalSealState> {
  a.ensureOpen();
  const last = await a.db
    .selectFrom('journal_batches')
    .select(['batch_no', 'through_seq', 'sealed_at', 'second_token'])
    .orderBy('batch_no', 'desc')
    .limit(1)
    .executeTakeFirst();
  const after = last ? Number(last.through_seq) : 0;
  const waiting = await a.db
    .selectFrom('journal_entries')
    .select((eb) => [eb.fn.countAll().as('count'), eb.fn.min('recorded_at').as('oldest')])
    .where('seq', '>', after)
    .executeTakeFirst();
  const oldest = waiting?.oldest;
  return {
    lastBatch: last && {
      batchNo: Number(last.batch_no),
      throughSeq: after,
      sealedAt: new Date(last.sealed_at),
      secondTimeStamp: last.second_token !== null,
    },
    unsealed: Number(waiting?.count ?? 0),
    oldestUnsealedAt: oldest === null || oldest === undefined ? null : new Date(oldest),
  };
}
