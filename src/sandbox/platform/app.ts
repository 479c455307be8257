/**
 * The platform's HTTPS routes (a client certificate only for the SP record update):
 *   GET /idps/v1/?iss=                  IDP record (spec 4.6)
 *   GET /idps/v1/                       every IDP record (the list the QTSP pulls periodically)
 *   GET /sps/v1/                        SP directory (spec 2.13)
 *   PUT /sps/v1/{client_id}/jwks        an SP replaces its registered client certificates (sp-keys.ts; mutual
 *                                       TLS, or the operator's registration credential once they have expired)
 *   GET /service-configuration/v1/?iss= service configuration (spec 4.2, 2.2): 400 / 404 / 423
 *   GET|POST /key-archive/keys.git/...  the long-term public key archive over smart HTTP (spec 4.7), read-only
 *   GET /account-chooser/               the account chooser (spec 2.1, 4.1): pages and redirects
 *   GET /account-chooser/cookie         sandbox only: forgets the chooser's stored bank
 * The IDP directory routes obey controls.idpDirectory.mode, so tests can make the directory fail for real.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { errorHandler, invalidRequest, notFound, notFoundHandler, OAuthError } from '../errors.ts';
import type { ClientRegistry } from '../clients.ts';
import { gitHttpBackend } from '../../http/git-http-backend.ts';
import type { SandboxControls } from '../types.ts';
import { accountChooser } from './account-chooser.ts';
import type { IdpRecord, PlatformDirectory } from './directory.ts';
import { replaceSpKeys } from './sp-keys.ts';

export interface PlatformAppOptions {
  readonly controls: SandboxControls;
  /** GIT_PROJECT_ROOT of the key archive, served under /key-archive/ */
  readonly keyArchiveRoot: string;
  /** the registered RPs: the account chooser redirects to theirs */
  readonly clients: ClientRegistry;
  /** the SP records' registration credential, given to their operators out of band (sp-keys.ts) */
  readonly spRegistrationCredential: string;
}

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

/** controls.idpDirectory.mode: answer 500, or cut the connection without an answer */
function directoryFailure(controls: SandboxControls) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    const mode = controls.idpDirectory.mode;
    if (mode === 'reset') req.socket.destroy();
    else if (mode === 'http500')
      next(new OAuthError(500, 'server_error', 'IDP directory unavailable (sandbox switch http500)'));
    else next();
  };
}

export function platformApp(directory: PlatformDirectory, options: PlatformAppOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  app.get('/idps/v1/', directoryFailure(options.controls), (req: Request, res: Response) => {
    // no iss parameter at all: the whole list; an empty or repeated iss is still a bad request
    if (!('iss' in req.query)) res.set('Cache-Control', 'no-cache').json(directory.idps());
    else res.set('Cache-Control', 'no-cache').json(knownIdp(directory, issParam(req)));
  });

  app.use('/key-archive', gitHttpBackend(options.keyArchiveRoot));

  app.use('/account-chooser', accountChooser({ directory, clients: options.clients }));

  app.get('/sps/v1/', (_req: Request, res: Response) => {
    res.set('Cache-Control', 'no-cache').json(directory.spRecords());
  });

  app.put(
    '/sps/v1/:clientId/jwks',
    express.json({ limit: '32kb', type: ['application/json', 'application/jwk-set+json'] }),
    replaceSpKeys(directory, options.spRegistrationCredential),
  );

  app.get('/service-configuration/v1/', (req: Request, res: Response) => {
    const idp = knownIdp(directory, issParam(req));
    if (idp.status !== 'active') throw new OAuthError(423, 'issuer_inactive', 'the IDP of this issuer is inactive');
    res.set('Cache-Control', 'no-cache').json(directory.serviceConfiguration(idp));
  });

  app.use(notFoundHandler);
  app.use(errorHandler);
  return app;
}
