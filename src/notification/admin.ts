/**
 * POST /admin/v1/notifications {txn, message, iss?} -> 202 {id, status: "queued"}: the operator's way to
 * queue an end-user notification (spec 6.3) over HTTP; `qtsp notify` does the same from the command line.
 *
 * Authentication: the TLS client certificate, pinned by its x5t#S256 fingerprint (notification.
 * adminClientFingerprints), compared in constant time. Chosen over a bearer token because our server already
 * asks every connection for a client certificate (spec 4.5), so the admin's credential is a private key that
 * never crosses the wire and cannot leak through a log or a proxy, and the configuration holds only public
 * fingerprints, no secret; it is also how every other party of this ecosystem authenticates (RFC 8705
 * self-signed certificates, spec 5.1, 5.8). No fingerprint configured: the endpoint answers 404.
 */
import type { TLSSocket } from 'node:tls';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Store } from '../store/types.ts';
import { fingerprintsEqual, x5tS256 } from '../trust/fingerprint.ts';
import { NotificationRequestError, requestNotification } from './request.ts';

export const ADMIN_NOTIFICATIONS_PATH = '/admin/v1/notifications';

export interface AdminOptions {
  readonly store: Store;
  readonly allowedFingerprints: readonly string[];
  /** wakes the relay */
  readonly queued: () => void;
}

function send(res: Response, err: NotificationRequestError): void {
  res
    .status(err.status)
    .set('cache-control', 'no-store')
    .json({ error: err.error, error_description: err.description });
}

function authenticate(allowed: readonly string[]) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    const der = (req.socket as TLSSocket).getPeerCertificate?.(false)?.raw;
    const presented = der?.length ? x5tS256(der) : undefined;
    // every entry is compared, so the time taken does not tell which one matched
    const ok = presented !== undefined && allowed.map((f) => fingerprintsEqual(presented, f)).includes(true);
    next(
      ok
        ? undefined
        : new NotificationRequestError(
            401,
            'unauthorized',
            'a TLS client certificate registered for administration is required',
          ),
    );
  };
}

export function adminRouter(o: AdminOptions): express.Router {
  const router = express.Router();
  if (o.allowedFingerprints.length === 0) return router; // off: falls through to the 404 handler
  router.post(
    ADMIN_NOTIFICATIONS_PATH,
    authenticate(o.allowedFingerprints),
    (req, _res, next) =>
      next(
        req.is('application/json')
          ? undefined
          : new NotificationRequestError(415, 'invalid_request', 'Content-Type must be application/json'),
      ),
    express.json({ limit: '64kb', strict: true, inflate: false }),
    async (req: Request, res: Response) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      const { id } = await requestNotification(o.store, {
        txn: body['txn'],
        message: body['message'],
        iss: body['iss'],
      });
      o.queued();
      res.status(202).set('cache-control', 'no-store').json({ id, status: 'queued' });
    },
  );
  router.use(ADMIN_NOTIFICATIONS_PATH, (err: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (err instanceof NotificationRequestError) return send(res, err);
    const type = (err as { type?: string }).type;
    if (type === 'entity.parse.failed' || type === 'entity.too.large')
      return send(
        res,
        new NotificationRequestError(400, 'invalid_request', 'the body must be a JSON object of at most 64 KB'),
      );
    next(err);
  });
  return router;
}
