/** What the bank's consent page shows: default documents recognised by hash, claims per identity (spec 2.7, 7.4). */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { claimText, documentViews, identityView, rpDisplayName } from '../../../../src/sandbox/as/consent-view.ts';
import type { PushedRequest, SignAuthorization } from '../../../../src/sandbox/as/model.ts';
import { DEFINED_CLAIMS } from '../../../../src/sandbox/platform/constants.ts';
import { DEFAULT_SIGNING_DOCUMENTS, type SpRecord } from '../../../../src/sandbox/platform/sp-record.ts';
import type { PlatformClient } from '../../../../src/sandbox/types.ts';
import { DEFAULT_USER_SUB, TEST_USERS } from '../../../../src/sandbox/users.ts';

const SHA256_OID = '2.16.840.1.101.3.4.2.1';
const SHA512_OID = '2.16.840.1.101.3.4.2.3';
const b64 = (alg: string, text: string) => createHash(alg).update(Buffer.from(text, 'utf8')).digest('base64');

function qtspRecord(): SpRecord {
  return {
    client_name: 'Test QTSP',
    client_id: 'sp:test',
    service_type: 'remote_signature_creation',
    authorization_data_types_supported: ['sign'],
    required_claims: {
      verified_claims: {
        verification: { trust_framework: null },
        claims: {
          given_name: { essential: true },
          family_name: { essential: true },
          birthdate: null,
          place_of_birth: null,
        },
      },
    },
    conformance_levels_supported: [],
    max_documents_per_signing: 100,
    subject_type: 'public',
    token_endpoint_auth_method: 'self_signed_tls_client_auth',
    jwks: { keys: [] },
    policy_uri: 'https://qtsp.example/policy/v1/',
    tos_uri: 'https://qtsp.example/tos/v1/',
    tos_uri_label: 'Terms',
    status: 'active',
    endpoints: { signDoc: 'https://qtsp.example/signDoc' },
    owner_id: 'owner',
    identity_assurance_claims_supported: [...DEFINED_CLAIMS],
    default_signing_documents: DEFAULT_SIGNING_DOCUMENTS.map((d) => ({ ...d })),
  };
}

const client: PlatformClient = {
  clientId: 'rp-1',
  redirectUris: ['https://rp.example/cb'],
  accountChooserRedirectUris: [],
  state: 'active',
  allowedClaimsQes: [...DEFINED_CLAIMS],
  allowedTypes: ['sign'],
} as PlatformClient;

function sign(docs: { hash: string; label: string }[], oid = SHA256_OID, claims?: SignAuthorization['identityClaims']) {
  return {
    details: [{ type: 'sign', locations: ['sp:test'], documentDigests: docs, hashAlgorithmOID: oid }],
    qtspId: 'sp:test',
    ...(claims ? { identityClaims: claims } : {}),
  } satisfies SignAuthorization;
}

function pushed(s: SignAuthorization): PushedRequest {
  return { clientId: 'rp-1', redirectUri: 'https://rp.example/cb', sign: s, autoConsent: false };
}

describe('documentViews', () => {
  it('keeps labels as sent and recognises a default document by its hash under the request algorithm', () => {
    const label = '<script>alert(1)</script> & "Vertrag" Ü';
    const en = DEFAULT_SIGNING_DOCUMENTS[1]!;
    for (const [oid, alg] of [
      [SHA256_OID, 'sha256'],
      [SHA512_OID, 'sha512'],
    ] as const) {
      const docs = documentViews(
        sign(
          [
            { hash: b64(alg, 'a contract'), label },
            { hash: b64(alg, en.text), label: '' },
          ],
          oid,
        ),
        qtspRecord(),
      );
      assert.equal(docs[0]!.label, label);
      assert.equal(docs[0]!.defaultDocument, undefined);
      assert.deepEqual(docs[1]!.defaultDocument, en);
    }
  });
});

describe('identityView (spec 7.4 with the user known)', () => {
  it('the default user shares the base claims and the requested QESID claims', () => {
    const view = identityView(
      qtspRecord(),
      client,
      pushed(sign([], SHA256_OID, [{ name: 'address', essential: true }])),
      TEST_USERS.get(DEFAULT_USER_SUB)!,
    );
    assert.equal(view.insufficient, undefined);
    assert.deepEqual(
      view.shared.map((c) => c.name),
      ['given_name', 'family_name', 'birthdate', 'place_of_birth', 'address'],
    );
    assert.equal(view.shared.find((c) => c.name === 'address')!.value, 'Heidestraße 17, 51147 Köln, DE');
  });

  it('the thin user: a non-essential claim is omitted, an essential one makes the identity insufficient', () => {
    const thin = TEST_USERS.get('user-0815')!;
    const omit = identityView(
      qtspRecord(),
      client,
      pushed(sign([], SHA256_OID, [{ name: 'address', essential: false }])),
      thin,
    );
    assert.deepEqual(omit.omitted, ['place_of_birth', 'address']);
    const fail = identityView(
      qtspRecord(),
      client,
      pushed(sign([], SHA256_OID, [{ name: 'address', essential: true }])),
      thin,
    );
    assert.deepEqual(fail.insufficient?.missing, ['address']);
    assert.match(fail.insufficient!.description, /could not provide all requested data/);
    assert.deepEqual(fail.shared, []);
  });

  it('the user without names cannot sign at all (the QTSP requires both names)', () => {
    const view = identityView(qtspRecord(), client, pushed(sign([])), TEST_USERS.get('user-0001')!);
    assert.deepEqual(view.insufficient?.missing, ['given_name', 'family_name']);
    assert.equal(view.displayName, '(no name on record)');
  });

  it('edge-case users: long names, Greek script, no address', () => {
    const long = TEST_USERS.get('user-0064')!;
    assert.ok(long.claims.given_name!.length > 64 && long.claims.family_name!.length > 64);
    assert.match(TEST_USERS.get('user-0030')!.claims.family_name!, /^[\u0370-\u03ff]+$/);
    assert.equal(TEST_USERS.get('user-0404')!.claims.address, undefined);
  });
});

describe('claimText and rpDisplayName', () => {
  it('formats structured claims on one line', () => {
    assert.equal(claimText('nationalities', ['DE', 'AT']), 'DE, AT');
    assert.equal(claimText('place_of_birth', { locality: 'Berlin', country: 'DE' }), 'Berlin (DE)');
  });

  it('a display name only when the registration has one', () => {
    assert.equal(rpDisplayName(client), undefined);
    assert.equal(rpDisplayName({ ...client, clientName: 'Shop' } as PlatformClient), 'Shop');
  });
});
