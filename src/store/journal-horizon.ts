/**
 * The journal's horizon: the highest seq the sealer may seal through, such that no entry with a lower or equal
 * seq can still commit. Batches cover seq ranges (journal.ts), so an entry committed below a range already
 * sealed would be in no batch.
 *
 * SQLite: one writer commits at a time and reads see only committed rows, so max(seq) is the horizon.
 *
 * PostgreSQL hands out identity values as rows are inserted, before their transactions commit: seq 7 may still
 * be uncommitted while seq 8 is committed. A table lock would wait for such writes, but a lock request queues
 * behind an open transaction and every later insert queues behind the request: one stalled session (a frozen
 * instance idle in transaction, an operator's psql) would stop every instance's evidence writes. So no lock:
 * 1. read L, the last value the seq's sequence handed out (sequences are not transactional, and with CACHE 1,
 *    the identity's default, every value up to L was drawn before this read);
 * 2. list the transactions holding ROW EXCLUSIVE on journal_entries (pg_locks): an insert holds it from before
 *    it draws its seq until its transaction ends, so every transaction that drew a seq <= L and is still open
 *    is in that list;
 * 3. wait, holding nothing, until each of them has ended (committed, its rows visible to later reads; or
 *    rolled back);
 * 4. the horizon is the highest seq <= L present.
 * One of them still open after HORIZON_WAIT_MS fails the horizon, naming its session: the seal is tried again
 * at its next interval, and no write waits for it meanwhile.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import type { StoreAccess } from './access.ts';

/** how long one horizon waits for the writes in flight to end before it gives up (ms) */
export const HORIZON_WAIT_MS = 2000;
const FIRST_PAUSE_MS = 5;
const LONGEST_PAUSE_MS = 100;

/** the highest committed seq with no write in flight below it (see the module comment) */
export async function horizon(a: StoreAccess, driver: 'sqlite' | 'postgres'): Promise<number> {
  if (driver === 'sqlite') return highestSeq(a, Number.MAX_SAFE_INTEGER);
  const last = await lastDrawn(a);
  if (last === 0) return 0;
  let open = await openWriters(a);
  const deadline = Date.now() + HORIZON_WAIT_MS;
  for (let pause = FIRST_PAUSE_MS; open.length > 0; pause = Math.min(pause * 2, LONGEST_PAUSE_MS)) {
    if (Date.now() >= deadline) throw new Error(await stillOpen(a, open));
    await sleep(pause);
    open = await openWriters(a, open);
  }
  return highestSeq(a, last);
}

async function highestSeq(a: StoreAccess, atMost: number): Promise<number> {
  const row = await a.db
    .selectFrom('journal_entries')
    .select((eb) => eb.fn.max('seq').as('max'))
    .where('seq', '<=', atMost)
    .executeTakeFirst();
  return Number(row?.max ?? 0);
}

/** the last seq handed out (0: none yet); refuses a sequence that caches values per session (see above) */
async function lastDrawn(a: StoreAccess): Promise<number> {
  const { rows } = await sql<{ last: string | null; cache: string }>`
    SELECT pg_sequence_last_value(s.id) AS last, q.seqcache AS cache
    FROM (SELECT pg_get_serial_sequence('journal_entries', 'seq')::regclass AS id) s
    JOIN pg_sequence q ON q.seqrelid = s.id`.execute(a.db);
  const row = rows[0];
  if (!row) throw new Error('journal: journal_entries.seq has no sequence');
  if (Number(row.cache) !== 1)
    throw new Error(`journal: the sequence of journal_entries.seq caches ${row.cache} values; the horizon needs 1`);
  return Number(row.last ?? 0);
}

/** the transactions holding ROW EXCLUSIVE on journal_entries (of `among`, when given), by virtual transaction id */
async function openWriters(a: StoreAccess, among?: readonly string[]): Promise<string[]> {
  const only = among ? sql`AND l.virtualtransaction = ANY(${[...among]}::text[])` : sql``;
  const { rows } = await sql<{ vxid: string }>`
    SELECT l.virtualtransaction AS vxid FROM pg_locks l WHERE ${writerLocks()} ${only}`.execute(a.db);
  return rows.map((r) => r.vxid);
}

/** pg_locks rows (as `l`) of a transaction that may insert into journal_entries of this database */
const writerLocks = () => sql`l.locktype = 'relation' AND l.mode = 'RowExclusiveLock' AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.relation = 'journal_entries'::regclass`;

/** why the horizon gave up: the sessions still open (pid, application, state and since when) */
async function stillOpen(a: StoreAccess, open: readonly string[]): Promise<string> {
  const { rows } = await sql<{ pid: number | null; app: string | null; state: string | null; since: Date | null }>`
    SELECT l.pid, s.application_name AS app, s.state, s.xact_start AS since
    FROM pg_locks l LEFT JOIN pg_stat_activity s ON s.pid = l.pid
    WHERE ${writerLocks()} AND l.virtualtransaction = ANY(${[...open]}::text[])`.execute(a.db);
  const sessions = rows.map(
    (r) =>
      `pid ${r.pid ?? 'none (prepared)'} (${r.app || 'no application name'}, ${r.state ?? 'state unknown'}` +
      `${r.since ? ` since ${new Date(r.since).toISOString()}` : ''})`,
  );
  return (
    `journal: not sealed: ${sessions.length || open.length} transaction(s) that may have written entries still ` +
    `open after ${HORIZON_WAIT_MS} ms: ${sessions.join('; ') || 'ended meanwhile'}`
  );
}
