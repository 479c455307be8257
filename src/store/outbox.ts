/**
 * The outbox: records to deliver after a signature (mediation records, notifications), written in the same
 * atomic write as what they report, then handed to the delivery queue by the relay (delivery/relay.ts) and
 * marked by the delivery workers. The relay's statements are compiled once (prepared.ts): it runs them on
 * every pass.
 */
import type { Selectable } from 'kysely';
import type { StoreAccess } from './access.ts';
import type { Statement } from './group-commit.ts';
import { indexed, prepare, preparedByCount } from './prepared.ts';
import { outboxPayloadJson } from './records.ts';
import type { OutboxTable, Time } from './schema.ts';
import type { NewOutboxEntry, OutboxEntry, OutboxState, Store } from './types.ts';

type OutboxRow = Selectable<OutboxTable> & { readonly insertion_order: unknown };

export type OutboxMethods = Pick<
  Store,
  'addOutbox' | 'outboxPending' | 'getOutbox' | 'markOutbox' | 'markOutboxQueued' | 'outboxCounts'
>;

export interface Outbox {
  /** the statements that add `entries` (none for none), for a write of their own or with what they report */
  insert(entries: readonly NewOutboxEntry[]): Statement[];
  readonly methods: OutboxMethods;
}

function toOutbox(row: Selectable<OutboxTable>): OutboxEntry {
  return {
    id: row.id,
    topic: row.topic,
    payload: JSON.parse(row.payload) as unknown,
    state: row.state,
    attempts: row.attempts,
    lastError: row.last_error,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

/** adding an existing id is a no-op (the mediation reference_id is the id: no record twice) */
function outboxInsert(a: StoreAccess): (entries: readonly NewOutboxEntry[]) => Statement[] {
  const insert = preparedByCount<Record<string, unknown>>((count) => (p) => {
    const rows = Array.from({ length: count }, (_, i) => ({
      id: p[`id${i}`] as string,
      topic: p[`topic${i}`] as string,
      payload: p[`payload${i}`] as string,
      state: 'pending' as const,
      attempts: 0,
      created_at: p.now as Time,
      updated_at: p.now as Time,
    }));
    return a.db
      .insertInto('outbox')
      .values(rows)
      .onConflict((oc) => oc.column('id').doNothing());
  });
  return (entries) => {
    if (entries.length === 0) return [];
    const args: Record<string, unknown> = { now: a.time(new Date()) };
    for (const [i, e] of entries.entries()) {
      Object.assign(args, { [`id${i}`]: e.id, [`topic${i}`]: e.topic, [`payload${i}`]: outboxPayloadJson(e) });
    }
    return [insert(entries.length)(args)];
  };
}

/**
 * The relay's read: pending entries of a topic, and with `queuedBefore` the queued ones last touched before
 * it. Two reads, each a range of an index, merged here: one query with `pending OR (queued AND updated_at < t)`
 * made both databases read every entry of the topic, delivered ones included, on every relay pass.
 */
function pendingReads(a: StoreAccess): OutboxMethods['outboxPending'] {
  const inState = () => a.db.selectFrom('outbox').selectAll().select(a.insertionOrder.as('insertion_order'));
  const pendingRead = prepare<{ topic: string; limit: number }>((p) =>
    inState()
      .where('topic', '=', p.topic)
      .where('state', '=', 'pending')
      .orderBy('created_at')
      .orderBy(a.insertionOrder)
      .limit(p.limit),
  );
  const staleRead = prepare<{ topic: string; limit: number; before: Time }>((p) =>
    inState()
      .where('topic', '=', p.topic)
      .where('state', '=', 'queued')
      .where('updated_at', '<', p.before)
      .orderBy('created_at')
      .orderBy(a.insertionOrder)
      .limit(p.limit),
  );
  const at = (r: OutboxRow) => new Date(r.created_at).getTime();
  const order = (x: OutboxRow, y: OutboxRow) => at(x) - at(y) || Number(x.insertion_order) - Number(y.insertion_order);
  return async (topic, limit, queuedBefore) => {
    a.ensureOpen();
    const pending = await a.read<OutboxRow>(pendingRead({ topic, limit }));
    if (!queuedBefore) return pending.map(toOutbox);
    const stale = await a.read<OutboxRow>(staleRead({ topic, limit, before: a.time(queuedBefore) }));
    return [...pending, ...stale].sort(order).slice(0, limit).map(toOutbox);
  };
}

/** the relay's mark of the entries it handed over, compiled once per count (prepared.ts) */
function queuedMarks(a: StoreAccess): OutboxMethods['markOutboxQueued'] {
  const mark = preparedByCount<Record<string, unknown>>(
    (count) => (p) =>
      a.db
        .updateTable('outbox')
        .set({ state: 'queued', updated_at: p.now as Time })
        .where(
          'id',
          'in',
          indexed('id', count).map((name) => p[name] as string),
        )
        .where('state', 'in', ['pending', 'queued']), // compare-and-set: a delivered or failed entry stays
  );
  return async (ids) => {
    a.ensureOpen();
    if (ids.length === 0) return 0;
    const args: Record<string, unknown> = { now: a.time(new Date()) };
    for (const [i, id] of ids.entries()) args[`id${i}`] = id;
    const [changed] = await a.write([mark(ids.length)(args)], 'ordered');
    return changed ?? 0;
  };
}

/** the delivery workers' marks: a state, and with an error one more failed attempt */
function entryMarks(a: StoreAccess): OutboxMethods['markOutbox'] {
  return async (id, state, error, onlyFrom) => {
    a.ensureOpen();
    if (onlyFrom?.length === 0) return false; // no state allowed: nothing to change
    let mark = a.db
      .updateTable('outbox')
      .set({ state, updated_at: a.time(new Date()) })
      .where('id', '=', id);
    // an error counts one failed attempt and becomes last_error; a mark without one keeps the last error
    if (error !== undefined) mark = mark.set((eb) => ({ attempts: eb('attempts', '+', 1), last_error: error }));
    // compare-and-set: a relay must not turn a delivered entry back into queued
    if (onlyFrom) mark = mark.where('state', 'in', onlyFrom);
    const [changed] = await a.write([mark]);
    return changed === 1;
  };
}

/** entries per state, for `qtsp mediation status` and the delivery metrics */
function stateCounts(a: StoreAccess): OutboxMethods['outboxCounts'] {
  return async (topic) => {
    a.ensureOpen();
    const counts: Record<OutboxState, number> = { pending: 0, queued: 0, delivered: 0, failed: 0 };
    const rows = await a.db
      .selectFrom('outbox')
      .select((eb) => ['state', eb.fn.countAll().as('n')])
      .where('topic', '=', topic)
      .groupBy('state')
      .execute();
    for (const row of rows) counts[row.state] = Number(row.n); // PostgreSQL counts in bigint (a string)
    return counts;
  };
}

export function outbox(a: StoreAccess): Outbox {
  const insert = outboxInsert(a);
  return {
    insert,
    methods: {
      async addOutbox(entries) {
        a.ensureOpen();
        const queries = insert(entries);
        if (queries.length > 0) await a.write(queries);
      },
      outboxPending: pendingReads(a),
      async getOutbox(id) {
        a.ensureOpen();
        const row = await a.db.selectFrom('outbox').selectAll().where('id', '=', id).executeTakeFirst();
        return row ? toOutbox(row) : undefined;
      },
      markOutbox: entryMarks(a),
      markOutboxQueued: queuedMarks(a),
      outboxCounts: stateCounts(a),
    },
  };
}
