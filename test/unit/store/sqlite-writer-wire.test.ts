/**
 * store/sqlite-writer-wire.ts: a statement crosses to the writer thread with its SQL text once, then by number;
 * bytes cross as their own copy; an error crosses with its name, message and code.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { plainError, statementReceiver, statementSender, toError } from '../../../src/store/sqlite-writer-wire.ts';

describe('SQLite writer wire', () => {
  it('sends a SQL text once, then its number, and the receiver restores every statement', () => {
    const send = statementSender();
    const receive = statementReceiver();
    const a = { sql: 'insert into t values (?)', parameters: [1] };
    const b = { sql: 'delete from t where id = ?', parameters: ['x'] };
    const wire = [a, b, a, a, b].map(send);
    assert.deepEqual(wire[0], { sql: a.sql, text: 0, parameters: [1] });
    assert.deepEqual(wire[1], { sql: b.sql, text: 1, parameters: ['x'] });
    assert.deepEqual(wire[2], { text: 0, parameters: [1] });
    assert.deepEqual(wire[4], { text: 1, parameters: ['x'] });
    assert.deepEqual(wire.map(receive), [a, b, a, a, b]);
  });

  it('refuses a number whose text never crossed', () => {
    assert.throws(() => statementReceiver()({ text: 7, parameters: [] }), /statement text 7 was never sent/);
  });

  it('copies a Buffer that is a view into a larger ArrayBuffer; a whole one crosses as it is', () => {
    const send = statementSender();
    const pooled = Buffer.from('abc'); // a small Buffer: a view into Node's shared pool
    assert.ok(pooled.buffer.byteLength > pooled.byteLength);
    const [copied] = send({ sql: 'x', parameters: [pooled] }).parameters as Uint8Array[];
    assert.notEqual(copied!.buffer, pooled.buffer);
    assert.equal(copied!.buffer.byteLength, 3);
    assert.deepEqual([...copied!], [...pooled]);
    const whole = new Uint8Array([1, 2]);
    assert.equal(send({ sql: 'x', parameters: [whole] }).parameters[0], whole);
  });

  it('an error crosses with its name, message and code', () => {
    const err = Object.assign(new Error('UNIQUE constraint failed'), {
      name: 'SqliteError',
      code: 'SQLITE_CONSTRAINT_PRIMARYKEY',
    });
    const back = toError(plainError(err));
    assert.equal(back.name, 'SqliteError');
    assert.equal(back.message, 'UNIQUE constraint failed');
    assert.equal((back as { code?: string }).code, 'SQLITE_CONSTRAINT_PRIMARYKEY');
    assert.deepEqual(plainError('plain text'), { name: 'Error', message: 'plain text' });
  });
});
