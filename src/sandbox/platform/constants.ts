/** Names the platform defines (spec 2.7, 2.11, 5.10); {platform_claims_base} is fixed in the sandbox. */

export const PLATFORM_CLAIMS_BASE = 'https://platform.sandbox.localhost';

/** acr the AS attests to the QTSP (spec 5.10). */
export const ACR_ONLINE_BANKING_SCA = `${PLATFORM_CLAIMS_BASE}/acrs/online_banking_sca`;

/** Claim carrying the QTSP documents the user accepted (spec 2.11, 2.13). */
export const DOCUMENTS_CONSENTED_CLAIM = `${PLATFORM_CLAIMS_BASE}/claims/documents_consented`;

/** The identity assurance claims the ecosystem defines (spec 2.7); anything else is "not defined" (7.4). */
export const DEFINED_CLAIMS: readonly string[] = [
  'given_name',
  'family_name',
  'birthdate',
  'place_of_birth',
  'nationalities',
  'address',
];

/** The only credentialID of type sign (spec 2.7). */
export const CREDENTIAL_ID = 'qes_eidas';

export const BANK_NAME = 'Sandbox Bank';
export const BANK_NOTIFICATION_EMAIL = 'notify@bank.sandbox.localhost';

/** A bank of the sandbox as the IDP directory and the account chooser name it (spec 2.1, 4.6). */
export interface BankProfile {
  readonly bic: string;
  readonly name: string;
  readonly notificationEmail: string;
}

/** The sandbox's banks, bank 1 first: each its own AS (issuer, port, signing key, store). */
export const SANDBOX_BANKS: readonly BankProfile[] = [
  { bic: 'SNDBDEFFXXX', name: BANK_NAME, notificationEmail: BANK_NOTIFICATION_EMAIL },
  { bic: 'SNDCDEFFXXX', name: 'Second Sandbox Bank', notificationEmail: 'notify@bank2.sandbox.localhost' },
];
