/**
 * The calendar of the long-lived material: every object of a fresh key ceremony listed with the end openssl
 * reads from its file; what has ended for signing at a later time; the watch's warnings at its thresholds
 * (once each) and its one-comparison check; the gauges with one series per object; and signDoc's gate.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { pkiInit } from '../../../src/ca/init.ts';
import { pkiPaths } from '../../../src/ca/material.ts';
import {
  endedForSigning,
  endedReason,
  expired,
  keyArchiveAnchors,
  pkiCalendar,
  renewalOf,
  type CalendarEntry,
} from '../../../src/ca/calendar.ts';
import * as openpgp from 'openpgp';
import { watchCalendar } from '../../../src/ca/calendar-watch.ts';
import { renewalPlan } from '../../../src/ca/renewal.ts';
import { renewedResponder } from '../../../src/ca/responder-renewal.ts';
import { loadKeyed } from '../../../src/ca/authority.ts';
import type { IssuedCertificate } from '../../../src/store/types.ts';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { pkiCalendarGauges } from '../../../src/http/metrics.ts';
import { requireCurrentMaterial } from '../../../src/signing/material-gate.ts';
import { SignDocError } from '../../../src/errors.ts';
import type { Logger } from '../../../src/util/logger.ts';
import { run } from '../../helpers/openssl.ts';

const DAY = 24 * 3600 * 1000;
const QTSP_ID = 'sp:sandbox.qtsp.localhost:6f1c4c52-0b0e-4c4e-9d6b-2b9b8f0d7a31';

describe('the calendar of a fresh ceremony', () => {
  let dir: string;
  let entries: CalendarEntry[];
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'qtsp-calendar-'));
    pkiInit({ dataDir: dir, qtspId: QTSP_ID });
    const p = pkiPaths(dir);
    entries = pkiCalendar({
      dataDir: dir,
      clientCertFile: p.clientCert,
      signerValiditySeconds: 3600,
      tsuKeyUsageDays: 365,
    });
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('lists every long-lived object, with the end openssl reads from its file', async () => {
    assert.deepEqual(
      entries.map((e) => e.object),
      ['root-ca', 'issuing-ca', 'tsa', 'ocsp-responder', 'root-ocsp-responder', 'root-crl', 'tls-client', 'mail-ca'],
    );
    for (const e of entries) {
      const args =
        e.endField === 'nextUpdate'
          ? ['crl', '-inform', 'DER', '-in', e.file, '-noout', '-nextupdate']
          : ['x509', '-in', e.file, '-noout', '-enddate'];
      const out = (await run('openssl', args)).output;
      const text = /(?:notAfter|nextUpdate)=(.*)/.exec(out)?.[1];
      assert.ok(text, out);
      assert.equal(new Date(text).getTime(), Math.floor(e.endsAt.getTime() / 1000) * 1000, e.object);
      assert.ok(e.renew.length > 0 && e.issuer.length > 0, e.object);
    }
    const tsa = entries.find((e) => e.object === 'tsa')!;
    assert.ok(tsa.keyUsageEndsAt && tsa.keyUsageEndsAt < tsa.endsAt, 'the TSU key usage ends before its certificate');
  });

  test('a year and a day on, the TSU key and root CRL have ended; two years and a day on, the responders too', () => {
    const now = Date.now();
    assert.deepEqual(endedForSigning(entries, new Date(now)), []);
    assert.deepEqual(
      endedForSigning(entries, new Date(now + 366 * DAY)).map((e) => e.object),
      ['tsa', 'root-crl'],
    );
    assert.deepEqual(
      endedForSigning(entries, new Date(now + 731 * DAY)).map((e) => e.object),
      ['tsa', 'ocsp-responder', 'root-ocsp-responder', 'root-crl', 'tls-client'],
    );
    assert.deepEqual(
      expired(entries, new Date(now + 731 * DAY)).map((e) => e.object),
      ['tsa', 'ocsp-responder', 'root-ocsp-responder', 'root-crl', 'tls-client'],
    );
  });

  test("the TSU key's usage end: named as such; an expired client certificate names the registration", () => {
    const at = new Date(Date.now() + 366 * DAY);
    const tsa = entries.find((e) => e.object === 'tsa')!;
    assert.ok(tsa.endsAt > at, 'the TSA certificate itself is still valid');
    assert.match(endedReason(tsa), /^expired: tsa \(.*\) key usage period \S+; renew: qtsp pki ceremony --renew/);
    const client = entries.find((e) => e.object === 'tls-client')!;
    assert.match(renewalOf(client, new Date()), /client-cert --rotate/);
    const ended = new Date(client.endsAt.getTime() + 1000);
    assert.match(renewalOf(client, ended), /client-cert --register/);
    assert.match(endedReason(client), /renew: qtsp pki client-cert --register/);
    assert.doesNotMatch(endedReason(client), /renew: qtsp pki client-cert --rotate/);
  });

  test("the service's responder renewal: not before it is due; then one certificate across instances", async () => {
    const p = pkiPaths(dir);
    const issuing = loadKeyed(p.issuingCert, p.issuingKey);
    const current = readFileSync(p.ocspCert);
    const end = new Date(new X509Certificate(current).validTo).getTime();
    const stored = new Map<string, IssuedCertificate>();
    let adds = 0;
    const store = {
      getCertificate: async (serial: string) =>
        stored.get(serial) && { ...stored.get(serial)!, status: { status: 'good' as const } },
      addCertificate: async (record: IssuedCertificate) => {
        adds++;
        if (stored.has(record.serialHex)) throw new Error('duplicate serial');
        stored.set(record.serialHex, record);
      },
    };
    assert.equal(await renewedResponder(current, issuing, store, 30, new Date(end - 31 * DAY)), undefined);
    const first = await renewedResponder(current, issuing, store, 30, new Date(end - 29 * DAY));
    const second = await renewedResponder(current, issuing, store, 30, new Date(end - 20 * DAY));
    assert.ok(first && second && first.equals(second), 'a second instance takes the stored certificate');
    assert.equal(adds, 1);
    const renewed = new X509Certificate(first);
    assert.ok(renewed.publicKey.equals(new X509Certificate(current).publicKey), 'the same responder key');
    assert.ok(renewed.verify(new X509Certificate(issuing.der).publicKey), 'issued by the issuing CA');
    assert.equal(new Date(renewed.validFrom).getTime(), Math.floor((end - 30 * DAY) / 1000) * 1000);
    const pem = join(dir, 'renewed-responder.pem');
    writeFileSync(pem, renewed.toString());
    const ext = (await run('openssl', ['x509', '-noout', '-ext', 'extendedKeyUsage', '-in', pem])).output;
    assert.match(ext, /OCSP Signing/);
  });

  test("the key archive's anchors: a key that expires is listed with the expiry gpg reads, one that never does not", async () => {
    const make = async (name: string, keyExpirationTime?: number) =>
      (
        await openpgp.generateKey({
          type: 'ecc',
          curve: 'ed25519Legacy',
          userIDs: [{ name, email: `${name}@example.test` }],
          format: 'armored',
          ...(keyExpirationTime ? { keyExpirationTime } : {}),
        })
      ).publicKey;
    const file = join(dir, 'archive-signers.asc');
    writeFileSync(file, `${await make('expiring', 100 * 24 * 3600)}\n${await make('forever')}`);
    const anchors = await keyArchiveAnchors(file);
    assert.equal(anchors.length, 1);
    const colons = (await run('gpg', ['--batch', '--with-colons', '--show-keys', file])).output;
    const expiry = colons
      .split('\n')
      .filter((l) => l.startsWith('pub:'))
      .map((l) => l.split(':')[6])
      .find((e) => e);
    assert.equal(anchors[0]!.endsAt.getTime() / 1000, Number(expiry), colons);
    assert.match(anchors[0]!.issuer, /expiring/);
    assert.equal(anchors[0]!.signing, false);
  });

  test('gauges: one series per object, its end as Unix time', async () => {
    const registry = new Registry();
    pkiCalendarGauges(registry, () => entries);
    const text = await registry.metrics();
    for (const e of entries) {
      const line = new RegExp(
        `qtsp_pki_end_timestamp_seconds\\{object="${e.object}",renewed_by="${e.renewedBy}"\\} (\\S+)`,
      );
      assert.equal(Number(line.exec(text)?.[1]), e.endsAt.getTime() / 1000, e.object);
    }
    assert.match(text, /qtsp_pki_key_usage_end_timestamp_seconds\{object="tsa"\} \d+/);
  });
});

function entry(object: string, endsInDays: number, signing = true): CalendarEntry {
  return {
    object,
    title: object,
    file: `/nowhere/${object}`,
    issuer: 'CN=test',
    endsAt: new Date(Date.now() + endsInDays * DAY),
    endField: 'notAfter',
    renewedBy: 'ceremony',
    renew: `renew ${object}`,
    signing,
  };
}

function capture(): { logger: Logger; lines: { level: string; fields: Record<string, unknown> }[] } {
  const lines: { level: string; fields: Record<string, unknown> }[] = [];
  const at = (level: string) => (fields: Record<string, unknown>) => lines.push({ level, fields });
  return { logger: { info: at('info'), warn: at('warn'), error: at('error') } as unknown as Logger, lines };
}

describe('the calendar watch', () => {
  test('warns once per object and threshold, errors once when ended, reloads', () => {
    let read = [entry('a', 100), entry('b', 20), entry('c', 5), entry('d', -1, false)];
    const { logger, lines } = capture();
    const watch = watchCalendar({ read: () => read, warnDays: [90, 30, 7], intervalMs: 3600_000, logger });
    try {
      const seen = () => lines.map((l) => `${l.level} ${l.fields['object']} ${l.fields['thresholdDays'] ?? ''}`);
      assert.deepEqual(seen(), ['warn b 30', 'warn c 7', 'error d ']);
      watch.reload();
      assert.equal(lines.length, 3, 'the same warnings are not repeated');
      assert.deepEqual(watch.endedForSigning(), [], 'd has ended, but no signature depends on it');
      read = [entry('a', 100), entry('b', 6), entry('c', -0.001)];
      watch.reload();
      assert.deepEqual(seen().slice(3), ['warn b 7', 'error c ']);
      assert.deepEqual(
        watch.endedForSigning().map((e) => e.object),
        ['c'],
      );
    } finally {
      watch.stop();
    }
  });

  test("the watch: a key's usage end ends signing and is logged as ended, before its certificate ends", () => {
    const tsa = { ...entry('tsa', 3000), keyUsageEndsAt: new Date(Date.now() - 1000) };
    const { logger, lines } = capture();
    const watch = watchCalendar({
      read: () => [entry('root-crl', 10), tsa],
      warnDays: [7],
      intervalMs: 3600_000,
      logger,
    });
    try {
      assert.deepEqual(
        watch.endedForSigning().map((e) => e.object),
        ['tsa'],
      );
      assert.ok(lines.some((l) => l.level === 'error' && l.fields['object'] === 'tsa' && l.fields['keyUsageEndsAt']));
      assert.throws(
        () => requireCurrentMaterial(watch),
        (err: unknown) => err instanceof SignDocError && /tsa \(tsa\) key usage period ended/.test(err.description),
      );
    } finally {
      watch.stop();
    }
  });

  test('signDoc gate: 503 naming the ended object; nothing when none has ended', () => {
    requireCurrentMaterial({ endedForSigning: () => [] });
    assert.throws(
      () => requireCurrentMaterial({ endedForSigning: () => [entry('root-crl', -1)] }),
      (err: unknown) =>
        err instanceof SignDocError &&
        err.status === 503 &&
        /root-crl/.test(err.description) &&
        /renew root-crl/.test(err.detail ?? ''),
    );
  });

  test("the watch warns at its thresholds before a key's usage end, naming it", () => {
    const tsa = { ...entry('tsa', 3000), keyUsageEndsAt: new Date(Date.now() + 20 * DAY) };
    const { logger, lines } = capture();
    const watch = watchCalendar({ read: () => [tsa], warnDays: [90, 30, 7], intervalMs: 3600_000, logger });
    try {
      assert.deepEqual(
        lines.map((l) => [l.level, l.fields['object'], l.fields['thresholdDays']]),
        [['warn', 'tsa', 30]],
      );
      assert.equal(lines[0]!.fields['keyUsageEndsAt'], tsa.keyUsageEndsAt.toISOString());
      assert.deepEqual(watch.endedForSigning(), []);
    } finally {
      watch.stop();
    }
  });

  test('renewal plan: what a ceremony renews, due within the days asked', () => {
    const keyUsage = { ...entry('tsa', 3000), keyUsageEndsAt: new Date(Date.now() + 20 * DAY) };
    const entries = [entry('root-ca', 10), entry('root-crl', 40), keyUsage, entry('root-ocsp-responder', 100)];
    const plan = renewalPlan(entries, 90, new Date());
    assert.deepEqual(
      plan.map((r) => [r.object, r.what]),
      [
        ['root-crl', 'notAfter'],
        ['tsa', 'key usage period'],
      ],
    );
    const longer = renewalPlan(entries, 400, new Date());
    assert.deepEqual(
      longer.map((r) => r.object),
      ['root-crl', 'tsa', 'root-ocsp-responder'],
    );
  });
});
