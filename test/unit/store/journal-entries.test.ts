/**
 * store/journal.ts: the signing entries of format 3 carry the SHA-256 (hex) of what their rows keep: the
 * introspection JWT, the certificate, each signature returned and the revocationInfo (once per response), each
 * checked here with openssl's digest, not ours.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import {
  encodeEntry,
  JOURNAL_FORMAT,
  revocationInfoText,
  signingAuthorizedEntry,
  signingReturnedEntry,
} from '../../../src/store/journal.ts';
import { signing } from '../../store/store-contract.ts';

/** SHA-256 by openssl, an implementation we did not write */
const opensslSha256 = (bytes: Buffer | string) =>
  execFileSync('openssl', ['dgst', '-sha256', '-r'], { input: bytes }).toString('utf8').split(' ')[0]!;

describe('the signing.returned journal entry', () => {
  const revocation = { ocsp: ['b2NzcDE=', 'b2NzcDI='], crl: ['Y3Js'] };
  const signature = (i: number) => Buffer.from(`a signature object ${i}`).toString('base64');
  const entry = (revocations: (typeof revocation | null)[]) =>
    signingReturnedEntry({
      iss: 'https://as.example',
      txn: 'txn-1',
      hashAlgorithmOid: '2.16.840.1.101.3.4.2.1',
      evidenceSerialHex: '0a',
      signatures: revocations.map((r, i) => ({ hash: `aGFzaA${i}=`, signature: signature(i), revocation: r })),
      at: new Date('2026-11-27T00:00:00Z'),
    });

  it('carries the SHA-256 of each signature returned and of the revocationInfo, once', () => {
    const { data } = entry([revocation, revocation, revocation]);
    assert.deepEqual(data, {
      iss: 'https://as.example',
      txn: 'txn-1',
      hashAlgorithmOid: '2.16.840.1.101.3.4.2.1',
      signatures: [0, 1, 2].map((i) => ({
        hash: `aGFzaA${i}=`,
        signatureSha256: opensslSha256(Buffer.from(`a signature object ${i}`)),
      })),
      revocationInfoSha256: opensslSha256('{"crl":["Y3Js"],"ocsp":["b2NzcDE=","b2NzcDI="]}'),
    });
    const body = encodeEntry(entry([revocation, revocation, revocation])).body;
    assert.equal(body.includes('b2NzcDE='), false, 'no OCSP response in the body');
    assert.equal(body.includes(signature(0)), false, 'no signature in the body');
    assert.equal(JOURNAL_FORMAT, 3);
    assert.ok(body.startsWith(`{"at":"2026-11-27T00:00:00.000Z","data":`) && body.endsWith('"v":3}'));
  });

  it('hashes every distinct response once, and null without any', () => {
    const other = { ocsp: ['b2NzcDM='], crl: ['Y3Js'] };
    assert.equal(revocationInfoText({ ocsp: ['a', 'a', 'b'], crl: [] }), '{"crl":[],"ocsp":["a","b"]}');
    assert.equal(
      entry([revocation, other]).data.revocationInfoSha256,
      opensslSha256('{"crl":["Y3Js"],"ocsp":["b2NzcDE=","b2NzcDI=","b2NzcDM="]}'),
    );
    assert.equal(entry([null, null]).data.revocationInfoSha256, null);
  });
});

describe('the signing.authorized journal entry', () => {
  it('carries the SHA-256 of the JWT as received and of the certificate DER, not them', () => {
    const input = signing();
    const { data } = signingAuthorizedEntry(input);
    assert.equal(data.introspectionJwtSha256, opensslSha256(input.transaction.introspectionJwt));
    assert.equal(data.certificateSha256, opensslSha256(input.certificate.der));
    assert.equal('introspectionJwt' in data || 'certificate' in data, false);
    assert.deepEqual(data.hashes, input.transaction.hashes);
  });
});
