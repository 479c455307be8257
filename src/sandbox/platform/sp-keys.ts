/**
 * PUT /sps/v1/{client_id}/jwks: a service provider replaces the client certificates its SP record registers
 * (spec 2.13 jwks), as a directory's self-service would offer it. Two ways to authenticate:
 *   - a certificate the record registers now (mutual TLS, matched by fingerprint as spec 5.8 does), and the
 *     new set must keep that certificate: a rotation publishes old and new together, then the new one alone,
 *     and never locks out;
 *   - the registration credential the platform gave the SP's operator out of band at onboarding
 *     (`Authorization: Bearer`), the way back once every registered certificate has expired: the new set
 *     replaces the old one whole.
 * Either way every certificate of the new set must be valid now, and every one new to the record comes with a
 * proof that the caller holds its key (sp-key-proof.ts): no update publishes a key nobody holds.
 */
import { createHash, randomBytes, timingSafeEqual, X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { writePrivateFile } from '../../util/private-files.ts';
import type { Request, Response } from 'express';
import { invalidClient, invalidRequest, notFound } from '../errors.ts';
import { certFingerprint, fingerprintsEqual, peerFingerprint } from '../tls.ts';
import type { PlatformDirectory } from './directory.ts';
import { requireKeyProofs } from './sp-key-proof.ts';
import { certificateJwk, registeredFingerprints, type SpRecordJwk } from './sp-record.ts';

/** a record registers few certificates: the current one and, during a rotation, the next */
const MAX_KEYS = 3;

/** One JWK of the body: its x5c holds one certificate, valid now, and the JWK is that certificate's key. */
function submittedKey(key: unknown, now: Date): SpRecordJwk {
  const x5c = (key as { x5c?: unknown })?.x5c;
  if (!Array.isArray(x5c) || x5c.length !== 1 || typeof x5c[0] !== 'string')
    throw invalidRequest('every key needs an x5c with exactly one certificate');
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(Buffer.from(x5c[0], 'base64'));
  } catch {
    throw invalidRequest('an x5c entry is not a DER certificate in base64');
  }
  if (new Date(cert.validFrom) > now || new Date(cert.validTo) <= now)
    throw invalidRequest(`the certificate ${cert.subject} is not valid now (${cert.validFrom} to ${cert.validTo})`);
  const derived = certificateJwk(cert.raw);
  const given = key as Record<string, unknown>;
  for (const [name, value] of Object.entries(derived))
    if (name !== 'x5c' && given[name] !== undefined && given[name] !== value)
      throw invalidRequest(`the JWK member ${name} does not match the key of its x5c certificate`);
  return derived;
}

function submittedKeys(body: unknown, now: Date): SpRecordJwk[] {
  const keys = (body as { keys?: unknown })?.keys;
  if (!Array.isArray(keys) || keys.length === 0 || keys.length > MAX_KEYS)
    throw invalidRequest(`the body must be a JWK Set with 1 to ${MAX_KEYS} keys`);
  return keys.map((k) => submittedKey(k, now));
}

/**
 * The registration credential of the SP records (sandbox: one for our QTSP's), made on first start: what the
 * platform hands an SP's operator out of band. Kept 0600 in the sandbox's directory.
 */
export function spRegistrationCredential(file: string): string {
  if (!existsSync(file)) writePrivateFile(file, `${randomBytes(32).toString('base64url')}\n`);
  return readFileSync(file, 'utf8').trim();
}

const digestOf = (text: string) => createHash('sha256').update(text).digest();

/** Whether the request carries the registration credential as a bearer token (compared in constant time). */
function bearerMatches(req: Request, credential: string): boolean | undefined {
  const header = req.get('authorization');
  if (header === undefined) return undefined;
  const token = /^Bearer (\S+)$/i.exec(header)?.[1];
  return token !== undefined && timingSafeEqual(digestOf(token), digestOf(credential));
}

export function replaceSpKeys(directory: PlatformDirectory, credential: string) {
  return async (req: Request, res: Response): Promise<void> => {
    const clientId = String(req.params['clientId'] ?? '');
    const record = directory.spRecords().find((r) => r.client_id === clientId);
    if (!record) throw notFound('no SP record with this client_id');
    const byCredential = bearerMatches(req, credential);
    if (byCredential === false) throw invalidClient("the registration credential is not this SP record's");
    const presented = peerFingerprint(req.socket);
    const registered = registeredFingerprints(record);
    if (!byCredential && !registered.some((f) => fingerprintsEqual(presented, f)))
      throw invalidClient('the TLS client certificate is not one this SP record registers');
    const keys = submittedKeys(req.body, new Date());
    const ders = keys.map((k) => Buffer.from(k.x5c[0]!, 'base64'));
    await requireKeyProofs(
      req.body,
      ders.filter((der) => !registered.includes(certFingerprint(der))),
      clientId,
    );
    const kept = keys.some((k) => fingerprintsEqual(presented, certFingerprint(Buffer.from(k.x5c[0]!, 'base64'))));
    if (!byCredential && !kept)
      throw invalidRequest('the new set must keep the certificate this request authenticates with');
    directory.replaceKeys(clientId, keys);
    res.set('Cache-Control', 'no-store').json({ keys });
  };
}
