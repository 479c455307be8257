/**
 * Time-stamping authority (RFC 3161, with RFC 5816's signing-certificate-v2): our own TSA, used in-process for
 * the B-T..B-LTA signatures and served as POST /tsa; and a client for an external TSA (config tsa.url).
 *
 * Token (RFC 3161 2.4.2): a SignedData (version 3, eContentType id-ct-TSTInfo) over a TSTInfo with our policy,
 * the requester's message imprint and nonce as sent, a random 128-bit serial, genTime to the millisecond (a
 * fraction, which 2.4.2 allows: revocation data made a few milliseconds later is then dated after it) and an
 * Accuracy in whole seconds, the bound we claim for our clock. Its signed attributes are content-type,
 * message-digest and signing-certificate-v2 (RFC 5035), DER-sorted (pkijs would keep insertion order). The TSA
 * certificate has the extended key usage timeStamping alone, critical (RFC 3161 2.3), or `openssl ts -verify`
 * refuses the token. The certificate goes into the token only when the request asks for it (certReq).
 */
import { randomBytes } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { digest, HASH_ALGORITHMS, hashByOid, type HashAlgorithm } from '../crypto/algorithms.ts';
import {
  contentTypeAttribute,
  encodeSignedData,
  messageDigestAttribute,
  signerInfo,
  signingCertificateV2Attribute,
  signSignerInfo,
} from '../crypto/cms.ts';
import {
  algorithmIdentifier,
  booleanTrue,
  children,
  content,
  DerError,
  generalizedTimeMillis,
  integer,
  integerFromBytes,
  namedBit,
  octetString,
  oid,
  raw,
  readWhole,
  sequence,
  utf8String,
} from '../util/der.ts';
import { DomainError } from '../domain-error.ts';
import { httpRequest, HttpTimeoutError, type HttpAgent as Agent } from '../util/http-client.ts';
import type { KeyedCertificate } from '../ca/authority.ts';
import type { TimestampProvider } from './provider.ts';
import { randomSerial } from '../ca/x509.ts';
import { tsuKeyUsageEnd } from '../ca/calendar.ts';

export const TSP_OID = {
  /** id-ct-TSTInfo (RFC 3161 2.4.2) */
  tstInfo: '1.2.840.113549.1.9.16.1.4',
} as const;

export const TIMESTAMP_QUERY = 'application/timestamp-query';
export const TIMESTAMP_REPLY = 'application/timestamp-reply';

/** PKIFailureInfo bits (RFC 3161 2.4.2) */
export const FAIL_INFO = {
  badAlg: 0,
  badRequest: 2,
  badDataFormat: 5,
  timeNotAvailable: 14,
  unacceptedPolicy: 15,
  unacceptedExtension: 16,
  systemFailure: 25,
} as const;

export class TsaRejection extends Error {
  override name = 'TsaRejection';
  constructor(
    readonly failInfo: keyof typeof FAIL_INFO,
    message: string,
  ) {
    super(message);
  }
}

export interface TsaSettings {
  /** TSA policy OID written into every token (RFC 3161 2.4.2) */
  readonly policyOid: string;
  /** Accuracy.seconds: how far our clock may be from UTC; it also covers genTime's truncation to the millisecond */
  readonly accuracySeconds: number;
  /** the TSU key's usage period from its certificate's notBefore (EN 319 421 7.6): no token after it */
  readonly keyUsageDays?: number;
}

/** A parsed, accepted TimeStampReq: the parts the token repeats, as the requester encoded them. */
export interface TokenRequest {
  /** MessageImprint DER */
  readonly messageImprint: Buffer;
  /** nonce INTEGER DER, echoed as sent */
  readonly nonce?: Buffer;
  readonly certReq: boolean;
}

const MAX_NONCE_BYTES = 64;

function hashNamed(node: string): HashAlgorithm {
  const found = [...HASH_ALGORITHMS.values()].find((h) => h.node === node);
  if (!found) throw new TypeError(`unknown hash ${node}`);
  return found;
}

// ---------------------------------------------------------------------------------------------------------
// Request parsing (pkijs: the field's standard parser; a client may send BER)

function parseTimeStampReq(der: Uint8Array): { req: pkijs.TimeStampReq; tree: asn1js.Sequence } {
  const asn = asn1js.fromBER(new Uint8Array(der));
  if (asn.offset === -1 || asn.offset !== der.length)
    throw new TsaRejection('badDataFormat', 'the request is not one DER TimeStampReq');
  try {
    return { req: new pkijs.TimeStampReq({ schema: asn.result }), tree: asn.result as asn1js.Sequence };
  } catch {
    throw new TsaRejection('badDataFormat', 'the request is not a TimeStampReq (RFC 3161 2.4.1)');
  }
}

