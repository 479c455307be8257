/**
 * store/journal.ts: a signing.returned entry keeps what the response returned, the revocationInfo once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeEntry, JOURNAL_FORMAT, signingReturnedEntry } from '../../../src/store/journal.ts';

describe('the signing.returned journal entry', () => {
  const revocation = { ocsp: ['b2NzcDE=', 'b2NzcDI='], crl: ['Y3Js'] };
  const entry = (revocations: (typeof revocation | null)[]) =>
    signingReturnedEntry({
      iss: 'https://as.example',
      txn: 'txn-1',
      hashAlgorithmOid: '2.16.840.1.101.3.4.2.1',
      evidenceSerialHex: '0a',
      signatures: revocations.map((r, i) => ({ hash: `aGFzaA${i}=`, signature: `c2ln${i}`, revocation: r })),
      at: new Date('2026-11-27T00:00:00Z'),
    });

  it('carries the revocationInfo of its response once, not once per signature', () => {
    const { data } = entry([revocation, revocation, revocation]);
    assert.deepEqual(data, {
      iss: 'https://as.example',
      txn: 'txn-1',
      hashAlgorithmOid: '2.16.840.1.101.3.4.2.1',
      signatures: [
        { hash: 'aGFzaA0=', signature: 'c2ln0' },
        { hash: 'aGFzaA1=', signature: 'c2ln1' },
        { hash: 'aGFzaA2=', signature: 'c2ln2' },
      ],
      revocationInfo: revocation,
    });
    const body = encodeEntry(entry([revocation, revocation, revocation])).body;
    assert.equal(body.split('b2NzcDE=').length - 1, 1, 'one copy of each OCSP response in the body');
    assert.ok(body.startsWith(`{"at":"2026-11-27T00:00:00.000Z","data":`) && body.endsWith(`"v":${JOURNAL_FORMAT}}`));
  });

  it('keeps every distinct response, and null without any', () => {
    const other = { ocsp: ['b2NzcDM='], crl: ['Y3Js'] };
    assert.deepEqual(entry([revocation, other]).data.revocationInfo, {
      ocsp: ['b2NzcDE=', 'b2NzcDI=', 'b2NzcDM='],
      crl: ['Y3Js'],
    });
    assert.equal(entry([null, null]).data.revocationInfo, null);
  });
});
