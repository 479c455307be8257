/**
 * Issuing CA rollover with key files (ca/rollover.ts, ca/issuing-generations.ts) on a real ceremony and a real
 * SQLite store: two rollovers in a row keep each retired CA's publication paths; the destruction of a retired
 * CA's key is refused while the rollover is younger than a signer certificate's lifetime and while the store
 * holds a valid certificate it issued, and then leaves a last CRL and a responder certificate that openssl
 * verifies under that CA, valid until the CA ends, and no key file.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createPublicKey, generateKeyPairSync, randomBytes, X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadCeremonyRoot, pkiInit } from '../../../src/ca/init.ts';
import {
  currentPublication,
  generationTag,
  generationUrls,
  retiredFiles,
  retiredGenerations,
} from '../../../src/ca/issuing-generations.ts';
import { loadCertificate, pkiPaths } from '../../../src/ca/material.ts';
import { pkiUrls } from '../../../src/ca/publication.ts';
import { destroyRetiredKey, rolloverIssuingCa, RolloverRefused } from '../../../src/ca/rollover.ts';
import { CrlIssuer } from '../../../src/revocation/crl.ts';
import { openSqliteStore, sqlitePath } from '../../../src/store/open.ts';
import type { Store } from '../../../src/store/types.ts';
import { run } from '../../helpers/openssl.ts';

const HOUR = 3600_000;
const QTSP_ID = 'sp:sandbox.qtsp.localhost:6f1c4c52-0b0e-4c4e-9d6b-2b9b8f0d7a31';
const urls = pkiUrls('http://pki.example');

describe('issuing CA rollover with key files', () => {
  let dir: string;
  let store: Store;
  const data = () => join(dir, 'data');
  const destroy = (tag: string, now: Date) =>
    destroyRetiredKey({
      dataDir: data(),
      tag,
      store,
      generations: undefined,
      signerValiditySeconds: 3600,
      signLastCrl: (ca, validitySeconds, at) =>
        new CrlIssuer({ ca, revoked: store, validitySeconds, refreshSeconds: 0, clock: () => at }).current(),
      now,
    });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'qtsp-rollover-unit-'));
    pkiInit({ dataDir: data(), qtspId: QTSP_ID });
    store = await openSqliteStore(sqlitePath(data()));
  });
  after(async () => {
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('two rollovers: each retired CA keeps the paths its certificates point at', async () => {
    const root = loadCeremonyRoot({ dataDir: data() });
    const first = await rolloverIssuingCa({ dataDir: data(), urls, root, generations: undefined });
    const second = await rolloverIssuingCa({ dataDir: data(), urls, root, generations: undefined });
    assert.deepEqual(
      retiredGenerations(data()).map((r) => [r.tag, r.publishedAs]),
      [
        [first.retired.tag, ''],
        [second.retired.tag, first.tag],
      ],
    );
    assert.equal(second.retired.tag, first.tag);
    assert.equal(currentPublication(data()), second.tag);
    assert.equal(generationUrls(urls, second.tag).issuingCrl, `http://pki.example/crl/issuing-${second.tag}.crl`);
    assert.equal(generationUrls(urls, '').issuingCert, 'http://pki.example/ca/issuing.crt');
    const current = new X509Certificate(readFileSync(pkiPaths(data()).issuingCert));
    assert.ok(current.subject.endsWith(second.tag.slice(0, 8)), current.subject);
    const responder = new X509Certificate(readFileSync(pkiPaths(data()).ocspCert));
    assert.ok(responder.checkIssued(current), 'the new responder is not certified by the new CA');
  });

  test('destruction: refused while needed, then a last CRL and responder certificate, and no key', async () => {
    const [oldest] = retiredGenerations(data());
    const tag = oldest!.tag;
    const retiredAt = Date.parse(oldest!.retiredAt);
    await assert.rejects(destroy(tag, new Date(retiredAt + 10 * 60_000)), (err: Error) => {
      return err instanceof RolloverRefused && /may be valid until/.test(err.message);
    });
    // a certificate the retired CA issued, valid two hours after the rollover
    const serialHex = randomBytes(16).toString('hex');
    await store.recordSigning({
      certificate: {
        serialHex,
        issuerKeyId: oldest!.keyId,
        subject: 'CN=Erika Mustermann',
        notBefore: new Date(retiredAt),
        notAfter: new Date(retiredAt + 2 * HOUR),
        issuedAt: new Date(retiredAt),
        txn: 'txn-1',
        der: randomBytes(64),
      },
      transaction: {
        txn: 'txn-1',
        iss: 'https://bank.sandbox.localhost',
        sub: 'user-4711',
        clientId: 'rp-1',
        clientState: 'active',
        introspectionJwt: 'a.b.c',
        hashAlgorithmOid: '2.16.840.1.101.3.4.2.1',
        hashes: [randomBytes(32).toString('base64')],
        signatureFormat: 'C',
        conformanceLevel: 'AdES-B-B',
        keySource: 'jwks_uri',
        keyCustody: 'software',
        certificateSerialHex: serialHex,
        createdAt: new Date(retiredAt),
      },
    });
    await assert.rejects(destroy(tag, new Date(retiredAt + 1.5 * HOUR)), (err: Error) => {
      return err instanceof RolloverRefused && /a certificate it issued is valid until/.test(err.message);
    });
    const files = retiredFiles(data(), tag);
    assert.ok(existsSync(files.key));
    const done = await destroy(tag, new Date(retiredAt + 3 * HOUR));
    assert.ok(done.record.destroyedAt);
    assert.equal(existsSync(files.key), false, 'the key file is still there');
    assert.equal(retiredGenerations(data())[0]!.destroyedAt, done.record.destroyedAt);
    const ca = new X509Certificate(readFileSync(files.cert));
    const responder = new X509Certificate(readFileSync(files.responderCert));
    assert.ok(responder.checkIssued(ca));
    assert.equal(responder.validTo, ca.validTo, 'the last responder certificate does not last until the CA ends');
    const crl = await run('openssl', ['crl', '-inform', 'DER', '-in', files.finalCrl, '-CAfile', files.cert, '-noout']);
    assert.match(crl.output, /verify OK/);
    const text = await run('openssl', ['crl', '-inform', 'DER', '-in', files.finalCrl, '-noout', '-nextupdate']);
    assert.match(text.output, new RegExp(ca.validTo.replace(/\s+/g, '\\s+')));
    await assert.rejects(destroy(tag, new Date(retiredAt + 4 * HOUR)), RolloverRefused);
  });

  test('an interrupted rollover is completed by a rerun; a key its certificate does not certify is refused', async () => {
    const root = loadCeremonyRoot({ dataDir: data() });
    const p = pkiPaths(data());
    const caKey = readFileSync(p.issuingKey, 'utf8');
    const stranger = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    }) as string;
    // no retired copy yet and a key file its certificate does not certify: refused, nothing overwritten
    writeFileSync(p.issuingKey, stranger);
    await assert.rejects(
      rolloverIssuingCa({ dataDir: data(), urls, root, generations: undefined }),
      (err: Error) => err instanceof RolloverRefused && /is not the issuing-ca key/.test(err.message),
    );
    assert.equal(readFileSync(p.issuingKey, 'utf8'), stranger);
    // as if a run stopped after keeping the CA and replacing its key file, before the certificates
    const tag = generationTag(loadCertificate(p.issuingCert).der);
    const files = retiredFiles(data(), tag);
    mkdirSync(files.dir, { recursive: true });
    writeFileSync(files.key, caKey);
    const done = await rolloverIssuingCa({ dataDir: data(), urls, root, generations: undefined });
    assert.equal(done.retired.tag, tag);
    assert.equal(readFileSync(files.key, 'utf8'), caKey, 'the retired CA key was not kept');
    const current = new X509Certificate(readFileSync(p.issuingCert));
    assert.ok(current.publicKey.equals(createPublicKey(readFileSync(p.issuingKey, 'utf8'))));
  });
});
