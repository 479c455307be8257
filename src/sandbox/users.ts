/**
 * Test users of the sandbox bank, with the verified data the bank holds about them (spec 2.11
 * verified_claims). The tester picks one on the bank's consent page; with headless consent the AS consents for
 * the login_hint user of the PAR (a sandbox convenience) or the default user. The edge cases drive the
 * "user lacks the data" rows of spec 7.4 and the certificate content of spec 2.16.
 */

export interface PlaceOfBirth {
  locality: string;
  country: string;
}

/** Address sub-fields of spec 2.7, plus the country (spec 2.16: address uses C, postalCode, street). */
export interface Address {
  street_address: string;
  locality: string;
  postal_code: string;
  country: string;
}

export interface UserClaims {
  given_name?: string;
  family_name?: string;
  birthdate?: string;
  place_of_birth?: PlaceOfBirth;
  nationalities?: string[];
  address?: Address;
}

export interface TestUser {
  readonly sub: string;
  /** what the identity is good for, shown in the bank's identity picker */
  readonly description: string;
  readonly claims: Readonly<UserClaims>;
}

export const DEFAULT_USER_SUB = 'user-4711';

const users: readonly TestUser[] = [
  {
    sub: DEFAULT_USER_SUB,
    description: 'Default user: every claim on record',
    claims: {
      given_name: 'Erika',
      family_name: 'Mustermann',
      birthdate: '1964-08-12',
      place_of_birth: { locality: 'Berlin', country: 'DE' },
      nationalities: ['DE'],
      address: { street_address: 'Heidestraße 17', locality: 'Köln', postal_code: '51147', country: 'DE' },
    },
  },
  {
    sub: 'user-0815',
    description: 'Thin data: no place of birth, nationalities or address on record',
    claims: { given_name: 'Max', family_name: 'Mustermann', birthdate: '1970-01-01' },
  },
  {
    // the QTSP requires both names (essential): every signature fails with unable_to_meet_service_requirements
    sub: 'user-0001',
    description: 'No name claims: no given or family name on record',
    claims: {
      birthdate: '1980-02-29',
      place_of_birth: { locality: 'Hamburg', country: 'DE' },
      nationalities: ['DE'],
      address: { street_address: 'Jungfernstieg 1', locality: 'Hamburg', postal_code: '20354', country: 'DE' },
    },
  },
  {
    // X.520 names in certificates are commonly limited to 64 characters (spec 2.16)
    sub: 'user-0064',
    description: 'Long names: given and family name over 64 characters each',
    claims: {
      given_name: 'Maximiliane Friederike Wilhelmine Charlotte Auguste Sophie Henriette',
      family_name: 'Freifrau von und zu Hohenlohe-Schillingsfürst-Waldenburg-Bartenstein',
      birthdate: '1990-12-31',
      place_of_birth: { locality: 'Schillingsfürst', country: 'DE' },
      nationalities: ['DE', 'AT'],
      address: { street_address: 'Schlossplatz 1', locality: 'Schillingsfürst', postal_code: '91583', country: 'DE' },
    },
  },
  {
    sub: 'user-0030',
    description: 'Non-Latin script: names and address in Greek',
    claims: {
      given_name: 'Ελένη',
      family_name: 'Παπαδοπούλου',
      birthdate: '1985-03-25',
      place_of_birth: { locality: 'Θεσσαλονίκη', country: 'GR' },
      nationalities: ['GR'],
      address: { street_address: 'Οδός Ερμού 25', locality: 'Αθήνα', postal_code: '10563', country: 'GR' },
    },
  },
  {
    sub: 'user-0404',
    description: 'No address: every claim but the address on record',
    claims: {
      given_name: 'Jonas',
      family_name: 'Schmidt',
      birthdate: '1975-06-15',
      place_of_birth: { locality: 'München', country: 'DE' },
      nationalities: ['DE'],
    },
  },
];

export const TEST_USERS: ReadonlyMap<string, TestUser> = new Map(users.map((u) => [u.sub, u]));

export function defaultUser(): TestUser {
  return TEST_USERS.get(DEFAULT_USER_SUB)!;
}

/** Whether the bank has a value of this claim for the user. */
export function userHas(user: TestUser, claim: string): boolean {
  return (user.claims as Record<string, unknown>)[claim] !== undefined;
}

export function userClaim(user: TestUser, claim: string): unknown {
  return (user.claims as Record<string, unknown>)[claim];
}
