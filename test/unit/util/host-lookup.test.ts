/**
 * util/host-lookup.ts: /etc/hosts read as getaddrinfo's "files" source reads it, the names DNS is asked in
 * glibc's order (search list, ndots), a hosts entry answered without DNS, and no lookup after close().
 * That a stop never waits for a DNS that does not answer: test/integration/stop-without-dns.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostLookup, hostsEntries, searchNames } from '../../../src/util/host-lookup.ts';

const HOSTS = `# comment 127.0.0.9 commented
127.0.0.1\tlocalhost
10.0.0.5   cache.internal  Cache   # the cache
::1 localhost ip6-localhost
fe80::1%lo0 linklocal
not-an-address cache.internal
`;

describe('hostsEntries', () => {
  it('finds a name or alias on any line, case-insensitively, skipping comments and what is no address', () => {
    assert.deepEqual(hostsEntries(HOSTS, 'cache.internal'), [{ address: '10.0.0.5', family: 4 }]);
    assert.deepEqual(hostsEntries(HOSTS, 'CACHE'), [{ address: '10.0.0.5', family: 4 }]);
    assert.deepEqual(hostsEntries(HOSTS, 'localhost'), [
      { address: '127.0.0.1', family: 4 },
      { address: '::1', family: 6 },
    ]);
    assert.deepEqual(hostsEntries(HOSTS, 'commented'), []);
    assert.deepEqual(hostsEntries(HOSTS, 'the'), []);
  });
});

describe('searchNames', () => {
  it('tries the search list first for a name with fewer dots than ndots, last otherwise', () => {
    const conf = 'nameserver 10.89.0.1\nsearch dns.podman corp.example\n';
    assert.deepEqual(searchNames(conf, 'redis'), ['redis.dns.podman', 'redis.corp.example', 'redis']);
    assert.deepEqual(searchNames(conf, 'redis.internal'), [
      'redis.internal',
      'redis.internal.dns.podman',
      'redis.internal.corp.example',
    ]);
    const k8s = 'search ns.svc.cluster.local svc.cluster.local\noptions ndots:5\n';
    assert.deepEqual(searchNames(k8s, 'redis.ns'), [
      'redis.ns.ns.svc.cluster.local',
      'redis.ns.svc.cluster.local',
      'redis.ns',
    ]);
  });

  it('asks for a name ending in a dot as written, and for a name alone without a search list', () => {
    assert.deepEqual(searchNames('search dns.podman\n', 'redis.'), ['redis']);
    assert.deepEqual(searchNames('nameserver 127.0.0.53\n', 'redis'), ['redis']);
    assert.deepEqual(searchNames('domain corp.example\n', 'redis'), ['redis.corp.example', 'redis']);
  });
});

describe('hostLookup', () => {
  it('answers a name of the hosts file without DNS, in the family asked for', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qtsp-hosts-'));
    try {
      const hostsFile = join(dir, 'hosts');
      writeFileSync(hostsFile, HOSTS);
      const l = hostLookup({ hostsFile });
      assert.deepEqual(await l.addresses('cache.internal'), [{ address: '10.0.0.5', family: 4 }]);
      assert.deepEqual(await l.addresses('localhost', 6), [{ address: '::1', family: 6 }]);
      assert.deepEqual(await l.addresses('localhost', 4), [{ address: '127.0.0.1', family: 4 }]);
      l.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('after close(), fails every lookup at once', async () => {
    const l = hostLookup();
    l.close();
    await assert.rejects(l.addresses('localhost'), { code: 'ECANCELLED' });
  });
});
