/**
 * The sandbox mediation service (spec 6.2, 4.7), HTTPS with client certificates:
 *   POST /mediation/v1/records   {type, record}  -> 201 {status: "stored", reference_id}
 *                                                   409 duplicate_reference_id (same reference_id in the scope
 *                                                       service_provider_id + issuer)
 *                                                   400 invalid_request (not exactly the fields of 6.2)
 *                                                   401 invalid_client (the sender is not that service provider)
 * The sender authenticates with the TLS client certificate registered in its SP directory record (spec 5.12:
 * the QTSP's technical account), so one provider cannot file records in another's name.
 * `controls` make it misbehave for the delivery tests: fail, stall, or store and then fail or stall (a lost answer).
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { errorHandler, invalidClient, invalidRequest, notFoundHandler, OAuthError } from '../errors.ts';
import type { PlatformDirectory } from '../platform/directory.ts';
import { registeredFingerprints } from '../platform/sp-record.ts';
import { fingerprintsEqual, peerCertificateCurrent, peerFingerprint } from '../tls.ts';
import type { MediationControls } from '../types.ts';
import { describeIssues, envelopeSchema, type RecordStore, type RemoteSignatureCreation } from './records.ts';

export const RECORDS_PATH = '/mediation/v1/records';

export interface MediationContext {
  readonly records: RecordStore;
  readonly controls: MediationControls;
  readonly directory: PlatformDirectory;
  /** every POST that reached the service, answered or not */
  readonly stats: { requests: number };
}

/** The misbehaviour switches, before anything is looked at. */
function misbehave(ctx: MediationContext) {
  return (_req: Request, res: Response, next: NextFunction): void => {
    ctx.stats.requests++;
    if (ctx.controls.failNext > 0) {
      ctx.controls.failNext--;
      next(
        new OAuthError(
          503,
          'temporarily_unavailable',
          'the mediation service is failing on purpose (controls.failNext)',
        ),
      );
      return;
    }
    if (ctx.controls.mode === 'stall') return; // never answers; the server's close() ends the socket
    if (ctx.controls.mode === 'http500') {
      next(new OAuthError(500, 'server_error', 'the mediation service is failing on purpose (controls.mode http500)'));
      return;
    }
    res.set('Cache-Control', 'no-store');
    next();
  };
}

function parseEnvelope(body: unknown): RemoteSignatureCreation {
  const parsed = envelopeSchema.safeParse(body);
  if (!parsed.success)
    throw invalidRequest(
      `the record is not a remote_signature_creation record of spec 6.2: ${describeIssues(parsed.error)}`,
    );
  return parsed.data.record;
}

/**
 * spec 5.12: the TLS client certificate must be one registered for the service provider named in the record,
 * and within its validity period, as the banks require of the same certificate (spec 5, item 8).
 */
function authenticateSender(ctx: MediationContext, req: Request, record: RemoteSignatureCreation): void {
  const presented = peerFingerprint(req.socket);
  if (!presented) throw invalidClient('a TLS client certificate is required');
  const provider = ctx.directory
    .spRecords()
    .find((r) => r.client_id === record.service_provider_id && r.status === 'active');
  if (!provider || !registeredFingerprints(provider).some((f) => fingerprintsEqual(presented, f))) {
    throw invalidClient('the TLS client certificate is not registered for this service_provider_id');
  }
  if (!peerCertificateCurrent(req.socket))
    throw invalidClient('the TLS client certificate is outside its validity period');
}

function storeRecord(ctx: MediationContext) {
  return (req: Request, res: Response): void => {
    const record = parseEnvelope(req.body);
    authenticateSender(ctx, req, record);
    if (!ctx.records.add('remote_signature_creation', record)) {
      throw new OAuthError(
        409,
        'duplicate_reference_id',
        `a record with reference_id ${record.reference_id} already exists for ` +
          `service_provider_id ${record.service_provider_id} and issuer ${record.issuer}`,
      );
    }
    if (ctx.controls.mode === 'store-then-500')
      throw new OAuthError(500, 'server_error', 'stored, then failing on purpose (controls.mode store-then-500)');
    if (ctx.controls.mode === 'store-then-stall') return; // stored; the answer never comes
    res.status(201).json({ status: 'stored', reference_id: record.reference_id });
  };
}

export function mediationApp(ctx: MediationContext): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.post(RECORDS_PATH, misbehave(ctx), express.json({ limit: '64kb', type: 'application/json' }), storeRecord(ctx));
  app.use(notFoundHandler);
  app.use(errorHandler);
  return app;
}
