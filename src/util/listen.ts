/** Listening on a loopback or public address, and that address as a URL shows it. */
import type { AddressInfo, Server } from 'node:net';

/** A host as the authority part of a URL: an IPv6 address in brackets (RFC 3986 3.2.2). */
export function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
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
