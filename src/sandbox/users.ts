/**
 * Test users of the sandbox bank, with the verified data the bank holds about them (spec 2.11
 * verified_claims). The AS auto-consents for the default user; a PAR may pick another one with login_hint
 * (a sandbox convenience) to drive the "user lacks the data" rows of spec 7.4.
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
  readonly claims: Readonly<UserClaims>;
}

export const DEFAULT_USER_SUB = 'user-4711';

const users: readonly TestUser[] = [
  {
    sub: DEFAULT_USER_SUB,
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
    // a customer with thin data: no place of birth, nationalities or address on record
    sub: 'user-0815',
    claims: { given_name: 'Max', family_name: 'Mustermann', birthdate: '1970-01-01' },
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
