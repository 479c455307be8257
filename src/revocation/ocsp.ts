/**
 * OCSP responder (RFC 6960) for the certificates of one of our CAs, signed by a delegated responder certificate
 * (id-kp-OCSPSigning, id-pkix-ocsp-nocheck; RFC 6960 4.2.2.2) that this CA issued: the issuing CA's responder
 * for signer certificates, the root's (issued at the key ceremony) for the issuing CA and the TSA.
 * OcspResponders answers for both, choosing by the request's issuer hashes.
 *
 * Status comes from the certificate store: issued -> good, revoked -> revoked with time and reason, never
 * issued by this CA -> unknown (RFC 6960 2.2). CertIDs with SHA-1 or SHA-2 hashes are recognised and echoed
 * as the requester sent them; the nonce extension (RFC 8954) is echoed. The responses we embed in signatures
 * ourselves (certIdFor) name the certificate with a SHA-1 CertID, the RFC 5019 profile that validators look
 * up by default. A request that cannot be parsed gets
 * malformedRequest, one for a CA we do not answer for gets unauthorized (RFC 6960 2.3).
 *
 * Responses are composed with der.ts: the CertID and nonce go back byte for byte as received, and the
 * responder certificate goes in as the DER we hold.
 */
import { createHash } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import {
  algorithmIdentifier,
  bitString,
  children,
  enumerated,
  explicit,
  generalizedTime,
  generalizedTimeMillis,
  octetString,
  oid,
  partsOf,
  readTlv,
  sequence,
  tlv,
  type CertificateParts,
} from '../util/der.ts';
import type { CertificateStatus, RevocationReason, Store } from '../store/types.ts';
import type { KeyedCertificate } from '../ca/authority.ts';
import { signatureAlgorithm, type SignHash } from '../crypto/signature.ts';

export const OCSP_OID = {
  basic: '1.3.6.1.5.5.7.48.1.1',
  nonce: '1.3.6.1.5.5.7.48.1.2',
} as const;

export const OCSP_REQUEST = 'application/ocsp-request';
export const OCSP_RESPONSE = 'application/ocsp-response';

/** OCSPResponseStatus (RFC 6960 4.2.1) */
export const RESPONSE_STATUS = {
  successful: 0,
  malformedRequest: 1,
  internalError: 2,
  tryLater: 3,
  unauthorized: 6,
} as const;

/** CRLReason (RFC 5280 5.3.1) */
export const CRL_REASON_CODE: Readonly<Record<RevocationReason, number>> = {
  unspecified: 0,
  keyCompromise: 1,
  cACompromise: 2,
  affiliationChanged: 3,
  superseded: 4,
  cessationOfOperation: 5,
  certificateHold: 6,
  privilegeWithdrawn: 9,
};

/** CertID hash algorithms we recognise: SHA-1 (RFC 5019 clients, OpenSSL's default) and SHA-2. */
const CERT_ID_HASHES: Readonly<Record<string, string>> = {
  '1.3.14.3.2.26': 'sha1',
  '2.16.840.1.101.3.4.2.1': 'sha256',
  '2.16.840.1.101.3.4.2.2': 'sha384',
  '2.16.840.1.101.3.4.2.3': 'sha512',
};
const SHA1_OID = '1.3.14.3.2.26';

export type StatusSource = Pick<Store, 'certificateStatus'>;

export interface OcspResponderOptions {
  /** the delegated responder: certificate and key */
  readonly responder: KeyedCertificate;
  /** the CA we answer for (its certificate, DER): the issuing CA, or the root */
  readonly ca: Pick<KeyedCertificate, 'der'>;
  readonly status: StatusSource;
  /** nextUpdate - thisUpdate */
  readonly validitySeconds: number;
  readonly clock?: () => Date;
}

export interface OcspAnswer {
  /** HTTP status: 200 for a successful response, 400 for malformedRequest, 200 otherwise */
  readonly httpStatus: number;
  readonly body: Buffer;
}

