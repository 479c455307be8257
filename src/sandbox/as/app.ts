/** The bank AS as one express app: each endpoint is its small list of steps, the domain handler last. */
import express from 'express';
import { errorHandler, notFoundHandler } from '../errors.ts';
import { authorizeHandler } from './authorize.ts';
import { consentHandler } from './consent.ts';
import type { AsContext } from './context.ts';
import { formBody, formOnly, noStore } from './form.ts';
import { introspectionHandler } from './introspection.ts';
import { jwksHandler, metadataHandler } from './metadata.ts';
import { parHandler } from './par.ts';
import { tokenHandler } from './token.ts';

export function asApp(ctx: AsContext): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  app.get('/.well-known/oauth-authorization-server', metadataHandler(ctx));
  app.get('/jwks', jwksHandler(ctx));
  app.post('/par', noStore, formOnly(415), formBody, parHandler(ctx)); // spec 7.2: wrong content type 415
  app.get('/authorize', noStore, authorizeHandler(ctx));
  app.post('/authorize/consent', noStore, formBody, consentHandler(ctx)); // the bank's own page posts here
  app.post('/token', noStore, formOnly(400), formBody, tokenHandler(ctx));
  app.post('/introspect', noStore, formOnly(400), formBody, introspectionHandler(ctx));

  app.use(notFoundHandler);
  app.use(errorHandler);
  return app;
}
