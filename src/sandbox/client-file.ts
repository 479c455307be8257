/**
 * Relying parties registered from outside: a file (JSON or YAML) or a command option of `qtsp sandbox` /
 * `qtsp dev` gives the platform configuration of spec 2.14 for each RP: client_id, redirect URIs, the account
 * chooser's redirect URIs (spec 2.1), client state, allowed_authorization_data_types, allowed_claims_qes, and the
 * self-signed TLS client certificate (spec 5.1) as a PEM file or as its x5t#S256 fingerprint (RFC 8705 3.1).
 * The sandbox needs no private key of these clients: it only compares the certificate the RP presents with the
 * registered one.
 *
 *   clients:
 *     - client_id: my-rp
 *       redirect_uris: [https://rp.example/callback]
 *       account_chooser_redirect_uris: [https://rp.example/bank-chosen]   # default none: the chooser refuses
 *       tls_client_certificate: ./my-rp.pem        # or  x5t#S256: <base64url SHA-256 of the DER>
 *       client_state: active                       # active (default) | demo | inactive
 *       allowed_claims_qes: [given_name, family_name, birthdate]   # default: every claim of spec 2.7
 *       allowed_authorization_data_types: [sign]   # default [sign]
 *
 * A top-level list (without `clients:`) is accepted too. Relative certificate paths are relative to the file.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { fromPem } from '../util/base64.ts';
import { DEFINED_CLAIMS } from './platform/constants.ts';
import { certFingerprint } from './tls.ts';
import type { ExternalClient } from './types.ts';

export class ClientFileError extends Error {
  override name = 'ClientFileError';
}

/**
 * RFC 6749 3.1.2: an absolute URI without fragment, compared as a string (no pattern); https, or http on a
 * loopback host (RFC 8252 7.3), or a private-use scheme of a native app (RFC 8252 7.1).
 */
const redirectUri = z.string().refine((value) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if (url.hash || value.includes('#')) return false;
  if (url.protocol === 'http:') return ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname);
  return url.protocol !== 'javascript:' && url.protocol !== 'data:';
}, 'must be an absolute URI without fragment: https, http on a loopback host, or an app scheme');

/** base64url of 32 bytes, or the hex form `openssl x509 -fingerprint -sha256` prints (colons optional). */
const fingerprint = z.string().transform((value, ctx) => {
  const hex = value.replace(/^sha256 fingerprint=/i, '').replaceAll(':', '');
  if (/^[0-9a-fA-F]{64}$/.test(hex)) return Buffer.from(hex, 'hex').toString('base64url');
  if (/^[A-Za-z0-9_-]{43}$/.test(value)) return value;
  ctx.addIssue({
    code: 'custom',
    message: 'must be the base64url SHA-256 of the DER certificate (43 characters) or its 64 hex digits',
  });
  return z.NEVER;
});

const entrySchema = z
  .object({
    client_id: z.string().min(1).max(200),
    redirect_uris: z.array(redirectUri).min(1),
    account_chooser_redirect_uris: z.array(redirectUri).default([]),
    tls_client_certificate: z.string().min(1).optional(),
    'x5t#S256': fingerprint.optional(),
    client_state: z.enum(['active', 'demo', 'inactive']).default('active'),
    allowed_claims_qes: z.array(z.string().min(1)).default([...DEFINED_CLAIMS]),
    allowed_authorization_data_types: z.array(z.string().min(1)).min(1).default(['sign']),
  })
  .strict()
  .refine((e) => (e.tls_client_certificate === undefined) !== (e['x5t#S256'] === undefined), {
    message: 'give exactly one of tls_client_certificate (PEM file or PEM text) and x5t#S256',
  });

const fileSchema = z.union([z.object({ clients: z.array(z.unknown()) }).strict(), z.array(z.unknown())]);

type Entry = z.infer<typeof entrySchema>;

function describeIssues(where: string, error: z.ZodError): string {
  return error.issues.map((i) => `${where}${i.path.length ? `.${i.path.join('.')}` : ''}: ${i.message}`).join('; ');
}

/** The certificate of an entry: inline PEM, or a PEM file relative to `baseDir`. */
function certificate(entry: Entry, baseDir: string, where: string): { fingerprint: string; certFile?: string } {
  const given = entry.tls_client_certificate;
  if (given === undefined) return { fingerprint: entry['x5t#S256']! };
  const inline = given.includes('-----BEGIN');
  const certFile = inline ? undefined : resolve(baseDir, given);
  let pem: string;
  try {
    pem = inline ? given : readFileSync(certFile!, 'utf8');
  } catch (err) {
    throw new ClientFileError(
      `${where}.tls_client_certificate: cannot read ${certFile} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  const der = fromPem(pem)[0];
  if (!der) throw new ClientFileError(`${where}.tls_client_certificate: no PEM certificate found`);
  return { fingerprint: certFingerprint(der), ...(certFile ? { certFile } : {}) };
}

function toClient(value: unknown, baseDir: string, where: string): ExternalClient {
  const parsed = entrySchema.safeParse(value);
  if (!parsed.success) throw new ClientFileError(describeIssues(where, parsed.error));
  const e = parsed.data;
  return {
    clientId: e.client_id,
    redirectUris: e.redirect_uris,
    accountChooserRedirectUris: e.account_chooser_redirect_uris,
    state: e.client_state,
    ...certificate(e, baseDir, where),
    allowedClaimsQes: e.allowed_claims_qes,
    allowedTypes: e.allowed_authorization_data_types,
  };
}

function unique(clients: ExternalClient[], source: string): ExternalClient[] {
  const seen = new Set<string>();
  for (const c of clients) {
    if (seen.has(c.clientId)) throw new ClientFileError(`${source}: client_id ${c.clientId} is registered twice`);
    seen.add(c.clientId);
  }
  return clients;
}

/** The clients of a registration file (JSON is YAML, so one parser reads both). */
export function readClientFile(file: string): ExternalClient[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ClientFileError(
      `cannot read the clients file ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ClientFileError(`${file} is neither JSON nor YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  const shape = fileSchema.safeParse(doc);
  if (!shape.success) throw new ClientFileError(`${file}: expected {clients: [...]} or a list of clients`);
  const entries = Array.isArray(shape.data) ? shape.data : shape.data.clients;
  return unique(
    entries.map((entry, i) => toClient(entry, dirname(resolve(file)), `${file}: clients[${i}]`)),
    file,
  );
}

/** One client given on the command line as a JSON (or YAML flow) object of the same members. */
export function parseClientOption(text: string): ExternalClient {
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (err) {
    throw new ClientFileError(`--client is neither JSON nor YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  return toClient(value, process.cwd(), '--client');
}

/** Every client of the files and the options; a client_id given twice is an error, not a silent override. */
export function externalClients(files: readonly string[], options: readonly string[]): ExternalClient[] {
  return unique([...files.flatMap(readClientFile), ...options.map(parseClientOption)], 'the registered clients');
}
