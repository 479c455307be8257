/**
 * The demo RP's signing steps around the bank's consent: before it, the hash the bank shows and the QTSP signs
 * (PAdES: of the bytes the placeholder's /ByteRange covers, src/rp/pades.ts); after it, signDoc (spec 2.12),
 * the result files and the independent validator's verdict (verify.ts).
 */
import { digest, SHA256 } from '../../crypto/algorithms.ts';
import { type AuthorizeResult, callSignDoc, RpFlowError, type RpEndpoints, signDocRequest } from '../flow.ts';
import { completePades, type PadesLevel, type PadesRequest, preparePades, type PreparedPades } from '../pades.ts';
import type { DocumentChoice, DownloadFile, PendingSigning, SigningResult } from './sessions.ts';
import { verifyCades, verifyPades, verifyXades, type VerifierFiles } from './verify.ts';

/** The documents are hashed with SHA-256, which every QTSP supports (spec 2.7). */
const HASH = SHA256;

function padesRequest(choice: DocumentChoice): PadesRequest {
  return { pdfs: [choice.bytes], labels: [choice.fileName], level: choice.level as PadesLevel, hashAlgorithm: HASH };
}

/** What the authorization request names: the document's hash and its label (spec 2.7). */
export async function documentDigests(
  choice: DocumentChoice,
): Promise<{ digests: { hash: string; label: string }[]; hashAlgorithmOID: string; pades?: PreparedPades }> {
  if (choice.format === 'P') {
    const pades = await preparePades(padesRequest(choice));
    return { digests: pades.documentDigests, hashAlgorithmOID: HASH.oid, pades };
  }
  const hash = digest(HASH, choice.bytes).toString('base64');
  return { digests: [{ hash, label: choice.fileName }], hashAlgorithmOID: HASH.oid };
}

function signDocFailure(res: { status: number; body: unknown }): RpFlowError {
  const body = (res.body ?? {}) as { error?: string; error_description?: string };
  const detail = `${body.error ?? ''}${body.error_description ? `: ${body.error_description}` : ''}`;
  return new RpFlowError('signDoc', `HTTP ${res.status} ${detail}`, res.status, body.error, body.error_description);
}

/** CAdES or XAdES: signDoc for the document's hash; the one SignatureObject as bytes and the transaction. */
async function signHash(
  endpoints: RpEndpoints,
  choice: DocumentChoice,
  auth: AuthorizeResult,
): Promise<{ signature: Buffer; txn: string }> {
  const hash = digest(HASH, choice.bytes).toString('base64');
  const request = signDocRequest(auth, {
    hashes: [hash],
    hashAlgorithmOID: HASH.oid,
    format: choice.format,
    level: choice.level,
  });
  const res = await callSignDoc(auth.qtsp.signDoc, endpoints, request);
  const objects = (res.body as { SignatureObject?: unknown } | undefined)?.SignatureObject;
  if (res.status !== 200 || !Array.isArray(objects) || typeof objects[0] !== 'string') throw signDocFailure(res);
  return { signature: Buffer.from(objects[0], 'base64'), txn: String(res.headers['x-transaction-id'] ?? 'unknown') };
}

const file = (name: string, contentType: string, bytes: Buffer): DownloadFile => ({ name, contentType, bytes });

/** doc.pdf -> doc.signed.pdf */
function signedPdfName(name: string): string {
  return /\.pdf$/i.test(name) ? name.replace(/\.pdf$/i, '.signed.pdf') : `${name}.signed.pdf`;
}

/** After the consent: signDoc, the result files, the validator's verdict. */
export async function completeSigning(
  endpoints: RpEndpoints,
  pending: PendingSigning,
  auth: AuthorizeResult,
  verifier: VerifierFiles,
): Promise<SigningResult> {
  const { choice } = pending;
  const base = { fileName: choice.fileName, format: choice.format, level: choice.level };
  if (choice.format === 'P') {
    if (!pending.pades) throw new Error('a PAdES signing without its prepared PDF');
    const result = await completePades(endpoints, padesRequest(choice), pending.pades, auth);
    const pdf = result.pdfs[0]!;
    const downloads = {
      'signed-pdf': file(signedPdfName(choice.fileName), 'application/pdf', pdf),
      signature: file(`${choice.fileName}.p7s`, 'application/pkcs7-signature', result.signatures[0]!),
    };
    return { ...base, txn: result.txn, downloads, verdict: await verifyPades(pdf, verifier) };
  }
  const { signature, txn } = await signHash(endpoints, choice, auth);
  const xml = choice.format === 'X';
  const downloads = {
    signature: xml
      ? file(`${choice.fileName}.xml`, 'application/xml', signature)
      : file(`${choice.fileName}.p7s`, 'application/pkcs7-signature', signature),
  };
  const verdict = xml
    ? await verifyXades(signature, choice.bytes, verifier)
    : await verifyCades(signature, choice.bytes, verifier);
  return { ...base, txn, downloads, verdict };
}