interface SingleQuery {
  /** CertID DER as received */
  readonly certId: Buffer;
  readonly serialHex: string;
  readonly ours: boolean;
}

class Malformed extends Error {}

/** OCSPResponse without responseBytes (RFC 6960 4.2.1): every status but successful */
export function errorResponse(status: Exclude<keyof typeof RESPONSE_STATUS, 'successful'>): Buffer {
  return sequence(enumerated(RESPONSE_STATUS[status]));
}

const wholeSeconds = (d: Date) => new Date(Math.floor(d.getTime() / 1000) * 1000);

const SUCCESSFUL = enumerated(RESPONSE_STATUS.successful);

/** The responder's part of every BasicOCSPResponse it signs (RFC 6960 4.2.1), encoded once per certificate. */
interface ResponderSigning {
  readonly responder: KeyedCertificate;
  /** ResponderID byKey: SHA-1 of the responder's public key: 22 bytes instead of a Name */
  readonly responderId: Buffer;
  readonly hash: SignHash;
  /** signatureAlgorithm AlgorithmIdentifier */
  readonly algorithm: Buffer;
  /** certs [0] EXPLICIT SEQUENCE OF Certificate: the responder's certificate (RFC 6960 4.2.2.2) */
  readonly certs: Buffer;
}

function responderSigning(responder: KeyedCertificate): ResponderSigning {
  const responderKey = partsOf(responder.der).publicKeyBits;
  const alg = signatureAlgorithm(responder.key, responder.issuer.hash);
  return {
    responder,
    responderId: explicit(2, octetString(createHash('sha1').update(responderKey).digest())),
    hash: alg.hash,
    algorithm: algorithmIdentifier(alg.oid, alg.nullParams),
    certs: explicit(0, sequence(responder.der)),
  };
}

export class OcspResponder {
  readonly #o: OcspResponderOptions;
  readonly #clock: () => Date;
  /** issuerNameHash || issuerKeyHash of our CA, per CertID hash algorithm */
  readonly #issuerHashes = new Map<string, Buffer>();
  readonly #caParts: CertificateParts;
  /** the delegated responder's certificate and key, and the DER every response repeats: renew() replaces them */
  #signing: ResponderSigning;
  /** the store's key id of the CA: SHA-1 of its public key, lowercase hex */
  readonly caKeyId: string;

