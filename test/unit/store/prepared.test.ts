/**
 * store/prepared.ts: a statement compiled once gives, for every call, exactly what Kysely compiles for the same
 * query built with that call's values (SQL text and parameters, on both dialects' compilers), and it refuses a
 * shape in which an argument did not become a parameter.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  sql,
} from 'kysely';
import { indexed, prepare, preparedByCount } from '../../../src/store/prepared.ts';

interface Db {
  outbox: {
    id: string;
    topic: string;
    state: string;
    attempts: number;
    updated_at: number | Date;
    payload: Buffer | null;
  };
}

const compilers = {
  sqlite: new Kysely<Db>({
    dialect: {
      createAdapter: () => new SqliteAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new SqliteIntrospector(db),
      createQueryCompiler: () => new SqliteQueryCompiler(),
    },
  }),
  postgres: new Kysely<Db>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  }),
};

for (const [name, db] of Object.entries(compilers)) {
  describe(`prepared statements (${name} compiler)`, () => {
    test('each call gives the SQL and parameters Kysely compiles for the same values', () => {
      const direct = (a: { id: string; topic: string; at: number; payload: Buffer | null }) =>
        db
          .updateTable('outbox')
          .set({ state: 'queued', updated_at: a.at, payload: a.payload, attempts: sql<number>`attempts + ${1}` })
          .where('id', '=', a.id)
          .where('topic', '=', a.topic)
          .where('state', 'is not', null)
          .compile();
      const prepared = prepare<{ id: string; topic: string; at: number; payload: Buffer | null }>((p) =>
        db
          .updateTable('outbox')
          .set({ state: 'queued', updated_at: p.at, payload: p.payload, attempts: sql<number>`attempts + ${1}` })
          .where('id', '=', p.id)
          .where('topic', '=', p.topic)
          .where('state', 'is not', null),
      );
      for (const args of [
        { id: 'a', topic: 'mediation', at: 1, payload: Buffer.from('x') },
        { id: 'b', topic: 'notification', at: 2, payload: null },
      ]) {
        const expected = direct(args);
        assert.deepEqual(prepared(args), { sql: expected.sql, parameters: expected.parameters });
      }
    });

    test('a shape per count: IN lists and multi-row inserts', () => {
      const marks = preparedByCount<Record<string, unknown>>(
        (count) => (p) =>
          db
            .updateTable('outbox')
            .set({ state: 'queued' })
            .where(
              'id',
              'in',
              indexed('id', count).map((n) => p[n] as string),
            ),
      );
      for (const ids of [['a'], ['a', 'b', 'c'], ['d', 'e']]) {
        const expected = db.updateTable('outbox').set({ state: 'queued' }).where('id', 'in', ids).compile();
        const args = Object.fromEntries(ids.map((id, i) => [`id${i}`, id]));
        assert.deepEqual(marks(ids.length)(args), { sql: expected.sql, parameters: expected.parameters });
      }
      assert.equal(marks(3), marks(3), 'compiled once per count');
      const bounded = preparedByCount(() => () => db.selectFrom('outbox').selectAll(), 2);
      assert.notEqual(bounded(5), bounded(5), 'counts above the bound are not kept');
      assert.equal(bounded(2), bounded(2));
    });

    test('an argument that did not become a parameter refuses the shape', () => {
      const wrong = prepare<{ id: string; unused: string }>((p) => db.deleteFrom('outbox').where('id', '=', p.id));
      assert.throws(() => wrong({ id: 'a', unused: 'b' }), /unused did not become parameters/);
    });
  });
}
