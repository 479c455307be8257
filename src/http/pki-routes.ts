/**
 * The public endpoints of our trust services, on the same server as signDoc but without any client
 * certificate (relying parties and validators call them):
 *   POST /tsa                  RFC 3161 3.4: application/timestamp-query -> application/timestamp-reply
 *   POST /ocsp, GET /ocsp/{b64} RFC 6960 A.1: application/ocsp-request -> application/ocsp-response
 *   GET  /crl/root.crl, /crl/issuing.crl   RFC 5280 5 (application/pkix-crl, DER; the root's from the key ceremony)
 *   GET  /ca/root.crt, /ca/issuing.crt     AIA caIssuers targets (RFC 5280 4.2.2.1: application/pkix-cert, DER)
 *   GET  /crl/issuing-{tag}.crl, /ca/issuing-{tag}.crt   the same for an issuing CA made by a rollover
 *                              (ca/issuing-generations.ts); the first CA keeps the paths without a tag
 * A bad request is answered in the protocol's own terms (a TimeStampResp with status rejection, an
 * OCSPResponse malformedRequest), with HTTP 400, never a 500 or a stack trace.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import type { CrlSource } from '../revocation/crl.ts';
import { PKIX_CRL } from '../revocation/crl.ts';
import { errorResponse, OCSP_REQUEST, OCSP_RESPONSE, type OcspResponder } from '../revocation/ocsp.ts';
import { PKI_PATHS } from '../ca/publication.ts';
import { rejectionResp, TIMESTAMP_QUERY, TIMESTAMP_REPLY, TsaRejection, type LocalTsa } from '../timestamping/tsa.ts';
import type { Logger } from '../util/logger.ts';

export interface PkiHttpServices {
  readonly tsa: LocalTsa;
  /** answers for every CA of ours (revocation/ocsp.ts OcspResponders) */
  readonly ocsp: Pick<OcspResponder, 'respond'>;
  readonly rootCrl: CrlSource;
  readonly rootDer: Buffer;
  /** the issuing CA generation published under this tag ('' for the first CA's paths), current or retired */
  readonly issuing: (publishedAs: string) => { readonly der: Buffer; readonly crl: CrlSource } | undefined;
  /** how long GET answers may be cached (seconds) */
  readonly ocspMaxAgeSeconds: number;
  readonly crlMaxAgeSeconds: number;
  readonly logger: Logger;
}

/** requests of these protocols are a few hundred bytes; a CertID list of 20 stays far below */
const MAX_BODY = '16kb';

const tsaReply = (res: Response, status: number, body: Buffer) =>
  res.status(status).set({ 'content-type': TIMESTAMP_REPLY, 'cache-control': 'no-store' }).send(body);
const ocspReply = (res: Response, status: number, body: Buffer, cache = 'no-store') =>
  res.status(status).set({ 'content-type': OCSP_RESPONSE, 'cache-control': cache }).send(body);

function tsaRejected(res: Response, message: string, status = 400): void {
  tsaReply(res, status, rejectionResp(new TsaRejection('badRequest', message)));
}

function tsaRoutes(router: express.Router, s: PkiHttpServices): void {
  router.post(
    PKI_PATHS.tsa,
    (req, res, next) =>
      req.is(TIMESTAMP_QUERY) ? next() : tsaRejected(res, `Content-Type must be ${TIMESTAMP_QUERY}`),
    express.raw({ type: TIMESTAMP_QUERY, limit: MAX_BODY, inflate: false }), // compressed: refused (answers.ts)
    async (req, res) => {
      const answer = await s.tsa.respond(req.body as Buffer);
      tsaReply(res, answer.granted ? 200 : 400, answer.body);
    },
  );
  router.all(PKI_PATHS.tsa, (_req, res) => {
    res.set('allow', 'POST');
    tsaRejected(res, `the TSA accepts POST ${TIMESTAMP_QUERY} only`, 405);
  });
}

async function answerOcsp(res: Response, s: PkiHttpServices, der: Uint8Array, cacheable: boolean): Promise<void> {
  const answer = await s.ocsp.respond(der);
  // a GET answer without nonce may be cached by intermediaries (RFC 5019 6.2); never a POST one
  ocspReply(
    res,
    answer.httpStatus,
    answer.body,
    cacheable && answer.httpStatus === 200 ? `public, max-age=${s.ocspMaxAgeSeconds}, no-transform` : 'no-store',
  );
}

