/**
 * `qtsp dev`'s first start runs the key ceremony (cli/ecosystem.ts prepare) and journals it as `pki.ceremony`,
 * like `qtsp pki ceremony`: each certificate it issued with its serial and SHA-256, in the store the service
 * then uses. A later start, on existing material, journals no second ceremony.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { prepare } from '../../src/cli/ecosystem.ts';
import { openSqliteStore, sqlitePath } from '../../src/store/open.ts';

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

async function ceremonies(dataDir: string): Promise<{ data: { certificates: { name: string; sha256: string }[] } }[]> {
  const store = await openSqliteStore(sqlitePath(dataDir));
  try {
    const entries = await store.journal.entries(0, Number.MAX_SAFE_INTEGER);
    return entries.map((e) => JSON.parse(e.body.toString('utf8'))).filter((b) => b.kind === 'pki.ceremony');
  } finally {
    await store.close();
  }
}

describe('the key ceremony of qtsp dev in the journal', () => {
  it('the first start journals what the ceremony issued; a later start journals none', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'qtsp-dev-ceremony-'));
    try {
      const options = {
        config: { dataDir, server: { port: 0, publicationPort: 0 } },
        logger: pino({ level: 'silent' }),
      };
      await prepare(options);
      const [ceremony, ...more] = await ceremonies(dataDir);
      assert.ok(ceremony, 'no pki.ceremony entry after the first start');
      assert.equal(more.length, 0);
      const byName = new Map(ceremony.data.certificates.map((c) => [c.name, c.sha256]));
      for (const [name, file] of [
        ['root', 'root-ca.pem'],
        ['issuingCa', 'issuing-ca.pem'],
        ['tsa', 'tsa.pem'],
      ] as const)
        assert.equal(byName.get(name), sha256(new X509Certificate(readFileSync(join(dataDir, 'pki', file))).raw), name);
      await prepare(options);
      assert.equal((await ceremonies(dataDir)).length, 1, 'a start on existing material is no ceremony');
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
