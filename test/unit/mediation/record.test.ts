/** The mediation record remote_signature_creation (spec 6.2): exact fields, count, claims, reference_id. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  customDocumentCount,
  mediationOutboxEntries,
  referenceId,
  REFERENCE_ID_PATTERN,
  remoteSignatureCreationRecord,
  type SignatureReport,
} from '../../../src/mediation/record.ts';
import { REMOTE_SIGNATURE_CREATION_FIELDS as BASE_FIELDS } from '../../helpers/mediation-record.ts';

const QTSP = {
  qtspId: 'sp:sandbox.qtsp.localhost:6f1c4c52-0b0e-4c4e-9d6b-2b9b8f0d7a31',
  ownerId: 'owner-qtsp-sandbox',
};
const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();
const CUSTOM = digest('contract.pdf');
const DEFAULT_DOC = digest('I confirm my identity herewith.');

function report(over: Partial<SignatureReport> = {}): SignatureReport {
  return {
    txn: 'txn-42',
    issuer: 'https://bank.example',
    clientId: 'rp-1',
    clientState: 'active',
    authorizationDetails: [
      {
        type: 'sign',
        locations: [QTSP.qtspId],
        credentialID: 'qes_eidas',
        hashAlgorithmOID: '2.16.840.1.101.3.4.2.1',
        documentDigests: [{ hash: CUSTOM.toString('base64'), label: 'contract' }],
      },
    ],
    credentialID: 'qes_eidas',
    hashes: [CUSTOM],
    providedClaims: ['given_name', 'family_name'],
    certificateSerialHex: '4a1b2c',
    deliveryTime: new Date('2025-01-02T03:04:05.678Z'),
    ...over,
  };
}

function withSign(extra: Record<string, unknown>, digests: { hash: Buffer; label: string }[]) {
  return [
    { type: 'account_information' },
    {
      type: 'sign',
      credentialID: 'qes_eidas',
      documentDigests: digests.map((d) => ({ hash: d.hash.toString('base64'), label: d.label })),
      ...extra,
    },
  ];
}

describe('remote_signature_creation record (6.2)', () => {
  it('QES: exactly the nine fields, with our ids and the introspection txn', () => {
    const r = remoteSignatureCreationRecord(report(), QTSP)!;
    assert.deepEqual(Object.keys(r).sort(), BASE_FIELDS);
    assert.equal(r.transaction_id, 'txn-42');
    assert.equal(r.owner_id, QTSP.ownerId);
    assert.equal(r.service_provider_id, QTSP.qtspId);
    assert.equal(r.client_id, 'rp-1');
    assert.equal(r.issuer, 'https://bank.example');
    assert.equal(r.credentialID, 'qes_eidas');
    assert.equal(r.count, 1);
    assert.equal(r.delivery_time, '2025-01-02T03:04:05.678Z');
  });

  it('QESID: requested_claims keep only the essential flag, and every requested name', () => {
    const details = withSign(
      {
        identity_assurance_claims: {
          address: { essential: true },
          nationalities: null,
          birthdate: { essential: false, value: '1990-01-01' },
          place_of_birth: { max_age: 5 },
        },
      },
      [{ hash: CUSTOM, label: 'contract' }],
    );
    const r = remoteSignatureCreationRecord(
      report({ authorizationDetails: details, providedClaims: ['given_name', 'family_name', 'nationalities'] }),
      QTSP,
    )!;
    assert.deepEqual(Object.keys(r).sort(), [...BASE_FIELDS, 'provided_claim_names', 'requested_claims'].sort());
    assert.deepEqual(r.requested_claims, {
      verified_claims: {
        claims: { address: { essential: true }, nationalities: null, birthdate: null, place_of_birth: null },
      },
    });
    assert.deepEqual(r.provided_claim_names, [
      'verified_claims/claims/given_name',
      'verified_claims/claims/family_name',
      'verified_claims/claims/nationalities',
    ]);
  });

  it('QID alone: the default document does not count', () => {
    const details = withSign({ identity_assurance_claims: { birthdate: null } }, [{ hash: DEFAULT_DOC, label: '' }]);
    const r = remoteSignatureCreationRecord(report({ authorizationDetails: details, hashes: [DEFAULT_DOC] }), QTSP)!;
    assert.equal(r.count, 0);
    assert.ok(r.requested_claims && r.provided_claim_names);
  });

  it('QID with a custom document: only the custom one counts', () => {
    const details = withSign({ identity_assurance_claims: {} }, [
      { hash: DEFAULT_DOC, label: '' },
      { hash: CUSTOM, label: 'contract' },
    ]);
    assert.equal(customDocumentCount([DEFAULT_DOC, CUSTOM], details), 1);
    assert.equal(customDocumentCount([CUSTOM], details), 1);
  });

  it('a hash that equals a default text but has a label is a custom document', () => {
    const details = withSign({}, [{ hash: DEFAULT_DOC, label: 'my copy' }]);
    assert.equal(customDocumentCount([DEFAULT_DOC], details), 1);
  });

  it('demo clients get no record and no outbox entry (spec 3)', () => {
    assert.equal(remoteSignatureCreationRecord(report({ clientState: 'demo' }), QTSP), undefined);
    assert.deepEqual(mediationOutboxEntries(report({ clientState: 'demo' }), QTSP), []);
  });

  it('the outbox entry carries the record under its reference_id', () => {
    const [entry] = mediationOutboxEntries(report(), QTSP);
    const record = remoteSignatureCreationRecord(report(), QTSP)!;
    assert.equal(entry!.id, record.reference_id);
    assert.equal(entry!.topic, 'mediation');
    assert.deepEqual(entry!.payload, { type: 'remote_signature_creation', record });
  });
});

describe('reference_id (6.2, 8)', () => {
  it('is 1-100 characters of a-z A-Z 0-9 dash, never all digits, whatever the txn holds', () => {
    for (const txn of ['t', 'ünïcödé: / spaces', 'x'.repeat(5000), '12345']) {
      const id = referenceId(txn, 'ff01');
      assert.match(id, REFERENCE_ID_PATTERN);
      assert.ok(!/^\d+$/.test(id) && !id.includes(':'));
    }
  });

  it('is the same for the same call and differs between calls under one txn', () => {
    assert.equal(referenceId('txn-1', 'aa'), referenceId('txn-1', 'aa'));
    assert.notEqual(referenceId('txn-1', 'aa'), referenceId('txn-1', 'ab'));
    assert.notEqual(referenceId('txn-1', 'aa'), referenceId('txn-2', 'aa'));
  });
});
