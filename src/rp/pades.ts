/**
 * PAdES as a relying party does it (EN 319 142-1; spec 2.12): for each PDF a signature placeholder, the hash
 * of the bytes its /ByteRange covers through the normal flow (PAR with that hash, authorization, token,
 * signDoc with signature_format P), the returned CMS embedded; from B-LT on the certificates of the CMS and
 * the response's revocationInfo into the PDF's DSS; at B-LTA a document time-stamp from the QTSP's TSA over
 * all of that. Each step is an incremental update, so earlier signatures in the PDFs stay valid.
 */
import { digest, type HashAlgorithm } from '../crypto/algorithms.ts';
import { authorizeSigning, type AuthorizeResult, callSignDoc, type RpEndpoints, signDocRequest } from './flow.ts';
import { rpAgent, RpFlowError } from './http.ts';
import {
  addDss,
  cmsCertificates,
  type PreparedPdf,
  prepareDocumentTimestamp,
  prepareSignature,
  type SignatureOptions,
} from './pdf.ts';
import { RemoteTsa } from '../timestamping/tsa.ts';

const TSA_TIMEOUT_MS = 30_000;
export const PADES_LEVELS = ['AdES-B-B', 'AdES-B-T', 'AdES-B-LT', 'AdES-B-LTA'] as const;
export type PadesLevel = (typeof PADES_LEVELS)[number];

export interface PadesRequest {
  readonly pdfs: readonly Buffer[];
  /** shown to the user in the bank's consent (spec 2.7 documentDigests label) */
  readonly labels: readonly string[];
  readonly level: PadesLevel;
  readonly hashAlgorithm: HashAlgorithm;
  /** spec 2.12 signAlgo / signAlgoParams (the QTSP's default when absent) */
  readonly signAlgo?: string;
  readonly signAlgoParams?: string;
  readonly signature?: SignatureOptions;
  /** the QTSP's RFC 3161 service for B-LTA; default: /tsa at the origin of its signDoc URL */
  readonly tsaUrl?: string;
  readonly onStep?: (msg: string) => void;
}

export interface RevocationInfoJson {
  readonly ocsp: readonly string[];
  readonly crl?: readonly string[];
}

export interface PadesResult {
  /** the signed PDFs, in request order */
  readonly pdfs: Buffer[];
  /** the CMS signDoc returned for each, as embedded */
  readonly signatures: Buffer[];
  readonly revocationInfo?: RevocationInfoJson;
  readonly txn: string;
}

const withDss = (level: PadesLevel) => level === 'AdES-B-LT' || level === 'AdES-B-LTA';

/** Where the RP finds the QTSP's TSA: the QTSP publishes it beside signDoc (same origin, path /tsa). */
export function tsaUrlFor(signDocUrl: string): string {
  return new URL('/tsa', signDocUrl).toString();
}

interface SignDocAnswer {
  readonly signatures: Buffer[];
  readonly revocationInfo?: RevocationInfoJson;
  readonly txn: string;
}

function parseSignDocAnswer(
  res: { status: number; body: unknown; headers: Record<string, unknown> },
  count: number,
  level: PadesLevel,
): SignDocAnswer {
  const body = res.body as {
    SignatureObject?: unknown;
    revocationInfo?: RevocationInfoJson;
    error?: string;
    error_description?: string;
  };
  if (res.status !== 200) {
    throw new RpFlowError(
      'signDoc',
      `HTTP ${res.status} ${body?.error ?? ''}${body?.error_description ? `: ${body.error_description}` : ''}`,
      res.status,
      body?.error,
      body?.error_description,
    );
  }
  if (!Array.isArray(body.SignatureObject) || body.SignatureObject.length !== count)
    throw new RpFlowError('signDoc', `expected ${count} SignatureObject entries`);
  // spec 2.12: revocationInfo is required for P at B-LT (and so at B-LTA, which extends it)
  if (withDss(level) && !Array.isArray(body.revocationInfo?.ocsp))
    throw new RpFlowError('signDoc', `no revocationInfo for PAdES at ${level}`);
  return {
    signatures: (body.SignatureObject as string[]).map((s) => Buffer.from(s, 'base64')),
    ...(body.revocationInfo ? { revocationInfo: body.revocationInfo } : {}),
    txn: String(res.headers['x-transaction-id'] ?? 'unknown'),
  };
}

/**
 * B-LTA: a document time-stamp (ETSI.RFC3161) over the whole file as it is now, DSS included. The RFC 3161
 * client is the QTSP's own one for external TSAs (timestamping/tsa.ts RemoteTsa: nonce, imprint check,
 * retries); its chain is not needed here, the token carries the TSA certificate.
 */
