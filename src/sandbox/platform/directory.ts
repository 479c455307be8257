/**
 * The platform's directories as one in-memory state: the IDP directory (spec 4.6) with the sandbox bank,
 * the SP directory (spec 2.13) with our QTSP, and the service configuration derived from both (spec 2.2).
 */
import { BANK_NAME, BANK_NOTIFICATION_EMAIL } from './constants.ts';
import type { SpRecord } from './sp-record.ts';

export type IdpStatus = 'active' | 'inactive';

export interface IdpRecord {
  iss: string;
  status: IdpStatus;
  name: string;
  notification_email: string;
  jwks_uri: string;
}

export interface ServiceConfiguration {
  identity: { iss: string };
  remote_signature_creation: {
    qtsp_id: string;
    signDoc: string;
    conformance_levels_supported: string[];
    identity_assurance_claims_supported: string[];
    default_signing_documents: { lang: string; text: string }[];
  }[];
}

/** Issuer URLs compare equal up to one trailing slash. */
export function sameIssuer(a: string, b: string): boolean {
  return a.replace(/\/$/, '') === b.replace(/\/$/, '');
}

export class PlatformDirectory {
  idpStatus: IdpStatus = 'active';

  /** bankIssuer is read lazily: the AS port is known only once it listens. */
  constructor(
    private readonly sps: readonly SpRecord[],
    private readonly bankIssuer: () => string,
  ) {}

  spRecords(): readonly SpRecord[] {
    return this.sps;
  }

  /** An active QTSP record with this client_id (spec 2.7 locations, 2.13 status). */
  activeQtsp(clientId: string): SpRecord | undefined {
    return this.sps.find(
      (r) => r.client_id === clientId && r.status === 'active' && r.service_type === 'remote_signature_creation',
    );
  }

  idp(iss: string): IdpRecord | undefined {
    return this.idps().find((r) => sameIssuer(iss, r.iss));
  }

  /** Every IDP the directory knows, active or not (the sandbox has one bank). */
  idps(): IdpRecord[] {
    const issuer = this.bankIssuer();
    return [
      {
        iss: issuer,
        status: this.idpStatus,
        name: BANK_NAME,
        notification_email: BANK_NOTIFICATION_EMAIL,
        jwks_uri: `${issuer}/jwks`,
      },
    ];
  }

  serviceConfiguration(idp: IdpRecord): ServiceConfiguration {
    const qtsps = this.sps.filter((r) => r.status === 'active' && r.service_type === 'remote_signature_creation');
    return {
      identity: { iss: idp.iss },
      remote_signature_creation: qtsps.map((r) => ({
        qtsp_id: r.client_id,
        signDoc: r.endpoints.signDoc,
        conformance_levels_supported: [...r.conformance_levels_supported],
        identity_assurance_claims_supported: [...r.identity_assurance_claims_supported],
        default_signing_documents: r.default_signing_documents.map((d) => ({ ...d })),
      })),
    };
  }
}
