/** The banks' expiring state: entries expire, and a capped map refuses new keys while full of live ones. */
import assert from 'node:assert/strict';
import { afterEach, describe, it, mock } from 'node:test';
import { CONSENT_KEPT_EXPIRED_SECONDS, CONSENT_TTL_SECONDS, ExpiringMap } from '../../../../src/sandbox/as/store.ts';

afterEach(() => mock.timers.reset());

describe('ExpiringMap', () => {
  it('hands out no expired entry and drops the expired ones', () => {
    mock.timers.enable({ apis: ['Date'], now: 1_000_000 });
    const m = new ExpiringMap<number>();
    m.set('a', 1, 1000);
    m.set('b', 2, 5000);
    assert.equal(m.get('a'), 1);
    mock.timers.tick(1000);
    assert.equal(m.get('a'), undefined);
    assert.equal(m.get('b'), 2);
    m.set('c', 3, 1000);
    mock.timers.tick(5000);
    m.set('d', 4, 1000);
    assert.equal(m.size, 1, 'the expired head went on insert');
  });

  it('full of live entries: a new key is refused and nothing changes; room again once one expires', () => {
    mock.timers.enable({ apis: ['Date'], now: 1_000_000 });
    const m = new ExpiringMap<number>(2);
    assert.equal(m.set('a', 1, 10_000), true);
    assert.equal(m.set('b', 2, 1_000), true);
    assert.equal(m.set('c', 3, 10_000), false);
    assert.equal(m.get('c'), undefined);
    assert.equal(m.size, 2);
    mock.timers.tick(1_000);
    // 'b' expired behind a live head: the full map is swept before refusing
    assert.equal(m.set('c', 3, 10_000), true);
    assert.equal(m.get('a'), 1);
    assert.equal(m.get('c'), 3);
  });

  it('a pending consent is kept minutes, not an hour, after its page expired', () => {
    assert.ok(CONSENT_TTL_SECONDS + CONSENT_KEPT_EXPIRED_SECONDS <= 20 * 60);
  });
});
