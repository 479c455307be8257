/**
 * The TSU key's usage period (EN 319 421 7.6) in our TSA: within it a token verifies with openssl; after it no
 * token is signed, in process (signatures, the journal's seal: nothing sealed) or for a TimeStampReq (POST /tsa
 * answers a rejection openssl reads), whatever the certificate's own end.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pkiInit } from '../../../src/ca/init.ts';
import { loadCaMaterial, loadTrustServiceMaterial, pkiPaths } from '../../../src/ca/material.ts';
import { SHA256 } from '../../../src/crypto/algorithms.ts';
import { DomainError } from '../../../src/domain-error.ts';
import { sealJournal } from '../../../src/journal/seal.ts';
import { openSqliteStore } from '../../../src/store/open.ts';
import type { Store } from '../../../src/store/types.ts';
import { LocalTsa } from '../../../src/timestamping/tsa.ts';
import { run } from '../../helpers/openssl.ts';
import { signing } from '../../store/store-contract.ts';

const DAY = 24 * 3600 * 1000;

describe('the TSU key usage period', () => {
  let dir: string;
  let store: Store;
  let now: Date;
  let tsa: LocalTsa;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'qtsp-tsu-usage-'));
    pkiInit({ dataDir: dir, qtspId: 'qtsp-tsu-usage-test' });
    now = new Date();
    const material = loadTrustServiceMaterial(dir);
    const settings = { policyOid: '1.3.6.1.4.1.99999.1', accuracySeconds: 1, keyUsageDays: 365 };
    tsa = new LocalTsa(material.tsa, loadCaMaterial(dir).root.der, settings, () => now);
    store = await openSqliteStore(join(dir, 'store.sqlite'));
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const file = (name: string, bytes: Uint8Array) => {
    const path = join(dir, name);
    writeFileSync(path, bytes);
    return path;
  };
  /** our TSA's answer to a TimeStampReq openssl made, as `openssl ts -reply -text` reads it */
  const answer = async () => {
    const data = file('data', Buffer.from('a document'));
    const query = join(dir, 'query.tsq');
    assert.ok((await run('openssl', ['ts', '-query', '-data', data, '-sha256', '-cert', '-out', query])).ok);
    const { body } = await tsa.respond(readFileSync(query));
    return (await run('openssl', ['ts', '-reply', '-in', file('reply.tsr', body), '-text'])).output;
  };

  it('within the period: a token that verifies under the root, and a granted reply', async () => {
    const imprint = createHash('sha256').update('within').digest();
    const token = await tsa.timestamp(imprint, SHA256);
    const p = pkiPaths(dir);
    const verified = await run('openssl', [
      'ts',
      '-verify',
      '-digest',
      imprint.toString('hex'),
      '-token_in',
      '-in',
      file('token.der', token),
      '-CAfile',
      p.rootCert,
      '-untrusted',
      p.tsaCert,
    ]);
    assert.ok(verified.ok, verified.output);
    assert.match(await answer(), /Status: Granted\./);
  });

  it('a year and a day on: no token in process, a rejection for a request, and the seal seals nothing', async () => {
    now = new Date(Date.now() + 366 * DAY);
    const imprint = createHash('sha256').update('after').digest();
    await assert.rejects(
      tsa.timestamp(imprint, SHA256),
      (err: unknown) =>
        err instanceof DomainError && err.kind === 'tsa_unavailable' && /usage period ended/.test(err.message),
    );
    const reply = await answer();
    assert.match(reply, /Status: Rejected\./);
    assert.match(reply, /TSU key's usage period ended/);
    assert.match(reply, /system failure/i);
    await store.recordSigning(signing());
    await assert.rejects(sealJournal(store, tsa), /usage period ended/);
    assert.equal(await store.journal.lastBatch(), undefined, 'a batch was sealed with the old TSU key');
  });
});
