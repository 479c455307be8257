/**
 * signDoc over HTTP (spec 4.5): the one handler of every signDoc request, without express, whose routing and
 * body parsing would cost more than the checks of the SAD. In order: the request is counted in the signDoc
 * metrics; without a TLS client certificate it is refused with 401 before anything reads its body; a method other
 * than POST is 405; a body that is not declared as JSON is 400; the body is read as express.json reads it
 * (json-body.ts); signDoc runs; its answer, or the failure, is written (answers.ts).
 */
import type * as http from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { Config } from '../config/schema.ts';
import { badRequest } from '../errors.ts';
import { signDoc, type SignDocDeps, type SignDocResult } from '../signing/sign-doc.ts';
import { base64JsonArray } from '../util/base64.ts';
import type { Metrics } from '../util/metrics.ts';
import { answerFailure, refuseWithoutCertificate, sendJson, sendJsonText } from './answers.ts';
import { jsonBodyCharset, readJsonBody } from './json-body.ts';
import { peerCertificateDer } from './tls-listener.ts';

/** Serves signDoc requests of any method; app.ts routes them here. */
export function signDocHandler(config: Config, deps: SignDocDeps): http.RequestListener {
  const limit = config.server.maxBodyBytes;
  return (req, res) => {
    countSignDoc(res, deps.metrics);
    const clientCertDer = peerCertificateDer(req.socket as TLSSocket);
    if (!clientCertDer) return refuseWithoutCertificate(res);
    if (req.method !== 'POST') return sendJson(res, 405, { allow: 'POST' }, POST_ONLY);
    const charset = jsonBodyCharset(req.headers);
    if (charset === undefined)
      return answerFailure(badRequest('Content-Type must be application/json'), req, res, deps.logger);
    readJsonBody(req, charset, limit, (failure, body) => {
      if (failure) answerFailure(failure, req, res, deps.logger);
      else void answerSignDoc(req, res, body, clientCertDer, deps);
    });
  };
}

const POST_ONLY = badRequest('signDoc accepts POST only').toBody();

/** Counts a signDoc request by the status of its answer, and times it, once the answer is sent. */
export function countSignDoc(res: http.ServerResponse, metrics: Metrics): void {
  const stop = metrics.duration.startTimer();
  res.once('finish', () => {
    const status = String(res.statusCode);
    stop({ status });
    metrics.requests.inc({ status });
  });
}

async function answerSignDoc(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  body: unknown,
  clientCertDer: Buffer,
  deps: SignDocDeps,
): Promise<void> {
  try {
    const result = await signDoc(body, clientCertDer, deps);
    const headers = { 'cache-control': 'no-store', 'x-transaction-id': result.txn };
    sendJsonText(res, 200, headers, signDocAnswerJson(result), 'latin1');
  } catch (err) {
    answerFailure(err, req, res, deps.logger);
  }
}

/**
 * The JSON text of a signDoc answer, byte for byte what JSON.stringify makes of {SignatureObject,
 * revocationInfo?}, written from its Base64 texts without the escape scan of every character.
 */
export function signDocAnswerJson(result: Pick<SignDocResult, 'SignatureObject' | 'revocationInfo'>): string {
  const signatures = base64JsonArray(result.SignatureObject);
  const revocation = result.revocationInfo;
  if (!revocation) return `{"SignatureObject":${signatures}}`;
  const ocsp = base64JsonArray(revocation.ocsp);
  const crl = base64JsonArray(revocation.crl);
  return `{"SignatureObject":${signatures},"revocationInfo":{"ocsp":${ocsp},"crl":${crl}}}`;
}