function ocspRoutes(router: express.Router, s: PkiHttpServices): void {
  router.post(
    PKI_PATHS.ocsp,
    (req, res, next) => (req.is(OCSP_REQUEST) ? next() : ocspReply(res, 400, errorResponse('malformedRequest'))),
    express.raw({ type: OCSP_REQUEST, limit: MAX_BODY, inflate: false }),
    async (req, res) => answerOcsp(res, s, req.body as Buffer, false),
  );
  // RFC 6960 A.1: GET {url}/{url-encoding of base-64 encoding of the DER OCSPRequest}; '/' of Base64 may
  // arrive raw or as %2F, '+' raw or as %2B, so the rest of the raw path is decoded as a whole
  router.get(`${PKI_PATHS.ocsp}/*request`, async (req, res) => {
    let der: Buffer;
    try {
      der = Buffer.from(decodeURIComponent(req.path.slice(PKI_PATHS.ocsp.length + 1)), 'base64');
    } catch {
      ocspReply(res, 400, errorResponse('malformedRequest'));
      return;
    }
    await answerOcsp(res, s, der, true);
  });
}

function publicationRoutes(router: express.Router, s: PkiHttpServices): void {
  const sendCrl = async (res: Response, issuer: CrlSource) => {
    let der: Buffer;
    try {
      der = await issuer.current();
    } catch (err) {
      s.logger.error({ event: 'crl.unavailable', error: (err as Error).message }, 'CRL could not be issued');
      res
        .status(503)
        .set('retry-after', '30')
        .json({ error: 'temporarily_unavailable', error_description: 'the CRL cannot be issued now' });
      return;
    }
    res.set({ 'content-type': PKIX_CRL, 'cache-control': `public, max-age=${s.crlMaxAgeSeconds}` }).send(der);
  };
  const sendCert = (res: Response, der: Buffer) =>
    res.set({ 'content-type': 'application/pkix-cert', 'cache-control': 'public, max-age=86400' }).send(der);
  /** the issuing CA of a publication tag, looked up at each request: a rollover adds one while running */
  const issuing =
    (what: 'crl' | 'cert', tagged: boolean) =>
    async (req: Request, res: Response): Promise<void> => {
      const tag = tagged ? String(req.params['tag']) : '';
      const generation = tag === '' || /^[0-9a-f]{16}$/.test(tag) ? s.issuing(tag) : undefined;
      if (!generation) {
        res.status(404).json({ error: 'not_found', error_description: 'no issuing CA is published under this name' });
        return;
      }
      if (what === 'crl') await sendCrl(res, generation.crl);
      else sendCert(res, generation.der);
    };
  router.get(PKI_PATHS.rootCrl, (_req, res) => sendCrl(res, s.rootCrl));
  router.get(PKI_PATHS.rootCert, (_req, res) => sendCert(res, s.rootDer));
  router.get(PKI_PATHS.issuingCrl, issuing('crl', false));
  router.get(PKI_PATHS.issuingCert, issuing('cert', false));
  router.get(PKI_PATHS.issuingCrl.replace(/\.crl$/, '-:tag.crl'), issuing('crl', true));
  router.get(PKI_PATHS.issuingCert.replace(/\.crt$/, '-:tag.crt'), issuing('cert', true));
}

/** Body-parser failures (too large, bad encoding) on /tsa and /ocsp: the protocol's own error, HTTP 400. */
function protocolErrors(err: unknown, req: Request, res: Response, next: NextFunction): void {
  if (res.headersSent) next(err);
  else if (req.path === PKI_PATHS.tsa) tsaRejected(res, 'the request body cannot be read (too large or malformed)');
  else if (req.path.startsWith(PKI_PATHS.ocsp)) ocspReply(res, 400, errorResponse('malformedRequest'));
  else next(err);
}

export function pkiRouter(s: PkiHttpServices): express.Router {
  const router = express.Router();
  tsaRoutes(router, s);
  ocspRoutes(router, s);
  publicationRoutes(router, s);
  router.use(protocolErrors);
  return router;
}
