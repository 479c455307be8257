/**
 * Which signing a kept signature belongs to. The store keeps signatures per document of a consent (iss, txn),
 * and a consent may back several signings; a signing that failed after its evidence was written (a TSA down)
 * lists documents that a later signing then signed. A signature belongs to the last signing of its consent
 * that lists its document and was recorded before the signature was kept.
 */
import type { SigningTransaction, StoredDocument } from '../store/types.ts';

const lists = (t: SigningTransaction, d: StoredDocument) =>
  t.iss === d.iss && t.txn === d.txn && t.hashAlgorithmOid === d.hashAlgorithmOid && t.hashes.includes(d.hash);

/** `consent`: every signing of the document's consent, oldest first */
function ownerOf(d: StoredDocument, consent: readonly SigningTransaction[]): SigningTransaction | undefined {
  const listing = consent.filter((t) => lists(t, d));
  const signedAt = d.signedAt?.getTime() ?? Number.POSITIVE_INFINITY;
  return listing.filter((t) => t.createdAt.getTime() <= signedAt).at(-1) ?? listing.at(-1);
}

/**
 * The signatures kept for `signing`, in the order of its hashes. `consent`: every signing of its consent
 * (store getTransaction), oldest first; `documents`: the consent's documents (store documentsOf).
 */
export function signaturesOf(
  signing: SigningTransaction,
  consent: readonly SigningTransaction[],
  documents: readonly StoredDocument[],
): StoredDocument[] {
  const mine = documents.filter(
    (d) =>
      d.signature !== null &&
      lists(signing, d) &&
      ownerOf(d, consent)?.certificateSerialHex === signing.certificateSerialHex,
  );
  return mine.sort((x, y) => signing.hashes.indexOf(x.hash) - signing.hashes.indexOf(y.hash));
}
