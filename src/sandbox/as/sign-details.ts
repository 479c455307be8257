/**
 * Validation of authorization_details at the PAR for type sign (spec 2.7, 7.2, 9):
 *   - a missing or empty field, an unknown or non-QTSP location, more than one sign object: invalid_request
 *   - wrong content of the object and of its documents (QES, QESID, QID), more documents than the QTSP's record
 *     allows one signing: invalid_authorization_details
 *   - a type the RP may not use: access_denied
 *   - claims the QTSP or IDP cannot serve: unable_to_meet_service_requirements
 */
import { digest, HASH_ALGORITHMS, type HashAlgorithm } from '../../crypto/algorithms.ts';
import { decodeDigest } from '../../util/base64.ts';
import type { RegisteredClient } from '../clients.ts';
import { accessDenied, invalidDetails, invalidRequest } from '../errors.ts';
import { CREDENTIAL_ID } from '../platform/constants.ts';
import type { PlatformDirectory } from '../platform/directory.ts';
import type { SpRecord } from '../platform/sp-record.ts';
import { checkClaimsAtPar, parseIdentityAssuranceClaims } from './claims.ts';
import type { SignAuthorization } from './model.ts';

/** Authorization data types this AS serves (spec 2.3 metadata). */
export const SUPPORTED_TYPES: readonly string[] = ['sign'];

type Entry = Record<string, unknown>;

function isObject(value: unknown): value is Entry {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function parseDetails(raw: string | undefined): Entry[] {
  if (raw === undefined) throw invalidRequest('parameter authorization_details is missing');
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw invalidRequest('authorization_details is not valid JSON');
  }
  if (!Array.isArray(parsed)) throw invalidRequest('authorization_details must be a JSON array');
  if (parsed.length === 0) throw invalidRequest('authorization_details is empty');
  if (!parsed.every((e) => isObject(e) && typeof e['type'] === 'string')) {
    throw invalidDetails('every authorization_details entry must be an object with a string type');
  }
  return parsed as Entry[];
}

/** Every type must be served by this AS and allowed for the RP (spec 5.12, 7.2 access_denied). */
function checkTypes(entries: readonly Entry[], client: RegisteredClient): void {
  for (const type of new Set(entries.map((e) => e['type'] as string))) {
    if (!SUPPORTED_TYPES.includes(type))
      throw invalidDetails(`authorization details type ${type} is not supported by this AS`);
    if (!client.registration.allowedTypes.includes(type)) throw accessDenied(`the client may not request type ${type}`);
  }
}

/** Exactly one object of type sign (spec 2.7, 8); more than one is a request problem like 7.1's rule. */
function singleSign(entries: readonly Entry[]): Entry {
  const signs = entries.filter((e) => e['type'] === 'sign');
  if (signs.length !== 1)
    throw invalidRequest(`authorization_details must hold exactly one object of type sign, found ${signs.length}`);
  return signs[0]!;
}

function isEmpty(value: unknown): boolean {
  return value === undefined || value === null || value === '' || (Array.isArray(value) && value.length === 0);
}

/** Missing or empty fields are invalid_request (spec 7.2). */
function requireFields(sign: Entry): void {
  for (const field of ['locations', 'credentialID', 'documentDigests', 'hashAlgorithmOID']) {
    if (isEmpty(sign[field])) throw invalidRequest(`sign: field ${field} is missing or empty`);
  }
}

/** locations: exactly one entry, the client_id of an active QTSP record (spec 2.7; 7.2 invalid_request). */
function checkLocation(sign: Entry, directory: PlatformDirectory): SpRecord {
  const locations = sign['locations'];
  if (!Array.isArray(locations) || locations.length !== 1 || typeof locations[0] !== 'string') {
    throw invalidRequest('sign: locations must hold exactly one qtsp_id');
  }
  const qtsp = directory.activeQtsp(locations[0]);
  if (!qtsp) throw invalidRequest('sign: locations does not name an active QTSP of the SP directory');
  return qtsp;
}

