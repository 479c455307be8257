/** The demo RP's in-memory sessions: found by cookie value only, idle expiry, bounded, states used once. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BoundedMap, DemoSessions } from '../../../../src/rp/demo/sessions.ts';

function clock() {
  const c = { t: 1_000_000, now: () => c.t };
  return c;
}

describe('DemoSessions', () => {
  it('finds a session by its id only, and renews it on use', () => {
    const c = clock();
    const sessions = new DemoSessions({ ttlMs: 1_000, maxSessions: 10, now: c.now });
    const s = sessions.create();
    assert.ok(s.id.length >= 43, 'an unguessable id');
    assert.equal(sessions.find(s.id), s);
    assert.equal(sessions.find(undefined), undefined);
    assert.equal(sessions.find('other'), undefined);
    c.t += 900;
    assert.equal(sessions.find(s.id), s, 'used within its lifetime');
    c.t += 900;
    assert.equal(sessions.find(s.id), s, 'the lifetime counts from the last use');
  });

  it('forgets an idle session with everything in it', () => {
    const c = clock();
    const sessions = new DemoSessions({ ttlMs: 1_000, maxSessions: 10, now: c.now });
    const s = sessions.create();
    c.t += 1_000;
    assert.equal(sessions.find(s.id), undefined);
    assert.equal(sessions.size, 0);
  });

  it('keeps at most maxSessions: the least recently used gives way', () => {
    const sessions = new DemoSessions({ ttlMs: 60_000, maxSessions: 2 });
    const a = sessions.create();
    const b = sessions.create();
    sessions.find(a.id);
    const c = sessions.create();
    assert.equal(sessions.size, 2);
    assert.equal(sessions.find(b.id), undefined);
    assert.equal(sessions.find(a.id), a);
    assert.equal(sessions.find(c.id), c);
  });
});

describe('BoundedMap', () => {
  it('gives an entry out once', () => {
    const m = new BoundedMap<number>();
    m.set('state', 1);
    assert.equal(m.take('state'), 1);
    assert.equal(m.take('state'), undefined);
  });

  it('holds a few entries; the oldest go first', () => {
    const m = new BoundedMap<number>();
    for (let i = 0; i < 10; i++) m.set(`s${i}`, i);
    assert.equal(m.get('s0'), undefined);
    assert.equal(m.get('s9'), 9);
  });
});
