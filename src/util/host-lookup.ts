/**
 * Host names resolved for our own connections (Redis, PostgreSQL) so that no lookup ever holds the process's
 * exit. Node's own lookup (getaddrinfo) runs on libuv's thread pool, cannot be cancelled, and every exit waits
 * for it: with a DNS server that does not answer, a stop that was done in a second then waits the resolver's
 * timeouts for each lookup still queued. This one reads /etc/hosts, then asks DNS through c-ares (sockets on the
 * event loop, each query bounded, all cancelled by close()) for the names resolv.conf's search list makes of
 * the host; only a name DNS has just said it does not know goes to getaddrinfo (other name services), which
 * then answers at once.
 */
import { isIP } from 'node:net';
import { promises as dns, type LookupAddress } from 'node:dns';
import { readFile } from 'node:fs/promises';

export interface HostLookup {
  /** the addresses of `host` (family 0: both); rejects with code ECANCELLED once closed */
  addresses(host: string, family?: 0 | 4 | 6): Promise<LookupAddress[]>;
  /** true once close() was called */
  readonly closed: boolean;
  /** cancels the queries in flight; later lookups fail at once */
  close(): void;
}

/** what a DNS server answered when it does not know the name (anything else: it did not answer) */
const UNKNOWN_NAME = new Set(['ENOTFOUND', 'ENODATA']);

/** the addresses /etc/hosts gives `host`, as getaddrinfo's "files" source would */
export function hostsEntries(text: string, host: string): LookupAddress[] {
  const name = host.toLowerCase();
  const out: LookupAddress[] = [];
  for (const line of text.split('\n')) {
    const [address, ...names] = line.replace(/#.*/, '').trim().split(/\s+/);
    const family = address ? isIP(address) : 0;
    if (family && names.some((n) => n.toLowerCase() === name)) out.push({ address: address!, family });
  }
  return out;
}

/** the names DNS is asked for `host`, in the order glibc's resolver asks them (resolv.conf search, ndots) */
export function searchNames(resolvConf: string, host: string): string[] {
  if (host.endsWith('.')) return [host.slice(0, -1)];
  let search: string[] = [];
  let ndots = 1;
  for (const line of resolvConf.split('\n')) {
    const [key, ...values] = line
      .replace(/[#;].*/, '')
      .trim()
      .split(/\s+/);
    if (key === 'search' || key === 'domain') search = values;
    if (key === 'options') for (const v of values) ndots = Number(/^ndots:(\d+)$/.exec(v)?.[1] ?? ndots);
  }
  const searched = search.map((domain) => `${host}.${domain}`);
  return host.split('.').length - 1 >= ndots ? [host, ...searched] : [...searched, host];
}

export interface HostLookupOptions {
  /** per DNS query, and how often it is sent before the lookup fails */
  readonly timeoutMs?: number;
  readonly tries?: number;
  readonly hostsFile?: string;
  readonly resolvConf?: string;
}

export function hostLookup(options: HostLookupOptions = {}): HostLookup {
  const resolver = new dns.Resolver({ timeout: options.timeoutMs ?? 2000, tries: options.tries ?? 2 });
  const read = (file: string) => readFile(file, 'utf8').catch(() => '');
  let closed = false;

  /** the addresses DNS gives `name`; [] when it says it has none; throws when it does not answer */
  async function ask(name: string, family: number): Promise<LookupAddress[]> {
    const asked = await Promise.allSettled([
      family !== 6 ? resolver.resolve4(name) : Promise.resolve([]),
      family !== 4 ? resolver.resolve6(name) : Promise.resolve([]),
    ]);
    const found = asked.flatMap((r, i) =>
      r.status === 'fulfilled' ? r.value.map((address) => ({ address, family: i === 0 ? 4 : 6 })) : [],
    );
    const failure = asked.find((r) => r.status === 'rejected')?.reason as NodeJS.ErrnoException | undefined;
    if (found.length === 0 && failure && !UNKNOWN_NAME.has(failure.code ?? '')) throw failure;
    return found;
  }

  async function resolve(host: string, family: number): Promise<LookupAddress[]> {
    if (closed) throw Object.assign(new Error(`lookup ${host}: closed`), { code: 'ECANCELLED' });
    const hosts = hostsEntries(await read(options.hostsFile ?? '/etc/hosts'), host);
    const wanted = hosts.filter((a) => family === 0 || a.family === family);
    if (wanted.length > 0) return wanted;
    for (const name of searchNames(await read(options.resolvConf ?? '/etc/resolv.conf'), host)) {
      const found = await ask(name, family);
      if (found.length > 0) return found;
    }
    // DNS answered that it does not know the name: the system's resolver may (other name services)
    return dns.lookup(host, { family, all: true });
  }

  return {
    addresses: (host, family = 0) => resolve(host, family),
    get closed() {
      return closed;
    },
    close() {
      closed = true;
      resolver.cancel();
    },
  };
}
