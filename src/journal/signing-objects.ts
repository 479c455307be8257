/**
 * The objects of a signing that its journal entries name (format 3 by SHA-256 alone), as its rows keep them,
 * to hand out beside the entries (`qtsp evidence record`, the export): the introspection JWT as received, the
 * signer certificate, each kept signature (its bytes, as returned in Base64) and, per format-3
 * signing.returned entry, its revocationInfo as the bytes that entry hashed. Each is checked against its
 * sealed entry (sealed-digests.ts), so an auditor's chain entry body -> SHA-256 -> object holds for what we
 * hand out, and a row rewritten behind the service's back is said, not passed on silently.
 */
import type { SigningTransaction, StoredCertificate, StoredDocument, StoredJournalEntry } from '../store/types.ts';
import { revocationInfoText, sha256Hex, signatureBytes } from '../store/journal.ts';
import { toPem } from '../util/base64.ts';
import {
  type EntryBody,
  parseBody,
  revocationInfoDigest,
  sealedAuthorized,
  sealedSignatures,
  signatureDigest,
} from './sealed-digests.ts';

export interface SigningObject {
  /** file name in the signing's directory */
  readonly file: string;
  readonly bytes: Buffer;
}

export interface SigningObjects {
  readonly files: readonly SigningObject[];
  /** the kept signatures' file names, in the order given */
  readonly signatures: readonly string[];
  /** whether an entry names an object by its digest alone (format 3): the objects are then the evidence */
  readonly named: boolean;
  /** one line per object that is not what its sealed entry says */
  readonly differs: readonly string[];
}

/** XAdES signature objects are XML; CAdES and PAdES ones are CMS (DER) */
const signatureExtension = (format: string) => (format === 'X' ? 'xml' : 'p7s');

/** the file of a signing.returned entry's revocationInfo: journal-<seq>-signing.returned.revocation-info.json */
export const revocationInfoFile = (entry: StoredJournalEntry) =>
  `journal-${entry.seq}-${entry.kind}.revocation-info.json`;

interface Bodies {
  readonly authorized: readonly EntryBody[];
  readonly returned: readonly { readonly entry: StoredJournalEntry; readonly body: EntryBody }[];
}

function bodiesOf(entries: readonly StoredJournalEntry[]): Bodies {
  const parsed = entries.flatMap((entry) => {
    const body = parseBody(entry);
    return body ? [{ entry, body }] : [];
  });
  return {
    authorized: parsed.filter((p) => p.body.kind === 'signing.authorized').map((p) => p.body),
    returned: parsed.filter((p) => p.body.kind === 'signing.returned'),
  };
}

/** the JWT and the certificate against the signing.authorized entry */
function authorizedDiffers(bodies: Bodies, jwt: string, certificate: StoredCertificate | undefined): string[] {
  const differs: string[] = [];
  for (const body of bodies.authorized) {
    const sealed = sealedAuthorized(body);
    if (sha256Hex(jwt) !== sealed.introspectionJwt) differs.push('introspection.jwt');
    if (!certificate) differs.push('certificate.pem (its row is gone)');
    else if (sha256Hex(certificate.der) !== sealed.certificate) differs.push('certificate.pem');
  }
  return differs;
}

/** each kept signature and its revocationInfo against the signing.returned entry that returned it, if any */
function returnedDiffers(bodies: Bodies, kept: readonly { file: string; document: StoredDocument }[]): string[] {
  const sealed = new Map(bodies.returned.flatMap((r) => sealedSignatures(r.body).map((s) => [s.hash, s] as const)));
  const differs: string[] = [];
  for (const { file, document } of kept) {
    const s = sealed.get(document.hash);
    if (!s) continue; // kept with no entry (journal off, a store of release 0.1): the audit judges those
    if (s.signature !== signatureDigest(document.signature!)) differs.push(file);
    else if (s.revocationInfo !== revocationInfoDigest(document.revocation))
      differs.push(`the revocationInfo of ${file}`);
  }
  return differs;
}

/** a format-3 signing.returned entry's revocationInfo, from the first kept document it returned */
function revocationInfos(bodies: Bodies, signatures: readonly StoredDocument[]): SigningObject[] {
  return bodies.returned.flatMap(({ entry, body }) => {
    if ((body.v ?? 1) < 3) return [];
    const hashes = new Set(sealedSignatures(body).map((s) => s.hash));
    const text = revocationInfoText(signatures.find((d) => hashes.has(d.hash))?.revocation);
    return text === null ? [] : [{ file: revocationInfoFile(entry), bytes: Buffer.from(text, 'utf8') }];
  });
}

/**
 * `signatures`: the signing's kept signatures in the order of its hashes (retention/signatures.ts);
 * `entries`: its entries as handed out (records.ts recordsOf).
 */
export function signingObjects(
  signing: SigningTransaction,
  certificate: StoredCertificate | undefined,
  signatures: readonly StoredDocument[],
  entries: readonly StoredJournalEntry[],
): SigningObjects {
  const bodies = bodiesOf(entries);
  const extension = signatureExtension(signing.signatureFormat);
  const kept = signatures.map((document, i) => ({ file: `signature-${i + 1}.${extension}`, document }));
  const files: SigningObject[] = [
    { file: 'introspection.jwt', bytes: Buffer.from(signing.introspectionJwt, 'utf8') },
    ...(certificate ? [{ file: 'certificate.pem', bytes: Buffer.from(toPem(certificate.der, 'CERTIFICATE')) }] : []),
    ...kept.map((k) => ({
      file: k.file,
      bytes: signatureBytes(k.document.signature!) ?? Buffer.from(k.document.signature!, 'base64'),
    })),
    ...revocationInfos(bodies, signatures),
  ];
  return {
    files,
    signatures: kept.map((k) => k.file),
    named: [...bodies.authorized, ...bodies.returned.map((r) => r.body)].some((b) => (b.v ?? 1) >= 3),
    differs: [...authorizedDiffers(bodies, signing.introspectionJwt, certificate), ...returnedDiffers(bodies, kept)],
  };
}
