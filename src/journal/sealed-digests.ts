/**
 * What a sealed signing entry says of the objects its rows keep, as SHA-256 (lowercase hex), whatever the
 * entry's format (docs/evidence.md): format 3 carries the digests; formats 1 and 2 carried the objects, whose
 * digests are taken here. The audit compares a row's digest with these, and `qtsp evidence record` and the
 * export check what they hand out against them, so one comparison serves every format.
 */
import { revocationInfoText, sha256Hex, signatureBytes } from '../store/journal.ts';
import type { StoredJournalEntry } from '../store/types.ts';

/** a journal entry's body as parsed */
export interface EntryBody {
  readonly v?: number;
  readonly kind: string;
  readonly ref: string | null;
  readonly at: string;
  readonly data: Record<string, unknown>;
}

/** what a signing.authorized entry sealed of its transaction and certificate rows */
export interface SealedAuthorized {
  readonly txn: string;
  readonly hashes: readonly string[];
  readonly introspectionJwt: string;
  readonly certificate: string;
}

/** what a signing.returned entry sealed of one kept document */
export interface SealedSignature {
  readonly hash: string;
  readonly signature: string;
  /** null: returned without revocationInfo */
  readonly revocationInfo: string | null;
}

type Info = { ocsp?: readonly string[]; crl?: readonly string[] } | null | undefined;

/** the body of an entry; undefined when its bytes do not parse (the entry checks name those) */
export function parseBody(entry: StoredJournalEntry): EntryBody | undefined {
  try {
    return JSON.parse(entry.body.toString('utf8')) as EntryBody;
  } catch {
    return undefined;
  }
}

/**
 * the digest of a signature kept as Base64; a text that is not canonical Base64 is no object's digest (it
 * compares equal only to the same text, as formats 1 and 2 compared the texts themselves)
 */
export function signatureDigest(base64: string): string {
  const bytes = signatureBytes(base64);
  return bytes ? sha256Hex(bytes) : `not canonical Base64: ${base64}`;
}

/** the digest of a revocationInfo (revocationInfoText), null without one */
export function revocationInfoDigest(info: Info): string | null {
  const text = revocationInfoText(info);
  return text === null ? null : sha256Hex(text);
}

export function sealedAuthorized(body: EntryBody): SealedAuthorized {
  const d = body.data as Record<string, string> & { hashes: string[] };
  if ((body.v ?? 1) >= 3)
    return {
      txn: d.txn,
      hashes: d.hashes,
      introspectionJwt: d.introspectionJwtSha256!,
      certificate: d.certificateSha256!,
    };
  return {
    txn: d.txn,
    hashes: d.hashes,
    introspectionJwt: sha256Hex(d.introspectionJwt ?? ''),
    certificate: sha256Hex(Buffer.from(d.certificate ?? '', 'base64')),
  };
}

/** a signing.returned entry's documents; format 1 kept the revocationInfo with each, format 2 once */
export function sealedSignatures(body: EntryBody): SealedSignature[] {
  const signatures = (body.data.signatures ?? []) as {
    hash: string;
    signature?: string;
    signatureSha256?: string;
    revocation?: Info;
  }[];
  if ((body.v ?? 1) >= 3) {
    const revocationInfo = (body.data.revocationInfoSha256 ?? null) as string | null;
    return signatures.map((s) => ({ hash: s.hash, signature: s.signatureSha256!, revocationInfo }));
  }
  return signatures.map((s) => ({
    hash: s.hash,
    signature: signatureDigest(s.signature ?? ''),
    revocationInfo: revocationInfoDigest('revocation' in s ? s.revocation : (body.data.revocationInfo as Info)),
  }));
}
