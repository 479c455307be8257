/**
 * A TCP proxy in front of PostgreSQL that loses a COMMIT's answer on command: it forwards every connection's
 * traffic both ways and reads what the client sends as PostgreSQL frontend messages (protocol 3: a startup
 * message, then a type byte and an Int32 length each). Armed with cutAfterCommit(match), it forwards the COMMIT
 * of the next transaction whose statements `match` accepts, then drops that connection: the server receives the
 * COMMIT and its end of stream (it commits, then finds no one to answer), the client never sees the answer.
 * cutBeforeCommit(match) drops the connection instead of forwarding that COMMIT: the server rolls back.
 *
 * The `pg` driver sends COMMIT as a simple Query ('Q', Kysely's `commit` has no parameters) and statements with
 * parameters through the extended protocol (Parse 'P' carries the SQL text, Sync 'S' ends the exchange); both
 * are read.
 *
 * down() drops every connection (the server's end after what was forwarded) and refuses new ones until up().
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface PostgresProxy {
  /** host:port to connect to instead of the server's */
  readonly port: number;
  /** `url` (a postgres:// URL of the server) pointing at the proxy */
  via(url: string): string;
  /**
   * one shot: lose the answer to the next COMMIT of a transaction whose SQL texts `match` accepts; `thenDown`:
   * and go down() at that moment (the database unreachable right after the COMMIT)
   */
  cutAfterCommit(match: (statements: readonly string[]) => boolean, options?: { thenDown?: boolean }): void;
  /** the same, but the COMMIT is not forwarded: the transaction does not commit */
  cutBeforeCommit(match: (statements: readonly string[]) => boolean, options?: { thenDown?: boolean }): void;
  /** how many COMMITs were cut so far */
  readonly cuts: number;
  down(): void;
  up(): void;
  close(): Promise<void>;
}

const COMMIT = /^\s*commit\s*;?\s*$/i;
const BEGIN = /^\s*(begin|start transaction)\b/i;
const SSL_REQUEST = 80877103;

/** the first C string of a message body */
function cString(body: Buffer, from = 0): string {
  const end = body.indexOf(0, from);
  return body.subarray(from, end < 0 ? body.length : end).toString('utf8');
}

export async function startPostgresProxy(target: { host: string; port: number }): Promise<PostgresProxy> {
  const connections = new Set<{ drop(): void }>();
  let armed: { match: (statements: readonly string[]) => boolean; thenDown: boolean; before: boolean } | undefined;
  let cuts = 0;
  let refusing = false;

  const down = () => {
    refusing = true;
    for (const c of connections) c.drop();
  };

  const relay = (client: Socket) => {
    if (refusing) return void client.destroy();
    const server = connect(target);
    let cut = false;
    let pending = Buffer.alloc(0);
    let started = false; // the startup message (no type byte) has been forwarded
    let statements: string[] = [];
    let commitAwaitingSync = false;
    const drop = () => {
      if (cut) return;
      cut = true;
      client.destroy();
      server.end(); // what was forwarded reaches the server first, then its end of stream
      setTimeout(() => server.destroy(), 5_000).unref();
    };
    const entry = { drop };
    connections.add(entry);
    const forget = () => connections.delete(entry);
    client.on('close', forget);
    client.on('error', () => undefined);
    server.on('error', () => client.destroy());
    server.on('data', (chunk) => {
      if (!cut) client.write(chunk);
    });
    server.on('close', () => client.destroy());
    client.on('close', () => {
      if (!cut) server.end();
    });
    /** one frontend message; true when the connection is to be cut there (after it, or before it when armed so) */
    const cutsHere = (type: string, body: Buffer): boolean => {
      if (type === 'Q') {
        const text = cString(body);
        if (BEGIN.test(text)) statements = [];
        else if (COMMIT.test(text)) return commitMatches();
        else statements.push(text);
      } else if (type === 'P') {
        const text = cString(body, body.indexOf(0) + 1);
        if (COMMIT.test(text) && armed?.before) return commitMatches(); // before the server could run it
        if (COMMIT.test(text)) commitAwaitingSync = true;
        else statements.push(text);
      } else if (type === 'S' && commitAwaitingSync) {
        commitAwaitingSync = false;
        return commitMatches();
      }
      return false;
    };
    const commitMatches = (): boolean => {
      const match = armed?.match(statements);
      statements = [];
      if (!match) return false;
      cuts++;
      return true;
    };
    client.on('data', (chunk) => {
      if (cut) return;
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const headerLength = started ? 5 : 4;
        if (pending.length < headerLength) return;
        const length = pending.readInt32BE(headerLength - 4) + headerLength - 4;
        if (pending.length < length) return;
        const message = pending.subarray(0, length);
        pending = pending.subarray(length);
        const cutHere = started && cutsHere(String.fromCharCode(message[0]!), message.subarray(5));
        // an SSLRequest (answered 'N' here: no TLS on loopback) comes before the startup message proper
        if (!started && message.readInt32BE(4) !== SSL_REQUEST) started = true;
        if (!(cutHere && armed?.before)) server.write(message);
        if (!cutHere) continue;
        const thenDown = armed?.thenDown;
        armed = undefined;
        return thenDown ? down() : drop();
      }
    });
  };

  const listener: Server = createServer(relay);
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (listener.address() as { port: number }).port;
  return {
    port,
    via(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    cutAfterCommit(match, options = {}) {
      armed = { match, thenDown: options.thenDown ?? false, before: false };
    },
    cutBeforeCommit(match, options = {}) {
      armed = { match, thenDown: options.thenDown ?? false, before: true };
    },
    get cuts() {
      return cuts;
    },
    down,
    up() {
      refusing = false;
    },
    async close() {
      down();
      await new Promise<void>((resolve) => listener.close(() => resolve()));
    },
  };
}