async function addDocumentTimestamp(
  pdf: Buffer,
  request: PadesRequest,
  tsaUrl: string,
  endpoints: RpEndpoints,
): Promise<Buffer> {
  const prepared = await prepareDocumentTimestamp(pdf);
  const agent = rpAgent(endpoints);
  try {
    const tsa = new RemoteTsa({ url: tsaUrl, timeoutMs: TSA_TIMEOUT_MS, retries: 1, chain: [], agent });
    const token = await tsa.timestamp(digest(request.hashAlgorithm, prepared.covered), request.hashAlgorithm);
    return await prepared.complete(token);
  } finally {
    agent.destroy();
  }
}

/** The PDFs with their signature placeholders, waiting for the CMS of each; hashes are what signDoc signs. */
export interface PreparedPades {
  readonly prepared: readonly PreparedPdf[];
  /** Base64 digests of the bytes each /ByteRange covers, in request order (spec 2.7 documentDigests hash) */
  readonly hashes: readonly string[];
  /** the documentDigests of the authorization request: the hashes with their labels */
  readonly documentDigests: { hash: string; label: string }[];
}

/** First step: a signature placeholder in each PDF and the hash of the bytes it covers. */
export async function preparePades(request: PadesRequest): Promise<PreparedPades> {
  const step = request.onStep ?? (() => undefined);
  const prepared = await Promise.all(request.pdfs.map((pdf) => prepareSignature(pdf, request.signature)));
  const hashes = prepared.map((p) => digest(request.hashAlgorithm, p.covered).toString('base64'));
  step(`prepared ${prepared.length} PDF signature field(s); hashed the byte ranges with ${request.hashAlgorithm.name}`);
  const documentDigests = hashes.map((hash, i) => ({ hash, label: request.labels[i] ?? `document ${i + 1}` }));
  return { prepared, hashes, documentDigests };
}

/** Spec 2.12: signDoc for the prepared hashes with the access token of the authorization. */
async function requestPadesSignatures(
  endpoints: RpEndpoints,
  request: PadesRequest,
  hashes: readonly string[],
  auth: AuthorizeResult,
): Promise<SignDocAnswer> {
  const res = await callSignDoc(
    auth.qtsp.signDoc,
    endpoints,
    signDocRequest(auth, {
      hashes,
      hashAlgorithmOID: request.hashAlgorithm.oid,
      format: 'P',
      level: request.level,
      ...(request.signAlgo ? { signAlgo: request.signAlgo } : {}),
      ...(request.signAlgoParams ? { signAlgoParams: request.signAlgoParams } : {}),
    }),
  );
  return parseSignDocAnswer(res, hashes.length, request.level);
}

/**
 * Last step, once the user consented (`auth`): signDoc, each CMS embedded, from B-LT on the DSS, at B-LTA the
 * document time-stamp.
 */
export async function completePades(
  endpoints: RpEndpoints,
  request: PadesRequest,
  pades: PreparedPades,
  auth: AuthorizeResult,
): Promise<PadesResult> {
  const step = request.onStep ?? (() => undefined);
  const answer = await requestPadesSignatures(endpoints, request, pades.hashes, auth);
  step(`signDoc: ${answer.signatures.length} PAdES signature(s) at ${request.level} received`);
  const pdfs: Buffer[] = [];
  for (const [i, p] of pades.prepared.entries()) {
    let pdf = await p.complete(answer.signatures[i]!);
    if (withDss(request.level)) {
      const info = answer.revocationInfo!;
      pdf = await addDss(pdf, {
        certificates: cmsCertificates(answer.signatures[i]!),
        ocsps: info.ocsp.map((b) => Buffer.from(b, 'base64')),
        crls: (info.crl ?? []).map((b) => Buffer.from(b, 'base64')),
      });
    }
    if (request.level === 'AdES-B-LTA')
      pdf = await addDocumentTimestamp(pdf, request, request.tsaUrl ?? tsaUrlFor(auth.qtsp.signDoc), endpoints);
    pdfs.push(pdf);
  }
  if (withDss(request.level)) step('DSS added (certificates, OCSP responses, CRLs)');
  if (request.level === 'AdES-B-LTA') step('document time-stamp added');
  return {
    pdfs,
    signatures: answer.signatures,
    ...(answer.revocationInfo ? { revocationInfo: answer.revocationInfo } : {}),
    txn: answer.txn,
  };
}

/** The whole PAdES flow with the headless authorization (authorizeSigning). */
export async function signPdfs(endpoints: RpEndpoints, request: PadesRequest): Promise<PadesResult> {
  const pades = await preparePades(request);
  const auth = await authorizeSigning(endpoints, {
    documentDigests: pades.documentDigests,
    hashAlgorithmOID: request.hashAlgorithm.oid,
    ...(request.onStep ? { onStep: request.onStep } : {}),
  });
  return completePades(endpoints, request, pades, auth);
}
