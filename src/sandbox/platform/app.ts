/**
 * The platform's HTTPS routes (no client certificate needed):
 *   GET /idps/v1/?iss=                  IDP record (spec 4.6)
 *   GET /sps/v1/                        SP directory (spec 2.13)
 *   GET /service-configuration/v1/?iss= service configuration (spec 4.2, 2.2): 400 / 404 / 423
 */
import express, { type Request, type Response } from 'express';
import { errorHandler, invalidRequest, notFound, notFoundHandler, OAuthError } from '../errors.ts';
import type { IdpRecord, PlatformDirectory } from './directory.ts';

/** The iss query parameter: present once and a valid https URL (spec 3: "issuer not a valid URI" -> 400). */
function issParam(req: Request): string {
  const iss = req.query['iss'];
  if (typeof iss !== 'string' || iss === '') throw invalidRequest('query parameter iss is missing or repeated');
  let url: URL;
  try {
    url = new URL(iss);
  } catch {
    throw invalidRequest('iss is not a valid URL');
  }
  if (url.protocol !== 'https:') throw invalidRequest('iss must be an https URL');
  return iss;
}

function knownIdp(directory: PlatformDirectory, iss: string): IdpRecord {
  const idp = directory.idp(iss);
  if (!idp) throw notFound('no IDP with this issuer');
  return idp;
}

export function platformApp(directory: PlatformDirectory): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  app.get('/idps/v1/', (req: Request, res: Response) => {
    res.set('Cache-Control', 'no-cache').json(knownIdp(directory, issParam(req)));
  });

  app.get('/sps/v1/', (_req: Request, res: Response) => {
    res.set('Cache-Control', 'no-cache').json(directory.spRecords());
  });

  app.get('/service-configuration/v1/', (req: Request, res: Response) => {
    const idp = knownIdp(directory, issParam(req));
    if (idp.status !== 'active') throw new OAuthError(423, 'issuer_inactive', 'the IDP of this issuer is inactive');
    res.set('Cache-Control', 'no-cache').json(directory.serviceConfiguration(idp));
  });

  app.use(notFoundHandler);
  app.use(errorHandler);
  return app;
}
