/**
 * Step 1 of signDoc: the request body against the SignDocRequest schema of openapi.yaml (compiled once with
 * ajv, so the published contract and the check are the same thing), then the rules JSON Schema cannot say:
 * each hash is Base64 of a raw digest of the algorithm's length (spec 2.7, 2.12).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import { parse as parseYaml } from 'yaml';
import type { ConformanceLevel, SignatureFormat } from '../ades/formats.ts';
import { hashByOid, type HashAlgorithm } from '../crypto/algorithms.ts';
import { badRequest } from '../errors.ts';
import { decodeDigest } from '../util/base64.ts';
import { MAX_DOCUMENTS_PER_SIGNING } from './limits.ts';

export interface SignDocRequest {
  readonly SAD: string;
  readonly credentialID: string;
  readonly documentDigests: { readonly hashes: readonly string[]; readonly hashAlgorithmOID: string };
  readonly profile: string;
  readonly signature_format: SignatureFormat;
  readonly conformance_level?: ConformanceLevel;
  readonly signAlgo?: string;
  readonly signAlgoParams?: string;
}

export interface ParsedSignDocRequest {
  readonly body: SignDocRequest;
  readonly hashAlgorithm: HashAlgorithm;
  /** decoded digests, in request order */
  readonly hashes: readonly Buffer[];
  readonly format: SignatureFormat;
  readonly level: ConformanceLevel;
}

const OPENAPI_FILE = fileURLToPath(new URL('../../openapi.yaml', import.meta.url));

/** Loads a schema of openapi.yaml's components as a standalone JSON Schema 2020-12 document. */
export function openApiSchema(name: string): Record<string, unknown> {
  const doc = parseYaml(readFileSync(OPENAPI_FILE, 'utf8')) as { components: { schemas: Record<string, unknown> } };
  const defs = JSON.parse(JSON.stringify(doc.components.schemas).replaceAll('#/components/schemas/', '#/$defs/'));
  return { $schema: 'https://json-schema.org/draft/2020-12/schema', $defs: defs, $ref: `#/$defs/${name}` };
}

const SCHEMA = openApiSchema('SignDocRequest');

/** The published contract must state the limit PAR enforces (limits.ts): a disagreement stops the start. */
function checkDocumentsLimit(schema: Record<string, unknown>): void {
  const defs = schema['$defs'] as Record<
    string,
    { properties: Record<string, { properties: Record<string, { maxItems?: unknown }> }> }
  >;
  const stated = defs['SignDocRequest']!.properties['documentDigests']!.properties['hashes']!.maxItems;
  if (stated !== MAX_DOCUMENTS_PER_SIGNING)
    throw new Error(
      `openapi.yaml: SignDocRequest documentDigests.hashes maxItems is ${String(stated)}, ` +
        `but MAX_DOCUMENTS_PER_SIGNING is ${MAX_DOCUMENTS_PER_SIGNING}`,
    );
}
checkDocumentsLimit(SCHEMA);

const validate = new Ajv2020({ allErrors: false, strict: true }).compile<SignDocRequest>(SCHEMA);

/** the members SignDocRequest does not require: sent as null, they count as absent (openapi.yaml) */
const OPTIONAL_MEMBERS: ReadonlySet<string> = (() => {
  const def = (SCHEMA['$defs'] as Record<string, { properties: object; required: string[] }>)['SignDocRequest']!;
  return new Set(Object.keys(def.properties).filter((k) => !def.required.includes(k)));
})();

function withoutNullOptionals(body: Record<string, unknown>): Record<string, unknown> {
  if (!Object.keys(body).some((k) => body[k] === null && OPTIONAL_MEMBERS.has(k))) return body;
  return Object.fromEntries(Object.entries(body).filter(([k, v]) => !(v === null && OPTIONAL_MEMBERS.has(k))));
}

function describe(error: ErrorObject): string {
  const where = error.instancePath ? `'${error.instancePath.slice(1).replaceAll('/', '.')}'` : 'the request';
  switch (error.keyword) {
    case 'additionalProperties':
      return `unknown parameter '${String(error.params.additionalProperty)}' in ${where}`;
    case 'required':
      return `missing required parameter '${String(error.params.missingProperty)}' in ${where}`;
    case 'const':
      return `${where} must be ${JSON.stringify(error.params.allowedValue)}`;
    case 'enum':
      return `${where} must be one of ${(error.params.allowedValues as unknown[]).join(', ')}`;
    case 'maxItems':
      if (error.instancePath === '/documentDigests/hashes')
        return `${where} holds too many hashes: at most ${MAX_DOCUMENTS_PER_SIGNING} documents per signing`;
      return `${where} ${error.message ?? 'is invalid'}`;
    case 'pattern': {
      const expected = error.instancePath.includes('hashes')
        ? 'standard Base64 of the raw digest expected'
        : 'see openapi.yaml';
      return `${where} is not well-formed (${expected})`;
    }
    default:
      return `${where} ${error.message ?? 'is invalid'}`;
  }
}

export function parseSignDocRequest(raw: unknown): ParsedSignDocRequest {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw badRequest('the request body must be a JSON object');
  const body = withoutNullOptionals(raw as Record<string, unknown>);
  if (!validate(body)) throw badRequest(describe(validate.errors![0]!));
  const hashAlgorithm = hashByOid(body.documentDigests.hashAlgorithmOID)!;
  const hashes = body.documentDigests.hashes.map((h, i) => {
    const decoded = decodeDigest(h, hashAlgorithm.length);
    if (!decoded.ok) throw badRequest(`documentDigests.hashes[${i}] ${decoded.reason}`);
    return decoded.bytes;
  });
  // one consent gives at most one signature per document (once.ts): a hash twice in one request asks
  // for two signatures of one document, which no RP needs and which would bill the consent twice
  const seen = new Map<string, number>();
  hashes.forEach((h, i) => {
    const first = seen.get(h.toString('hex'));
    if (first !== undefined)
      throw badRequest(
        `documentDigests.hashes[${i}] repeats documentDigests.hashes[${first}]: ` +
          'each document is signed once per consent',
      );
    seen.set(h.toString('hex'), i);
  });
  return { body, hashAlgorithm, hashes, format: body.signature_format, level: body.conformance_level ?? 'AdES-B-B' };
}
