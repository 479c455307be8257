/**
 * Where the delivery queues' Redis is: one server (`redis://` or `rediss://`), or the master that Redis Sentinel
 * names (`redis-sentinel://host:port,host:port/NAME`). The sentinel form is one string so that it travels where a
 * URL travels (a cluster primary hands it to its workers as QTSP_REDIS_URL); the settings redis.sentinels and
 * redis.sentinelName (QTSP_REDIS_SENTINELS, QTSP_REDIS_SENTINEL_NAME) are written into it by the configuration.
 * Node's URL parser takes one host only, so the sentinel list is read here.
 */

export interface SentinelAddress {
  readonly host: string;
  readonly port: number;
}

export type RedisAddress =
  | { readonly kind: 'server'; readonly url: string }
  | { readonly kind: 'sentinel'; readonly sentinels: readonly SentinelAddress[]; readonly name: string };

const SENTINEL_SCHEME = 'redis-sentinel://';
/** Redis Sentinel's default port */
const SENTINEL_PORT = 26379;
const HOST_PORT = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+))(?::(\d{1,5}))?$/;
const MASTER_NAME = /^[A-Za-z0-9._-]+$/;

/** `host:port` (port 26379 when left out; IPv6 in brackets), or a message saying what is wrong */
export function parseSentinel(text: string): SentinelAddress | string {
  const m = HOST_PORT.exec(text.trim());
  if (!m) return `"${text}" is not host:port`;
  const port = m[3] === undefined ? SENTINEL_PORT : Number(m[3]);
  if (port < 1 || port > 65535) return `"${text}": port out of range`;
  return { host: m[1] ?? m[2]!, port };
}

/** a master name Sentinel accepts in its configuration, or a message */
export function checkMasterName(name: string): string | undefined {
  return MASTER_NAME.test(name) ? undefined : `"${name}": letters, digits, '.', '_' and '-' only`;
}

export function sentinelUrl(sentinels: readonly SentinelAddress[], name: string): string {
  const hosts = sentinels.map((s) => `${s.host.includes(':') ? `[${s.host}]` : s.host}:${s.port}`);
  return `${SENTINEL_SCHEME}${hosts.join(',')}/${name}`;
}

export function isSentinelUrl(url: string): boolean {
  return url.startsWith(SENTINEL_SCHEME);
}

/** The address a URL names; a malformed sentinel URL throws, naming what is wrong. */
export function redisAddress(url: string): RedisAddress {
  if (!isSentinelUrl(url)) return { kind: 'server', url };
  const rest = url.slice(SENTINEL_SCHEME.length);
  const slash = rest.indexOf('/');
  const name = slash < 0 ? '' : rest.slice(slash + 1);
  const problem = checkMasterName(name);
  if (problem) throw new Error(`${url}: master name ${problem}`);
  const sentinels = rest
    .slice(0, slash)
    .split(',')
    .map((s) => {
      const parsed = parseSentinel(s);
      if (typeof parsed === 'string') throw new Error(`${url}: ${parsed}`);
      return parsed;
    });
  return { kind: 'sentinel', sentinels, name };
}
