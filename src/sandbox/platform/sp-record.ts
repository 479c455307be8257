/**
 * Our QTSP's record in the SP directory (spec 2.13). The AS derives its QTSP configuration from it: the
 * introspection client certificate (jwks x5c), required_claims, supported claims, default documents and how
 * many documents one signing may cover.
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { OFFERED_LEVELS } from '../../ades/offer.ts';
import { MAX_DOCUMENTS_PER_SIGNING } from '../../signing/limits.ts';
import { fromPem } from '../../util/base64.ts';
import { certFingerprint } from '../tls.ts';
import { DEFINED_CLAIMS, DOCUMENTS_CONSENTED_CLAIM } from './constants.ts';

export type ClaimRequest = null | { essential: true };

export interface SpRecordJwk {
  kty: string;
  crv?: string;
  x?: string;
  y?: string;
  n?: string;
  e?: string;
  x5c: string[];
}

export interface DefaultSigningDocument {
  lang: string;
  text: string;
}

export interface SpRecord {
  client_name: string;
  client_id: string;
  service_type: 'remote_signature_creation';
  authorization_data_types_supported: string[];
  /** OpenID Connect claims-parameter structure */
  required_claims: {
    verified_claims: { verification: { trust_framework: null }; claims: Record<string, ClaimRequest> };
    [claim: string]: unknown;
  };
  conformance_levels_supported: string[];
  /** how many documents one signDoc call (and so one consent) may cover; not in spec 2.13, which lists no limit */
  max_documents_per_signing: number;
  subject_type: string;
  token_endpoint_auth_method: 'self_signed_tls_client_auth';
  jwks: { keys: SpRecordJwk[] };
  policy_uri: string;
  tos_uri: string;
  tos_uri_label: string;
  status: 'active' | 'inactive';
  endpoints: { signDoc: string };
  owner_id: string;
  identity_assurance_claims_supported: string[];
  default_signing_documents: DefaultSigningDocument[];
}

export const DEFAULT_SIGNING_DOCUMENTS: readonly DefaultSigningDocument[] = [
  {
    lang: 'de',
    text: 'Ich bestätige hiermit meine Identität. Die Angaben in meinem Zertifikat stammen von meiner Bank.',
  },
  {
    lang: 'en',
    text: 'I confirm my identity herewith. The data in my certificate were provided by my bank.',
  },
];

/** The public JWK of a certificate, with the certificate itself as x5c (RFC 7517 section 4.7). */
export function certificateJwk(der: Buffer): SpRecordJwk {
  const jwk = new X509Certificate(der).publicKey.export({ format: 'jwk' }) as Omit<SpRecordJwk, 'x5c'>;
  return { ...jwk, x5c: [der.toString('base64')] };
}

function certificateFileJwk(certFile: string): SpRecordJwk {
  const der = fromPem(readFileSync(certFile, 'utf8'))[0];
  if (!der) throw new Error(`no certificate in ${certFile}`);
  return certificateJwk(der);
}

export function buildQtspRecord(qtsp: { id: string; clientCertFile: string; signDocUrl: string }): SpRecord {
  return {
    client_name: 'qtsp Sandbox Trust Service',
    client_id: qtsp.id,
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
      [DOCUMENTS_CONSENTED_CLAIM]: { essential: true },
    },
    conformance_levels_supported: [...OFFERED_LEVELS],
    max_documents_per_signing: MAX_DOCUMENTS_PER_SIGNING,
    subject_type: 'public',
    token_endpoint_auth_method: 'self_signed_tls_client_auth',
    jwks: { keys: [certificateFileJwk(qtsp.clientCertFile)] },
    // spec 2.13: the document version is part of the URL
    policy_uri: 'https://qtsp.sandbox.localhost/policy/v1.0/',
    tos_uri: 'https://qtsp.sandbox.localhost/tos/v1.0/',
    tos_uri_label: 'Nutzungsbedingungen des Vertrauensdiensteanbieters',
    status: 'active',
    endpoints: { signDoc: qtsp.signDocUrl },
    owner_id: 'owner-qtsp-sandbox',
    identity_assurance_claims_supported: [...DEFINED_CLAIMS],
    default_signing_documents: DEFAULT_SIGNING_DOCUMENTS.map((d) => ({ ...d })),
  };
}

/** Fingerprints (x5t#S256) of the client certificates a record registers in its jwks (spec 5.8). */
export function registeredFingerprints(record: SpRecord): string[] {
  return record.jwks.keys.flatMap((k) => k.x5c.slice(0, 1)).map((b64) => certFingerprint(Buffer.from(b64, 'base64')));
}