function checkCredentialId(sign: Entry): void {
  if (sign['credentialID'] !== CREDENTIAL_ID) throw invalidDetails(`sign: credentialID must be ${CREDENTIAL_ID}`);
}

function checkHashAlgorithm(sign: Entry): HashAlgorithm {
  const oid = sign['hashAlgorithmOID'];
  const alg = typeof oid === 'string' ? HASH_ALGORITHMS.get(oid) : undefined;
  if (!alg) throw invalidDetails('sign: hashAlgorithmOID is not one of the six hash algorithms of the ecosystem');
  return alg;
}

/** Digests of the QTSP's default documents under this algorithm (spec 2.7: UTF-8 bytes of the text). */
function defaultDigests(qtsp: SpRecord, alg: HashAlgorithm): Buffer[] {
  return qtsp.default_signing_documents.map((d) => digest(alg, Buffer.from(d.text, 'utf8')));
}

/** documentDigests entries; returns how many are default documents (spec 2.7 QID rules). */
function checkDocuments(value: unknown, alg: HashAlgorithm, qtsp: SpRecord): number {
  if (!Array.isArray(value)) throw invalidDetails('sign: documentDigests must be an array');
  // the QTSP signs no more per signDoc than its record states: a consent to more could never be used
  const max = qtsp.max_documents_per_signing;
  if (value.length > max)
    throw invalidDetails(
      `sign: documentDigests lists ${value.length} documents; the QTSP signs at most ${max} per signing`,
    );
  const defaults = defaultDigests(qtsp, alg);
  let defaultCount = 0;
  const seen = new Map<string, number>();
  value.forEach((doc: unknown, i) => {
    const where = `sign: documentDigests[${i}]`;
    if (!isObject(doc)) throw invalidDetails(`${where} must be an object with hash and label`);
    if (typeof doc['hash'] !== 'string') throw invalidDetails(`${where}.hash is missing`);
    if (typeof doc['label'] !== 'string') throw invalidDetails(`${where}.label is missing`);
    const decoded = decodeDigest(doc['hash'], alg.length);
    if (!decoded.ok) throw invalidDetails(`${where}.hash ${decoded.reason}`);
    // one consent signs each document once (signDoc refuses a repeat): refuse it here, before the user consents
    const first = seen.get(decoded.bytes.toString('hex'));
    if (first !== undefined) throw invalidDetails(`${where}.hash repeats documentDigests[${first}]`);
    seen.set(decoded.bytes.toString('hex'), i);
    const isDefault = defaults.some((d) => d.equals(decoded.bytes));
    if (isDefault && doc['label'] !== '')
      throw invalidDetails(`${where} is a default document: its label must be empty`);
    if (!isDefault && doc['label'] === '') throw invalidDetails(`${where}.label must describe the document`);
    if (isDefault) defaultCount++;
  });
  if (defaultCount > 1) throw invalidDetails('sign: at most one default document hash per request');
  return defaultCount;
}

export function validateSignDetails(
  raw: string | undefined,
  client: RegisteredClient,
  directory: PlatformDirectory,
): SignAuthorization {
  const entries = parseDetails(raw);
  checkTypes(entries, client);
  const sign = singleSign(entries);
  requireFields(sign);
  const qtsp = checkLocation(sign, directory);
  checkCredentialId(sign);
  const alg = checkHashAlgorithm(sign);
  const iac =
    sign['identity_assurance_claims'] === undefined
      ? undefined
      : parseIdentityAssuranceClaims(sign['identity_assurance_claims']);
  const defaults = checkDocuments(sign['documentDigests'], alg, qtsp);
  if (defaults > 0 && !iac) throw invalidDetails('sign: a default document requires identity_assurance_claims');
  const base = { details: entries, qtspId: qtsp.client_id };
  if (!iac) return base;
  return {
    ...base,
    requestedClaims: iac.requested,
    identityClaims: checkClaimsAtPar(iac.claims, qtsp, client.registration),
  };
}
