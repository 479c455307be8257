/**
 * A real PostgreSQL for tests: Debian's server binaries (package postgresql), a throwaway cluster in a temp
 * dir, listening on a free loopback port and a socket in that dir; stop() shuts it down and removes it.
 * With POSTGRES_URL set, that server is used instead (each test store then lives in its own schema, dropped
 * at stop()).
 *
 * Missing binaries are an error, not a skip: the PostgreSQL store must be tested wherever the suite runs
 * (`npm test` installs the package first: scripts/ensure-packages.mjs).
 *
 * initdb refuses to run as root: as root, the cluster belongs to the `postgres` user the Debian package
 * creates, and every server binary runs through `runuser -u postgres --`.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../src/util/free-port.ts';

export interface PostgresServer {
  /** postgres://... of an empty database */
  readonly url: string;
  /** a URL whose connections work in a fresh, empty schema of that database (search_path) */
  freshSchemaUrl(): Promise<string>;
  /**
   * the server's own cluster only (absent with POSTGRES_URL): stop it abruptly as a crash would
   * (`pg_ctl stop -m immediate`: every backend ends at once, no checkpoint) and start it again on the same port
   */
  readonly outage?: { stopImmediate(): Promise<void>; start(): Promise<void> };
  stop(): Promise<void>;
}

const DEBIAN_DIR = '/usr/lib/postgresql';

/** the newest Debian server binaries, else initdb on PATH */
function findBinDir(): string | undefined {
  if (existsSync(DEBIAN_DIR)) {
    const versions = readdirSync(DEBIAN_DIR)
      .filter((v) => existsSync(join(DEBIAN_DIR, v, 'bin', 'initdb')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return join(DEBIAN_DIR, versions[0], 'bin');
  }
  const onPath = (process.env.PATH ?? '').split(':').find((d) => d && existsSync(join(d, 'initdb')));
  return onPath;
}

function exec(cmd: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')} failed: ${err.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

function userIds(name: string): { uid: number; gid: number } | undefined {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`));
  if (!line) return undefined;
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

async function withSchemas(
  url: string,
  dropAtStop: boolean,
  stopServer: () => Promise<void>,
  outage?: PostgresServer['outage'],
): Promise<PostgresServer> {
  const schemas: string[] = [];
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  return {
    url,
    ...(outage ? { outage } : {}),
    async freshSchemaUrl() {
      const schema = `qtsp_test_${randomBytes(6).toString('hex')}`;
      await admin(`CREATE SCHEMA ${schema}`);
      schemas.push(schema);
      const u = new URL(url);
      u.searchParams.set('options', `-c search_path=${schema}`);
      return u.toString();
    },
    async stop() {
      if (dropAtStop) for (const s of schemas) await admin(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
      await stopServer();
    },
  };
}

/** `ownCluster`: a throwaway cluster even when POSTGRES_URL names a server (a test that stops the server) */
export async function startPostgres(options: { ownCluster?: boolean } = {}): Promise<PostgresServer> {
  const external = options.ownCluster ? undefined : process.env.POSTGRES_URL;
  if (external) return withSchemas(external, true, async () => undefined);

  const bin = findBinDir();
  if (!bin) {
    throw new Error(
      'PostgreSQL server binaries not found (no initdb in /usr/lib/postgresql/*/bin or on PATH): ' +
        'install the Debian package postgresql (apt-get install postgresql), or set POSTGRES_URL to a server to test against',
    );
  }
  const asRoot = process.getuid?.() === 0;
  const owner = asRoot ? userIds('postgres') : undefined;
  if (asRoot && !owner)
    throw new Error(
      'running as root, but there is no `postgres` user to own the test cluster (the postgresql package creates it)',
    );
  const pgRun = (tool: string, args: string[]) =>
    asRoot ? exec('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args]) : exec(join(bin, tool), args);

  const dir = mkdtempSync(join(tmpdir(), 'qtsp-pg-'));
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const data = join(dir, 'data');
  let started = false;
  const stopServer = async () => {
    try {
      if (started) await pgRun('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  try {
    // --no-sync and -F (fsync off): a throwaway cluster needs no durability, and the machine is shared
    await pgRun('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
    const port = await freePort();
    const startServer = async () => {
      const server = `-p ${port} -k ${dir} -h 127.0.0.1 -F`;
      await pgRun('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '60', '-o', server, 'start']);
      started = true;
      await pgRun('pg_isready', ['-h', '127.0.0.1', '-p', String(port), '-t', '30']);
    };
    await startServer();
    await pgRun('createdb', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', 'qtsp_test']);
    const outage = {
      async stopImmediate() {
        await pgRun('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
        started = false;
      },
      start: startServer,
    };
    return await withSchemas(`postgres://postgres@127.0.0.1:${port}/qtsp_test`, false, stopServer, outage);
  } catch (err) {
    const log = existsSync(join(dir, 'server.log')) ? readFileSync(join(dir, 'server.log'), 'utf8').slice(-2000) : '';
    await stopServer().catch(() => undefined);
    throw new Error(`${(err as Error).message}${log ? `\nserver log:\n${log}` : ''}`);
  }
}
