/**
 * An RFC 3161 client for the relying party: POST a TimeStampReq (application/timestamp-query, RFC 3161
 * 3.4) and take the TimeStampToken out of the TimeStampResp, after checking that the token answers this
 * request: status granted, the same message imprint, the nonce echoed (RFC 3161 2.4.2). The signature of
 * the token is checked by whoever validates the PDF (pdfsig, openssl ts -verify); a wrong token would only
 * make our own PDF fail there.
 */
import { randomBytes } from 'node:crypto';
import type { Agent } from 'node:https';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import type { HashAlgorithm } from '../ades/algorithms.ts';
import { httpRequest } from '../util/http-client.ts';
import { RpFlowError } from './http.ts';

const STEP = 'time-stamp';
const TIMEOUT_MS = 30_000;
/** PKIStatus granted and grantedWithMods (RFC 3161 2.4.2) */
const GRANTED = new Set([0, 1]);

export interface TimestampRequestOptions {
  readonly url: string | URL;
  readonly agent: Agent;
  readonly hashAlgorithm: HashAlgorithm;
  /** the hash of the time-stamped data, computed with hashAlgorithm */
  readonly imprint: Uint8Array;
}

function timeStampReq(hashAlgorithm: HashAlgorithm, imprint: Uint8Array, nonce: Buffer): Buffer {
  const req = new pkijs.TimeStampReq({
    version: 1,
    messageImprint: new pkijs.MessageImprint({
      hashAlgorithm: new pkijs.AlgorithmIdentifier({ algorithmId: hashAlgorithm.oid }),
      hashedMessage: new asn1js.OctetString({ valueHex: new Uint8Array(imprint) }),
    }),
    nonce: new asn1js.Integer({ valueHex: new Uint8Array(nonce) }),
    certReq: true, // the TSA certificate goes into the token, so the PDF can be validated on its own
  });
  return Buffer.from(req.toSchema().toBER());
}

/** The TSTInfo inside a TimeStampToken (a SignedData with eContentType id-ct-TSTInfo). */
export function tstInfoOf(token: Uint8Array): pkijs.TSTInfo {
  const signedData = new pkijs.SignedData({ schema: pkijs.ContentInfo.fromBER(new Uint8Array(token)).content });
  const eContent = signedData.encapContentInfo.eContent;
  if (!eContent) throw new Error('time-stamp token without TSTInfo');
  return pkijs.TSTInfo.fromBER(eContent.getValue());
}

function checkAnswers(tstInfo: pkijs.TSTInfo, hashAlgorithm: HashAlgorithm, imprint: Uint8Array, nonce: Buffer): void {
  const mi = tstInfo.messageImprint;
  if (mi.hashAlgorithm.algorithmId !== hashAlgorithm.oid || !Buffer.from(mi.hashedMessage.valueBlock.valueHexView).equals(Buffer.from(imprint))) {
    throw new RpFlowError(STEP, 'the token time-stamps a different message imprint');
  }
  const echoed = tstInfo.nonce ? Buffer.from(tstInfo.nonce.valueBlock.valueHexView) : undefined;
  // an INTEGER drops leading zero bytes and may gain a 0x00 sign byte: compare as numbers
  if (!echoed || BigInt(`0x${echoed.toString('hex') || '0'}`) !== BigInt(`0x${nonce.toString('hex')}`)) throw new RpFlowError(STEP, 'the token does not echo our nonce');
}

/** A TimeStampToken (DER ContentInfo) over `imprint` from the TSA at `url`. */
export async function requestTimestamp(options: TimestampRequestOptions): Promise<Buffer> {
  const nonce = randomBytes(8);
  nonce[0]! &= 0x7f; // a positive INTEGER as sent
  const res = await httpRequest(options.url, {
    method: 'POST',
    agent: options.agent,
    timeoutMs: TIMEOUT_MS,
    headers: { 'content-type': 'application/timestamp-query', accept: 'application/timestamp-reply' },
    body: timeStampReq(options.hashAlgorithm, options.imprint, nonce),
  });
  if (res.status !== 200) throw new RpFlowError(STEP, `HTTP ${res.status} from the TSA`, res.status);
  let resp: pkijs.TimeStampResp;
  try {
    resp = pkijs.TimeStampResp.fromBER(new Uint8Array(res.body));
  } catch {
    throw new RpFlowError(STEP, 'the TSA answered something that is not a TimeStampResp');
  }
  const status = resp.status.status;
  if (!GRANTED.has(status) || !resp.timeStampToken) {
    throw new RpFlowError(STEP, `the TSA refused: status ${status}${resp.status.statusStrings?.length ? ` (${resp.status.statusStrings.map((s) => s.valueBlock.value).join('; ')})` : ''}`);
  }
  const token = Buffer.from(resp.timeStampToken.toSchema().toBER());
  checkAnswers(tstInfoOf(token), options.hashAlgorithm, options.imprint, nonce);
  return token;
}
