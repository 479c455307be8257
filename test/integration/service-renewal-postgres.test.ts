/**
 * Renewal by the service with two `qtsp serve` instances on one PostgreSQL store, both on a moved clock
 * (libfaketime): when the issuing CA's OCSP responder certificate and our S/MIME mail certificate come within
 * their renewal days of their ends, each is certified again exactly once for the store (one new certificate
 * in the store, the same one in both instances' data directories, for the same key), and both instances take
 * it up without a restart (their calendars show the new end; a mail signer reads the renewed certificate).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { pkiPaths } from '../../src/ca/material.ts';
import { loadConfig } from '../../src/config/load.ts';
import { ensureMailCertificate, mailSigner } from '../../src/notification/mail-certificate.ts';
import { freePort } from '../../src/util/free-port.ts';
import { startServeFleet, type ServeFleet, type ServeProcess } from '../helpers/instances.ts';
import { MovedClock } from '../helpers/moved-clock.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';

/** both certificates live two years and are renewed thirty days before their ends: due on the moved clock */
const MOVED_DAYS = 710;
const FROM = loadConfig({}).notification.from;

describe('renewal by the service, once per store, with two instances on PostgreSQL', () => {
  let postgres: PostgresServer;
  let fleet: ServeFleet;
  let clock: MovedClock;
  let storeUrl: string;
  const instances: ServeProcess[] = [];
  const dataDirs: string[] = [];

  before(async () => {
    postgres = await startPostgres();
    storeUrl = await postgres.freshSchemaUrl();
    fleet = await startServeFleet();
    clock = new MovedClock(fleet.shared.root);
    // the mail certificate is part of the material the instances share, as the CA material is
    ensureMailCertificate(join(fleet.shared.root, 'shared'), FROM);
    for (const name of ['qtsp1', 'qtsp2']) {
      const env = fleet.instanceEnv(name, {
        port: await freePort(),
        publicationPort: await freePort(),
        store: { driver: 'postgres', url: storeUrl },
        extra: { ...clock.env(), QTSP_CALENDAR_CHECK_INTERVAL_SECONDS: '1' },
      });
      dataDirs.push(env['QTSP_DATA_DIR']!);
      instances.push(await fleet.spawn(env));
    }
  });
  after(async () => {
    await fleet?.close();
    await postgres?.stop();
  });

  /** the certificate in `file` of each instance's data directory */
  const certificates = (file: (dataDir: string) => string) =>
    dataDirs.map((dir) => new X509Certificate(readFileSync(file(dir))));
  const responderFile = (dir: string) => pkiPaths(dir).ocspCert;
  const mailFile = (dir: string) => pkiPaths(dir).mailCert;

  /** rows of the store's certificates table whose subject contains `cn` */
  const storedWith = async (cn: string): Promise<string[]> => {
    const client = new pg.Client({ connectionString: storeUrl });
    await client.connect();
    try {
      const rows = await client.query<{ serial_hex: string }>(
        'SELECT serial_hex FROM certificates WHERE subject LIKE $1',
        [`%CN=${cn}%`],
      );
      return rows.rows.map((r) => r.serial_hex);
    } finally {
      await client.end();
    }
  };
  /** the end of `object` in an instance's calendar (its metrics), Unix seconds */
  const calendarEnd = async (instance: ServeProcess, object: string): Promise<number | undefined> => {
    const text = await (await fetch(`${instance.opsUrl}/metrics`)).text();
    const m = new RegExp(`^qtsp_pki_end_timestamp_seconds\\{[^}]*object="${object}"[^}]*\\} (\\S+)$`, 'm').exec(text);
    return m ? Number(m[1]) : undefined;
  };
  const endOf = (c: X509Certificate) => new Date(c.validTo).getTime() / 1000;

  it('on the moved clock: the responder and mail certificates renewed once, the same in both instances', async () => {
    const responderBefore = certificates(responderFile)[0]!;
    const mailBefore = certificates(mailFile)[0]!;
    const signer = mailSigner(dataDirs[1]!, FROM);
    assert.ok(signer().der.equals(mailBefore.raw));
    clock.set(MOVED_DAYS);
    const deadline = Date.now() + 120_000;
    const renewed = (file: (dir: string) => string, old: X509Certificate) =>
      certificates(file).every((c) => c.serialNumber !== old.serialNumber);
    while (!renewed(responderFile, responderBefore) || !renewed(mailFile, mailBefore)) {
      assert.ok(Date.now() < deadline, 'the instances never renewed both certificates');
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    for (const [file, old, cn] of [
      [responderFile, responderBefore, 'qtsp Sandbox OCSP Responder'],
      [mailFile, mailBefore, 'qtsp end-user notifications'],
    ] as const) {
      const [one, two] = certificates(file);
      assert.ok(one!.raw.equals(two!.raw), `${cn}: the instances hold different renewed certificates`);
      assert.ok(one!.publicKey.equals(old.publicKey), `${cn}: the renewal certified another key`);
      assert.ok(endOf(one!) > Date.now() / 1000 + MOVED_DAYS * 86_400, `${cn}: not valid on the moved clock`);
      // the store holds the renewed certificate once (the responder's original is registered at start too)
      const stored = await storedWith(cn);
      assert.equal(stored.filter((s) => s === one!.serialNumber.toLowerCase()).length, 1, cn);
      assert.equal(stored.length, cn.includes('OCSP') ? 2 : 1, `${cn}: ${stored.join(', ')}`);
    }
    const mailAfter = certificates(mailFile)[1]!;
    assert.ok(signer().der.equals(mailAfter.raw), 'the mail signer still signs with the old certificate');
    for (const instance of instances) {
      for (const [object, c] of [
        ['ocsp-responder', certificates(responderFile)[0]!],
        ['mail-certificate', mailAfter],
      ] as const) {
        while ((await calendarEnd(instance, object)) !== endOf(c)) {
          assert.ok(Date.now() < deadline, `an instance's calendar never showed the renewed ${object}`);
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
    }
  });
});
