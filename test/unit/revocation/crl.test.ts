/**
 * cRLNumber (src/revocation/crl.ts): the same on every instance for the same second and the same revoked list, and
 * growing with time and with every revocation, checked over a walk of moments and revocations in which no
 * step may go back; and the CRL a CrlIssuer builds carries it (read back with openssl crl).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CrlIssuer, crlNumber } from '../../../src/revocation/crl.ts';
import { createRootCa } from '../../../src/ca/authority.ts';
import { OID } from '../../../src/ca/x509.ts';
import type { RevokedCertificate } from '../../../src/store/types.ts';
import { run, scratch } from '../../helpers/openssl.ts';

describe('cRLNumber', () => {
  it('never goes back: later seconds and more revocations give larger numbers', () => {
    let previous = -1;
    let t = Date.parse('2026-11-23T00:00:00Z');
    let revoked = 0;
    for (let step = 0; step < 500; step++) {
      t += (step * 7919) % 2500; // 0 to 2.5 s: often the same second
      if (step % 3 === 0) revoked++;
      const n = crlNumber(new Date(t), revoked);
      assert.ok(n >= previous, `step ${step}: ${n} < ${previous}`);
      if (step % 3 === 0) assert.ok(n > previous, `step ${step}: a revocation must raise the number`);
      previous = n;
    }
  });

  it('is the same for the same second and list on every instance', () => {
    assert.equal(
      crlNumber(new Date('2026-11-23T02:00:07.001Z'), 3),
      crlNumber(new Date('2026-11-23T02:00:07.999Z'), 3),
    );
  });

  it('two issuers over one store build CRLs with the same number and thisUpdate (openssl crl)', async () => {
    const ca = createRootCa([{ type: OID.commonName, value: 'CRL number test CA' }], 'P-256');
    const list: RevokedCertificate[] = [
      { serialHex: '0a', revokedAt: new Date('2026-11-23T01:00:00Z'), reason: 'keyCompromise' },
    ];
    const clock = () => new Date('2026-11-23T02:00:07.500Z');
    const options = {
      ca,
      revoked: { revokedCertificates: async () => list },
      validitySeconds: 86400,
      refreshSeconds: 300,
      clock,
    };
    const s = scratch();
    try {
      const texts = [];
      for (const issuer of [new CrlIssuer(options), new CrlIssuer(options)]) {
        const text = await run('openssl', [
          'crl',
          '-inform',
          'DER',
          '-in',
          s.file(`crl${texts.length}.der`, await issuer.current()),
          '-noout',
          '-crlnumber',
          '-lastupdate',
        ]);
        assert.ok(text.ok, text.output);
        texts.push(text.output);
      }
      assert.equal(texts[0], texts[1]);
      assert.match(texts[0]!, new RegExp(`crlNumber=0x${crlNumber(clock(), 1).toString(16).toUpperCase()}`));
      assert.match(texts[0]!, /lastUpdate=Nov 23 02:00:07 2026 GMT/);
    } finally {
      s.remove();
    }
  });
});
