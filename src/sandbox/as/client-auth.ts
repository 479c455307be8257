/**
 * OAuth 2.0 mutual-TLS client authentication with self-signed certificates (spec 5.1, 5.8; RFC 8705
 * section 2.2): the certificate presented on the connection must be the one registered for client_id.
 */
import type { Request } from 'express';
import type { RegisteredClient } from '../clients.ts';
import { invalidClient } from '../errors.ts';
import type { SpRecord } from '../platform/sp-record.ts';
import { registeredFingerprints } from '../platform/sp-record.ts';
import { fingerprintsEqual, peerCertificateCurrent, peerFingerprint } from '../tls.ts';
import type { AsContext } from './context.ts';
import type { Form } from './form.ts';

/** The authenticated RP, or 401 invalid_client. */
export function authenticateRp(ctx: AsContext, form: Form, req: Request): RegisteredClient {
  const clientId = form.require('client_id');
  const client = ctx.clients.authenticate(clientId, peerFingerprint(req.socket));
  if (!client)
    throw invalidClient('client authentication failed: unknown client_id or certificate not registered for it');
  refuseOutsideValidity(req);
  return client;
}

/** The authenticated QTSP (introspection, spec 5.8): an active SP record whose jwks x5c holds the certificate. */
export function authenticateQtsp(ctx: AsContext, form: Form, req: Request): SpRecord {
  const record = ctx.directory.activeQtsp(form.get('client_id') ?? '');
  const presented = peerFingerprint(req.socket);
  if (!record || !registeredFingerprints(record).some((f) => fingerprintsEqual(presented, f))) {
    throw invalidClient('client authentication failed: unknown client_id or certificate not registered for it');
  }
  refuseOutsideValidity(req);
  return record;
}

/** A registered certificate past its notAfter (or before its notBefore) authenticates nobody. */
function refuseOutsideValidity(req: Request): void {
  if (!peerCertificateCurrent(req.socket))
    throw invalidClient('client authentication failed: the certificate is outside its validity period');
}

/** Spec 3: requests of inactive RPs are never processed. */
export function isServed(client: RegisteredClient): boolean {
  return client.registration.state !== 'inactive';
}
