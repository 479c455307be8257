/**
 * The platform's directories as one in-memory state: the IDP directory (spec 4.6) with the sandbox banks,
 * the SP directory (spec 2.13) with our QTSP, and the service configuration derived from both (spec 2.2).
 */
import type { BankProfile } from './constants.ts';
import type { SpRecord, SpRecordJwk } from './sp-record.ts';

export type IdpStatus = 'active' | 'inactive';

export interface IdpRecord {
  iss: string;
  status: IdpStatus;
  name: string;
  bic: string;
  notification_email: string;
  jwks_uri: string;
}

/** A bank as the directory keeps it: its issuer is read lazily (known once its AS listens), its status is set. */
export interface DirectoryBank {
  readonly profile: BankProfile;
  readonly issuer: () => string;
  status: IdpStatus;
}

export interface ServiceConfiguration {
  identity: { iss: string };
  remote_signature_creation: {
    qtsp_id: string;
    signDoc: string;
    conformance_levels_supported: string[];
    max_documents_per_signing: number;
    identity_assurance_claims_supported: string[];
    default_signing_documents: { lang: string; text: string }[];
  }[];
}

/** Issuer URLs compare equal up to one trailing slash. */
export function sameIssuer(a: string, b: string): boolean {
  return a.replace(/\/$/, '') === b.replace(/\/$/, '');
}

export class PlatformDirectory {
  constructor(
    private readonly sps: readonly SpRecord[],
    private readonly banks: readonly DirectoryBank[],
  ) {}

  spRecords(): readonly SpRecord[] {
    return this.sps;
  }

  /** Replaces the client certificates an SP record registers (its jwks); the banks read the record live. */
  replaceKeys(clientId: string, keys: readonly SpRecordJwk[]): void {
    const record = this.sps.find((r) => r.client_id === clientId);
    if (record) record.jwks = { keys: keys.map((k) => ({ ...k, x5c: [...k.x5c] })) };
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

  /** The IDP record of the bank with this BIC (BICs compare case-insensitively). */
  idpByBic(bic: string): IdpRecord | undefined {
    return this.idps().find((r) => r.bic === bic.toUpperCase());
  }

  /** Every IDP the directory knows, active or not, bank 1 first. */
  idps(): IdpRecord[] {
    return this.banks.map((bank) => {
      const issuer = bank.issuer();
      return {
        iss: issuer,
        status: bank.status,
        name: bank.profile.name,
        bic: bank.profile.bic,
        notification_email: bank.profile.notificationEmail,
        jwks_uri: `${issuer}/jwks`,
      };
    });
  }

  /** Sets the status of the bank with this BIC; false when there is none. */
  setStatus(bic: string, status: IdpStatus): boolean {
    const bank = this.banks.find((b) => b.profile.bic === bic.toUpperCase());
    if (bank) bank.status = status;
    return !!bank;
  }

  serviceConfiguration(idp: IdpRecord): ServiceConfiguration {
    const qtsps = this.sps.filter((r) => r.status === 'active' && r.service_type === 'remote_signature_creation');
    return {
      identity: { iss: idp.iss },
      remote_signature_creation: qtsps.map((r) => ({
        qtsp_id: r.client_id,
        signDoc: r.endpoints.signDoc,
        conformance_levels_supported: [...r.conformance_levels_supported],
        max_documents_per_signing: r.max_documents_per_signing,
        identity_assurance_claims_supported: [...r.identity_assurance_claims_supported],
        default_signing_documents: r.default_signing_documents.map((d) => ({ ...d })),
      })),
    };
  }
}