  constructor(options: OcspResponderOptions) {
    this.#o = options;
    this.#clock = options.clock ?? (() => new Date());
    this.#caParts = partsOf(options.ca.der);
    for (const [algOid, node] of Object.entries(CERT_ID_HASHES)) {
      const nameHash = createHash(node).update(this.#caParts.subject).digest();
      const keyHash = createHash(node).update(this.#caParts.publicKeyBits).digest();
      this.#issuerHashes.set(algOid, Buffer.concat([nameHash, keyHash]));
    }
    this.#signing = responderSigning(options.responder);
    this.caKeyId = createHash('sha1').update(this.#caParts.publicKeyBits).digest('hex');
  }

  /** A renewed responder certificate (and key) for the same CA: responses from now on are signed under it. */
  renew(responder: KeyedCertificate): void {
    this.#signing = responderSigning(responder);
  }

  /** the delegated responder's certificate, DER */
  get responderDer(): Buffer {
    return this.#signing.responder.der;
  }

  /** the certificate of the CA this responder answers for, DER */
  get caDer(): Buffer {
    return this.#o.ca.der;
  }

  /** A DER OCSPRequest in, a DER OCSPResponse out; never throws. */
  async respond(requestDer: Uint8Array): Promise<OcspAnswer> {
    let parsed: { queries: SingleQuery[]; nonce?: Buffer };
    try {
      parsed = parseRequest(requestDer, this.#issuerHashes);
    } catch {
      return { httpStatus: 400, body: errorResponse('malformedRequest') };
    }
    if (parsed.queries.some((q) => !q.ours)) return { httpStatus: 200, body: errorResponse('unauthorized') };
    try {
      const statuses = await Promise.all(
        parsed.queries.map((q) => this.#o.status.certificateStatus(this.caKeyId, q.serialHex)),
      );
      const singles = parsed.queries.map((q, i) => ({ certId: q.certId, status: statuses[i]! }));
      return { httpStatus: 200, body: await this.sign(singles, parsed.nonce) };
    } catch {
      // the store failed: RFC 6960 2.3 tryLater, never a guess
      return { httpStatus: 200, body: errorResponse('tryLater') };
    }
  }

  /**
   * A CertID for one of our CA's certificates, with SHA-1 hashes (RFC 6960 4.1.1; the RFC 5019 profile):
   * `openssl ocsp` and other validators build a SHA-1 CertID to find the status in an embedded response and
   * report "no status" for a SHA-256 one. SHA-1 only names the certificate here (issuer name and key hashes
   * next to the serial); the response's integrity rests on the responder's signature, not on these hashes.
   */
  certIdFor(certificate: CertificateParts): Buffer {
    const hashes = this.#issuerHashes.get(SHA1_OID)!;
    return sequence(
      algorithmIdentifier(SHA1_OID, true),
      octetString(hashes.subarray(0, 20)),
      octetString(hashes.subarray(20)),
      certificate.serial,
    );
  }

  /**
   * A signed, successful OCSPResponse for the given CertIDs and statuses (RFC 6960 4.2.1), as /ocsp answers:
   * producedAt and thisUpdate in whole seconds, since NSS (pdfsig) reads no fraction in a GeneralizedTime and
   * fetches its answers online.
   */
  async sign(singles: readonly { certId: Buffer; status: CertificateStatus }[], nonce?: Buffer): Promise<Buffer> {
    return (await this.signed(singles, nonce, wholeSeconds(this.#clock()))).der;
  }

  /**
   * sign(), and the response's producedAt (= thisUpdate), by default to the millisecond: RFC 6960 4.2.1 does not
   * take RFC 5280's whole-second rule, so a response we embed just after a time-stamp is dated after its genTime
   */
  async signed(
    singles: readonly { certId: Buffer; status: CertificateStatus }[],
    nonce?: Buffer,
    now = new Date(this.#clock().getTime()),
  ): Promise<{ der: Buffer; producedAt: Date }> {
    const thisUpdate = generalizedTimeMillis(now);
    const nextUpdate = explicit(0, generalizedTimeMillis(new Date(now.getTime() + this.#o.validitySeconds * 1000)));
    const responses = singles.map((s) => sequence(s.certId, certStatus(s.status), thisUpdate, nextUpdate));
    const extensions = nonce ? [explicit(1, sequence(sequence(oid(OCSP_OID.nonce), octetString(nonce))))] : [];
    const signing = this.#signing;
    const tbs = sequence(signing.responderId, thisUpdate, sequence(...responses), ...extensions);
    const signature = bitString(await signing.responder.key.sign(signing.hash, tbs));
    const basic = sequence(tbs, signing.algorithm, signature, signing.certs);
    return {
      der: sequence(SUCCESSFUL, explicit(0, sequence(oid(OCSP_OID.basic), octetString(basic)))),
      producedAt: now,
    };
  }
}

const UNAUTHORIZED = errorResponse('unauthorized');

/**
 * The OCSP responders of all our CAs behind one URL: a request goes to the responder whose CA issued the
 * certificates it names (CertID issuerNameHash and issuerKeyHash, RFC 6960 4.1.1). One response is signed by
 * one responder, so a request naming certificates of two CAs gets unauthorized (RFC 6960 2.3).
 */
export class OcspResponders {
  #all: readonly OcspResponder[];

  constructor(all: readonly OcspResponder[]) {
    this.#all = all;
  }

  /** The responders from now on: a CA that rolled over keeps its own beside the new CA's (ca/rollover.ts). */
  replace(all: readonly OcspResponder[]): void {
    this.#all = all;
  }

  /** A DER OCSPRequest in, a DER OCSPResponse out; never throws. */
  async respond(requestDer: Uint8Array): Promise<OcspAnswer> {
    let answer: OcspAnswer = { httpStatus: 200, body: UNAUTHORIZED };
    for (const responder of this.#all) {
      answer = await responder.respond(requestDer);
      if (answer.httpStatus !== 200 || !answer.body.equals(UNAUTHORIZED)) return answer;
    }
    return answer;
  }
}

/** CertStatus (RFC 6960 4.2.1): good [0] IMPLICIT NULL, revoked [1] IMPLICIT RevokedInfo, unknown [2] IMPLICIT NULL */
function certStatus(status: CertificateStatus): Buffer {
  switch (status.status) {
    case 'good':
      return tlv(0x80);
    case 'unknown':
      return tlv(0x82);
    case 'revoked': {
      // RFC 5280 5.3.1: reasonCode unspecified SHOULD be absent; the same holds for RevokedInfo by analogy
      const reason = status.reason === 'unspecified' ? [] : [explicit(0, enumerated(CRL_REASON_CODE[status.reason]))];
      return tlv(0xa1, generalizedTime(wholeSeconds(status.revokedAt)), ...reason);
    }
  }
}

/**
 * OCSPRequest (RFC 6960 4.1.1) with pkijs; the CertIDs are taken as the raw DER the requester sent, since the
 * response must repeat them exactly.
 */
function parseRequest(
  der: Uint8Array,
  issuerHashes: ReadonlyMap<string, Buffer>,
): { queries: SingleQuery[]; nonce?: Buffer } {
  const bytes = new Uint8Array(der);
  const asn = asn1js.fromBER(bytes);
  if (asn.offset === -1 || asn.offset !== bytes.length) throw new Malformed('not one DER value');
  const request = new pkijs.OCSPRequest({ schema: asn.result });
  const list = request.tbsRequest.requestList;
  if (list.length === 0 || list.length > 20) throw new Malformed('1 to 20 requests');
  const rawCertIds = rawCertIdsOf(bytes);
  if (rawCertIds.length !== list.length) throw new Malformed('request list');
  const queries = list.map((r, i) => {
    const id = r.reqCert;
    const expected = issuerHashes.get(id.hashAlgorithm.algorithmId);
    const given = Buffer.concat([
      Buffer.from(id.issuerNameHash.valueBlock.valueHexView),
      Buffer.from(id.issuerKeyHash.valueBlock.valueHexView),
    ]);
    return {
      certId: rawCertIds[i]!,
      serialHex: Buffer.from(id.serialNumber.valueBlock.valueHexView).toString('hex'),
      ours: expected?.equals(given) === true,
    };
  });
  const nonceExt = request.tbsRequest.requestExtensions?.find((e) => e.extnID === OCSP_OID.nonce);
  const nonce = nonceExt ? Buffer.from(nonceExt.extnValue.valueBlock.valueHexView) : undefined;
  if (nonce && (nonce.length === 0 || nonce.length > 128)) throw new Malformed('nonce length');
  return { queries, ...(nonce ? { nonce } : {}) };
}

/** The DER of each Request.reqCert, in order: OCSPRequest -> tbsRequest -> requestList -> Request -> CertID */
function rawCertIdsOf(der: Uint8Array): Buffer[] {
  const tbs = children(der, readTlv(der))[0]!;
  const list = children(der, tbs).find((t) => t.tag === 0x30)!; // version [0] and requestorName [1] come before
  return children(der, list).map((req) => {
    const certId = children(der, req)[0]!;
    return Buffer.from(der.subarray(certId.start, certId.end));
  });
}
