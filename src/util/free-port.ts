/**
 * A free TCP port on a loopback address, for servers we start ourselves (tests, sandbox, local Redis).
 *
 * The port is chosen at random below the kernel's ephemeral range (ip_local_port_range): a port the kernel
 * hands out for listen(0) lies inside that range, where any outgoing connection of any process may take it
 * between our check and the server's own listen() (seen as EADDRINUSE when test files run side by side).
 * Below the range only another caller of this function can collide, and only by drawing the same number.
 */
import { randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const LOWEST = 10_000;

function ephemeralRangeStart(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 0 ? low : 32_768;
  } catch {
    return 32_768; // Linux's default; elsewhere the kernel's choice below is the fallback anyway
  }
}

/** listens on `port` (0: the kernel's choice) and closes again; resolves the port, or undefined when taken */
function probe(port: number, host: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', (err: NodeJS.ErrnoException) =>
      err.code === 'EADDRINUSE' || err.code === 'EACCES' ? resolve(undefined) : reject(err),
    );
    srv.listen({ port, host, exclusive: true }, () => {
      const { port: bound } = srv.address() as { port: number };
      srv.close(() => resolve(bound));
    });
  });
}

export async function freePort(host = '127.0.0.1'): Promise<number> {
  const end = ephemeralRangeStart();
  if (end - LOWEST >= 1000) {
    for (let attempt = 0; attempt < 20; attempt++) {
      const port = await probe(LOWEST + randomInt(end - LOWEST), host);
      if (port !== undefined) return port;
    }
  }
  const port = await probe(0, host);
  if (port === undefined) throw new Error(`no free port on ${host}`);
  return port;
}
