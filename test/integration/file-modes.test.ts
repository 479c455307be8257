/**
 * Files of the data directory: a data directory we create is 0700, the SQLite store and its
 * -wal/-shm files and every private key 0600, whatever the umask; a start in a data directory that others can
 * read logs a warning naming it.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { startEcosystem } from '../../src/cli/ecosystem.ts';
import { QTSP_ID } from '../helpers/environment.ts';

const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);

function capturingLogger(): { logger: pino.Logger; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return {
    logger: pino({ level: 'warn' }, stream),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

async function startIn(dataDir: string, logger = pino({ level: 'silent' })) {
  return startEcosystem({
    config: {
      dataDir,
      qtspId: QTSP_ID,
      server: { port: 0, publicationPort: 0 },
      ops: { port: 0 },
      signer: { rsaPoolSize: 0 },
    },
    logger,
    defaultMetrics: false,
  });
}

describe('data directory and file modes', () => {
  let root: string;
  let previousUmask: number;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'qtsp-modes-'));
    previousUmask = process.umask(0o022); // the usual umask: files 0644 and directories 0755 unless we say otherwise
  });
  after(() => {
    process.umask(previousUmask);
    rmSync(root, { recursive: true, force: true });
  });

  it('creates the data directory 0700, the store files and the keys 0600; a directory open to others is named in a warning', async () => {
    const dataDir = join(root, 'data');
    const first = await startIn(dataDir);
    try {
      assert.equal(mode(dataDir), '700');
      assert.equal(mode(join(dataDir, 'pki')), '700');
      const store = join(dataDir, 'qtsp.sqlite');
      for (const f of [store, `${store}-wal`, `${store}-shm`]) {
        assert.ok(existsSync(f), `${f} exists while the store is open (WAL mode)`);
        assert.equal(mode(f), '600', f);
      }
      const keys = readdirSync(join(dataDir, 'pki')).filter((f) => f.endsWith('.key.pem'));
      assert.ok(keys.length >= 5, `root, issuing, client, TSA, OCSP keys: ${keys.join(', ')}`);
      for (const k of keys) assert.equal(mode(join(dataDir, 'pki', k)), '600', k);
    } finally {
      await first.close();
    }

    chmodSync(dataDir, 0o755);
    const capture = capturingLogger();
    const second = await startIn(dataDir, capture.logger);
    try {
      const warning = capture.lines().find((l) => l['event'] === 'datadir.open_to_others');
      assert.ok(warning, 'a warning about the data directory');
      assert.equal(warning['dir'], dataDir);
      assert.equal(warning['mode'], '0755');
      assert.match(String(warning['msg']), new RegExp(`data directory ${dataDir} .*chmod 700`));
      assert.equal(mode(dataDir), '755', 'an existing directory keeps the mode its operator gave it');
    } finally {
      await second.close();
    }
  });

  it('a private data directory starts without that warning', async () => {
    const dataDir = join(root, 'private');
    const capture = capturingLogger();
    const eco = await startIn(dataDir, capture.logger);
    try {
      assert.equal(capture.lines().filter((l) => l['event'] === 'datadir.open_to_others').length, 0);
    } finally {
      await eco.close();
    }
  });
});