/** Checks a TimeStampReq against what we offer; throws TsaRejection with the RFC 3161 failure bit. */
export function acceptRequest(der: Uint8Array, settings: TsaSettings): TokenRequest {
  const { req, tree } = parseTimeStampReq(der);
  if (req.version !== 1) throw new TsaRejection('badDataFormat', `TimeStampReq version ${req.version} is not 1`);
  const alg = req.messageImprint.hashAlgorithm;
  const hash = hashByOid(alg.algorithmId);
  if (!hash)
    throw new TsaRejection(
      'badAlg',
      `hash algorithm ${alg.algorithmId} is not one of SHA-256/384/512, SHA3-256/384/512`,
    );
  if (alg.algorithmParams !== undefined && !(alg.algorithmParams instanceof asn1js.Null))
    throw new TsaRejection('badAlg', 'hash algorithm parameters must be absent or NULL');
  const hashed = req.messageImprint.hashedMessage.valueBlock.valueHexView;
  if (hashed.length !== hash.length)
    throw new TsaRejection(
      'badDataFormat',
      `hashedMessage has ${hashed.length} bytes, ${hash.name} has ${hash.length}`,
    );
  if (req.reqPolicy !== undefined && req.reqPolicy !== settings.policyOid)
    throw new TsaRejection('unacceptedPolicy', `this TSA issues tokens under policy ${settings.policyOid} only`);
  if (req.extensions?.length) throw new TsaRejection('unacceptedExtension', 'this TSA supports no request extensions');
  const nonce = req.nonce ? Buffer.from(req.nonce.valueBeforeDecodeView) : undefined;
  if (nonce && nonce.length > MAX_NONCE_BYTES + 2)
    throw new TsaRejection('badDataFormat', `the nonce is longer than ${MAX_NONCE_BYTES} bytes`);
  const messageImprint = Buffer.from(tree.valueBlock.value[1]!.valueBeforeDecodeView);
  return { messageImprint, ...(nonce ? { nonce } : {}), certReq: req.certReq === true };
}

// ---------------------------------------------------------------------------------------------------------
// Tokens and responses

/** PKIStatusInfo (RFC 3161 2.4.2): granted, or rejection with a text and one failure bit */
function statusInfo(rejection?: TsaRejection): Buffer {
  if (!rejection) return sequence(integer(0));
  return sequence(integer(2), sequence(utf8String(rejection.message)), namedBit(FAIL_INFO[rejection.failInfo]));
}

export function timeStampResp(token: Buffer): Buffer {
  return sequence(statusInfo(), token);
}

export function rejectionResp(rejection: TsaRejection): Buffer {
  return sequence(statusInfo(rejection));
}

/** Our TSA: signs tokens with the TSA key; `chain` is [TSA certificate, root CA]. */
export class LocalTsa implements TimestampProvider {
  chain: readonly Buffer[];
  #unit: KeyedCertificate;
  readonly #settings: TsaSettings;
  #hash: HashAlgorithm;
  #usageEnd: Date | undefined;
  readonly #clock: () => Date;

  constructor(unit: KeyedCertificate, root: Buffer, settings: TsaSettings, clock: () => Date = () => new Date()) {
    if (settings.accuracySeconds < 1)
      throw new RangeError('accuracySeconds must be at least 1: the Accuracy we write is in whole seconds');
    this.#unit = unit;
    this.#settings = settings;
    this.#hash = hashNamed(unit.issuer.hash);
    this.#usageEnd = this.#usageEndOf(unit);
    this.#clock = clock;
    this.chain = [unit.der, root];
  }

  /** A renewed TSU (a fresh key, its certificate from the root): tokens from now on are signed with it. */
  renew(unit: KeyedCertificate): void {
    this.#hash = hashNamed(unit.issuer.hash);
    this.chain = [unit.der, ...this.chain.slice(1)];
    this.#usageEnd = this.#usageEndOf(unit);
    this.#unit = unit;
  }

