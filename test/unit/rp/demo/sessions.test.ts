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
    const sessions = new DemoSessions({ ttlMs: 1_000, maxSessions: 10, maxPerClient: 10, now: c.now });
    const s = sessions.create('192.0.2.1')!;
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
    const sessions = new DemoSessions({ ttlMs: 1_000, maxSessions: 10, maxPerClient: 10, now: c.now });
    const s = sessions.create('192.0.2.1')!;
    c.t += 1_000;
    assert.equal(sessions.find(s.id), undefined);
    assert.equal(sessions.size, 0);
  });

  it('when every place is taken by live sessions, a new one is refused: nobody else is pushed out', () => {
    const sessions = new DemoSessions({ ttlMs: 60_000, maxSessions: 2, maxPerClient: 10 });
    const a = sessions.create('192.0.2.1')!;
    const b = sessions.create('192.0.2.2')!;
    assert.equal(sessions.create('192.0.2.3'), undefined);
    assert.equal(sessions.size, 2);
    assert.equal(sessions.find(a.id), a);
    assert.equal(sessions.find(b.id), b);
  });

  it('one client address keeps maxPerClient sessions: its own least recently used gives way, no other', () => {
    const sessions = new DemoSessions({ ttlMs: 60_000, maxSessions: 100, maxPerClient: 2 });
    const victim = sessions.create('192.0.2.9')!;
    const first = sessions.create('192.0.2.1')!;
    const second = sessions.create('192.0.2.1')!;
    sessions.find(first.id);
    for (let i = 0; i < 50; i++) assert.ok(sessions.create('192.0.2.1'));
    assert.equal(sessions.size, 3);
    assert.equal(sessions.find(victim.id), victim, 'another address keeps its session');
    assert.equal(sessions.find(second.id), undefined);
    assert.equal(sessions.find(first.id), undefined);
  });

  it('counts the bytes its sessions keep, a document kept twice once', () => {
    const sessions = new DemoSessions({ ttlMs: 60_000, maxSessions: 10, maxPerClient: 10 });
    const s = sessions.create('192.0.2.1')!;
    const choice = { fileName: 'a.txt', bytes: Buffer.alloc(1000), format: 'C' as const, level: 'AdES-B-B' };
    s.chooser.set('state-1', choice);
    s.chooser.set('state-2', { ...choice, bytes: Buffer.alloc(500) });
    assert.equal(sessions.keptBytes(), 1500);
    s.chooser.set('state-3', choice);
    assert.equal(sessions.keptBytes(), 1500);
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
