/** Listening on a loopback or public address, and that address as a URL shows it. */
import type { AddressInfo, Server } from 'node:net';

/** A host as the authority part of a URL: an IPv6 address in brackets (RFC 3986 3.2.2). */
export function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** The host that goes into URLs of a server listening on `host`: a wildcard address is reached on loopback. */
export function publicHost(host: string): string {
  return host === '0.0.0.0' || host === '::' ? '127.0.0.1' : urlHost(host);
}

/** Starts `server` on host:port (port 0: one the kernel picks) and resolves the port it listens on. */
export async function listen(server: Server, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}