  #usageEndOf(unit: KeyedCertificate): Date | undefined {
    const days = this.#settings.keyUsageDays;
    return days === undefined ? undefined : tsuKeyUsageEnd(unit.certificate.notBefore.value, days);
  }

  /** Why no token may be signed now: the TSU key's usage period has ended (EN 319 421 7.6), until a renewal. */
  #usageEnded(): string | undefined {
    if (!this.#usageEnd || this.#clock() < this.#usageEnd) return undefined;
    return `the TSU key's usage period ended ${this.#usageEnd.toISOString()}; no token until the TSA is renewed`;
  }

  /** in-process: the certificate always goes into the token, so a signature carries what validates it */
  async timestamp(messageImprint: Uint8Array, hashAlgorithm: HashAlgorithm): Promise<Buffer> {
    const ended = this.#usageEnded();
    if (ended) throw unavailable(ended);
    if (messageImprint.length !== hashAlgorithm.length)
      throw new RangeError(
        `imprint has ${messageImprint.length} bytes, ${hashAlgorithm.name} has ${hashAlgorithm.length}`,
      );
    return this.issue({
      messageImprint: sequence(algorithmIdentifier(hashAlgorithm.oid), octetString(messageImprint)),
      certReq: true,
    });
  }

  /** TSTInfo (RFC 3161 2.4.2); ordering (DEFAULT FALSE) and tsa are left out */
  #tstInfo(request: TokenRequest): Buffer {
    return sequence(
      integer(1),
      oid(this.#settings.policyOid),
      request.messageImprint,
      integerFromBytes(randomSerial()),
      generalizedTimeMillis(this.#clock()),
      sequence(integer(this.#settings.accuracySeconds)),
      ...(request.nonce ? [request.nonce] : []),
    );
  }

  /** A TimeStampToken: ContentInfo(SignedData version 3), the TSTInfo as eContent (RFC 3161 2.4.2, RFC 5652 5.1). */
  async issue(request: TokenRequest): Promise<Buffer> {
    const tstInfo = this.#tstInfo(request);
    const signed = await signSignerInfo({
      hashAlgorithm: this.#hash,
      signerCertificate: this.#unit,
      key: this.#unit.key,
      signedAttributes: [
        contentTypeAttribute(TSP_OID.tstInfo),
        messageDigestAttribute(digest(this.#hash, tstInfo)),
        signingCertificateV2Attribute(this.#unit),
      ],
    });
    return encodeSignedData({
      hashAlgorithm: this.#hash,
      signerInfo: signerInfo(signed),
      certificates: request.certReq ? [this.#unit.der] : [],
      content: { type: TSP_OID.tstInfo, eContent: tstInfo },
    });
  }

  /** A TimeStampResp for a DER TimeStampReq: granted with a token, or rejection with the reason; never throws. */
  async respond(requestDer: Uint8Array): Promise<{ granted: boolean; body: Buffer }> {
    const ended = this.#usageEnded();
    if (ended) return { granted: false, body: rejectionResp(new TsaRejection('systemFailure', ended)) };
    try {
      return { granted: true, body: timeStampResp(await this.issue(acceptRequest(requestDer, this.#settings))) };
    } catch (err) {
      const rejection =
        err instanceof TsaRejection ? err : new TsaRejection('systemFailure', 'the TSA could not issue a token');
      return { granted: false, body: rejectionResp(rejection) };
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// External TSA

export interface RemoteTsaOptions {
  readonly url: string;
  readonly timeoutMs: number;
  readonly retries: number;
  /** the external TSA's certificates (TSA certificate first), for B-LT validation material */
  readonly chain: readonly Buffer[];
  readonly agent?: Agent;
}

const unavailable = (message: string, detail?: string) => new DomainError('tsa_unavailable', message, detail);
const badToken = (message: string) => new DomainError('tsa_bad_token', message);

/** PKIStatus granted (0) and grantedWithMods (1) carry a token (RFC 3161 2.4.2). */
function tokenOf(respDer: Buffer): Buffer {
  const resp = readWhole(respDer);
  const [statusT, tokenT] = children(respDer, resp);
  const [codeT] = statusT ? children(respDer, statusT) : [];
  const code = codeT ? respDer[codeT.end - 1] : undefined;
  if (code !== 0 && code !== 1)
    throw new DomainError(
      'tsa_refused',
      `the time-stamping authority refused the request (PKIStatus ${code ?? 'missing'})`,
    );
  if (!tokenT) throw badToken('the time-stamping authority granted the request but sent no token');
  return raw(respDer, tokenT);
}

/** The token must time-stamp what we asked, with our nonce (RFC 3161 2.4.2). */
function checkToken(token: Buffer, hashAlgorithm: HashAlgorithm, imprint: Uint8Array, nonce: Buffer): void {
  const signedData = new pkijs.SignedData({ schema: pkijs.ContentInfo.fromBER(new Uint8Array(token)).content });
  const eContent = signedData.encapContentInfo.eContent;
  if (!eContent) throw badToken('the time-stamping authority sent a token without TSTInfo');
  const tst = pkijs.TSTInfo.fromBER(eContent.getValue());
  const mi = tst.messageImprint;
  if (
    mi.hashAlgorithm.algorithmId !== hashAlgorithm.oid ||
    !Buffer.from(mi.hashedMessage.valueBlock.valueHexView).equals(Buffer.from(imprint))
  ) {
    throw badToken('the time-stamping authority time-stamped a different message imprint');
  }
  const echoed = tst.nonce
    ? BigInt(`0x${Buffer.from(tst.nonce.valueBlock.valueHexView).toString('hex') || '0'}`)
    : undefined;
  if (echoed !== BigInt(`0x${nonce.toString('hex')}`))
    throw badToken('the time-stamping authority did not echo our nonce');
}

/** An external TSA over HTTP(S): timeout per attempt, retries on timeouts, transport errors and 5xx. */
export class RemoteTsa implements TimestampProvider {
  readonly chain: readonly Buffer[];
  readonly #options: RemoteTsaOptions;

  constructor(options: RemoteTsaOptions) {
    this.#options = options;
    this.chain = options.chain;
  }

  async timestamp(messageImprint: Uint8Array, hashAlgorithm: HashAlgorithm): Promise<Buffer> {
    const nonce = randomBytes(8);
    nonce[0] = nonce[0]! & 0x7f || 0x01; // positive, 8 bytes
    const request = sequence(
      integer(1),
      sequence(algorithmIdentifier(hashAlgorithm.oid), octetString(messageImprint)),
      integerFromBytes(nonce),
      booleanTrue(),
    );
    const token = await this.#post(request);
    try {
      checkToken(token, hashAlgorithm, messageImprint, nonce);
    } catch (err) {
      throw err instanceof DomainError ? err : badToken('the time-stamping authority sent a malformed token');
    }
    return token;
  }

  async #post(request: Buffer): Promise<Buffer> {
    const { url, timeoutMs, retries, agent } = this.#options;
    let last = unavailable('the time-stamping authority is unavailable');
    for (let attempt = 0; attempt <= retries; attempt++) {
      try {
        const res = await httpRequest(url, {
          method: 'POST',
          headers: { 'content-type': TIMESTAMP_QUERY, accept: TIMESTAMP_REPLY },
          body: request,
          timeoutMs,
          ...(agent ? { agent } : {}),
          maxResponseBytes: 64 * 1024,
        });
        if (res.status >= 500 || res.status === 429) {
          last = unavailable(`the time-stamping authority answered HTTP ${res.status}`);
          continue;
        }
        if (res.status !== 200) throw unavailable(`the time-stamping authority answered HTTP ${res.status}`);
        try {
          return tokenOf(res.body);
        } catch (err) {
          throw err instanceof DomainError
            ? err
            : badToken('the time-stamping authority sent a malformed TimeStampResp');
        }
      } catch (err) {
        if (err instanceof DomainError) throw err;
        last =
          err instanceof HttpTimeoutError
            ? new DomainError('tsa_timeout', `the time-stamping authority did not answer within ${timeoutMs} ms`)
            : unavailable('the time-stamping authority could not be reached', `TSA ${url}: ${(err as Error).message}`);
      }
    }
    throw last;
  }
}

/**
 * genTime of a TimeStampToken (RFC 3161 2.4.2): ContentInfo > [0] SignedData > encapContentInfo > [0] OCTET
 * STRING TSTInfo > genTime (after version, policy, messageImprint, serialNumber). Fractions of a second, which
 * RFC 3161 allows in genTime, are kept (to the millisecond). Throws DerError on anything else.
 */
export function genTimeOf(token: Buffer): Date {
  const signedData = children(token, children(token, children(token, readWhole(token))[1]!)[0]!);
  const encap = signedData.find((t, i) => i > 0 && t.tag === 0x30 && children(token, t)[0]?.tag === 0x06)!;
  const eContent = children(token, children(token, encap)[1]!)[0]!;
  const tstInfo = content(token, eContent);
  const genTime = children(tstInfo, readWhole(tstInfo))[4];
  if (genTime?.tag !== 0x18) throw new DerError('TSTInfo without genTime');
  const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(?:\.(\d+))?Z$/.exec(
    content(tstInfo, genTime).toString('latin1'),
  );
  if (!m) throw new DerError('genTime is not a GeneralizedTime in UTC');
  const millis = m[7] ? Number(m[7].slice(0, 3).padEnd(3, '0')) : 0;
  return new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!, millis));
}
