/**
 * The CA events the running service journals (journal/ca-events.ts): each CRL of the issuing CA it signs with a
 * new list of revocations (pki.crl_issued, as fetched from /crl/issuing.crl), and the OCSP responder certificate
 * it renews itself (pki.certificate_renewed), once per store even when two instances renew at the same moment.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pkiInit } from '../../src/ca/init.ts';
import { loadCaMaterial, loadTrustServiceMaterial } from '../../src/ca/material.ts';
import { renewedResponder } from '../../src/ca/responder-renewal.ts';
import { journaledIssuance } from '../../src/journal/ca-events.ts';
import { logger } from '../../src/util/logger.ts';
import { openSqliteStore } from '../../src/store/open.ts';
import type { Store, StoredJournalEntry } from '../../src/store/types.ts';
import { httpRequest } from '../../src/util/http-client.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { certificate } from '../store/store-contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'qtsp-journal-ca-'));
after(() => rmSync(dir, { recursive: true, force: true }));

type Data = Record<string, unknown>;
const dataOf = (e: StoredJournalEntry) => (JSON.parse(e.body.toString('utf8')) as { data: Data }).data;

async function entriesOfKind(store: Store, kind: string): Promise<Data[]> {
  return (await store.journal.entries(0, Number.MAX_SAFE_INTEGER)).filter((e) => e.kind === kind).map(dataOf);
}

/** polls until `found` holds something, for at most a minute (a busy machine) */
async function eventually<T>(found: () => Promise<T[]>): Promise<T[]> {
  for (let i = 0; i < 240; i++) {
    const got = await found();
    if (got.length > 0) return got;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return [];
}

const sha256 = (der: Buffer) => createHash('sha256').update(der).digest('hex');

describe('the running service journals its CRLs and its own certificate renewals', () => {
  let env: TestEnvironment;
  let store: Store;
  before(async () => {
    // the responder is due at the start (its lifetime is shorter than this margin), then not checked again
    env = await startEnvironment({ calendar: { responderRenewDays: 800, checkIntervalSeconds: 3600 } });
    store = env.qtsp.deps.store;
  });
  after(async () => {
    await env?.close();
  });

  it('pki.certificate_renewed: the OCSP responder certificate the service renewed at its start', async () => {
    const [renewed] = await eventually(() => entriesOfKind(store, 'pki.certificate_renewed'));
    assert.ok(renewed, 'the renewal is journaled');
    const inStore = await store.getCertificate(renewed['serialHex'] as string);
    assert.ok(inStore, 'the journaled certificate is the one the store issued');
    assert.equal(renewed['sha256'], sha256(inStore.der));
    assert.equal(renewed['name'], 'ocsp-responder');
    assert.equal(renewed['by'], 'service');
  });

  it('pki.crl_issued: the CRL fetched, and the next one once a certificate of the issuing CA is revoked', async () => {
    const fetch = async () => {
      const res = await httpRequest(`${env.qtsp.publicationUrl}/crl/issuing.crl`, { timeoutMs: 30_000 });
      assert.equal(res.status, 200);
      return res.body;
    };
    await fetch();
    const first = await eventually(() => entriesOfKind(store, 'pki.crl_issued'));
    assert.ok(first.length > 0 && first.every((e) => e['ca'] === 'issuing'));

    const issuerKeyId = (await store.getCertificate(
      (
        await entriesOfKind(store, 'pki.certificate_renewed')
      )[0]!['serialHex'] as string,
    ))!.issuerKeyId;
    const revoked = certificate(null, issuerKeyId);
    await store.addCertificate(revoked);
    assert.ok(await store.revokeCertificate(revoked.serialHex, 'keyCompromise', new Date()));
    const crl = await fetch();
    const withIt = await eventually(async () =>
      (await entriesOfKind(store, 'pki.crl_issued')).filter(
        (e) => e['revoked'] === (first[0]!['revoked'] as number) + 1,
      ),
    );
    assert.equal(withIt.length, 1, 'one entry for the new list');
    assert.equal(withIt[0]!['sha256'], sha256(crl), 'the entry names the CRL served');
    assert.ok(Date.parse(withIt[0]!['nextUpdate'] as string) > Date.parse(withIt[0]!['thisUpdate'] as string));
  });
});

describe('a responder renewal racing on two instances', () => {
  it('is journaled once, by the instance whose certificate the store kept', async () => {
    const dataDir = join(dir, 'race');
    pkiInit({ dataDir, qtspId: 'qtsp-journal-ca-test' });
    const issuing = loadCaMaterial(dataDir).issuing;
    const responder = loadTrustServiceMaterial(dataDir).ocspResponder.der;
    const store = await openSqliteStore(join(dataDir, 'qtsp.sqlite'));
    try {
      const renew = () =>
        renewedResponder(responder, issuing, journaledIssuance(store, 'ocsp-responder', logger), 800, new Date());
      const [a, b] = await Promise.all([renew(), renew()]);
      assert.ok(a && b && a.equals(b), 'both instances take one certificate');
      assert.ok(await renew(), 'a later check finds it stored');
      const entries = await entriesOfKind(store, 'pki.certificate_renewed');
      assert.equal(entries.length, 1, JSON.stringify(entries));
      assert.equal(entries[0]!['serialHex'], new X509Certificate(a).serialNumber.toLowerCase());
    } finally {
      await store.close();
    }
  });
});
