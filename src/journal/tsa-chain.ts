/**
 * The chain an evidence record's verifier builds from a token to our root: our TSA certificates the journal's
 * tokens name (every generation in use, across renewals), each one ours and issued by our root, which records
 * and archives carry beside the root. A verifier still anchors at the root it holds, never at what is carried
 * (docs/evidence.md).
 */
import { createHash, X509Certificate } from 'node:crypto';
import type { Store } from '../store/types.ts';
import { allBatches } from './renewal.ts';
import { knownTsaCertificates, namedCertificate, storedTsaCertificates, type TokenTrust } from './token-trust.ts';

/** Our TSA certificates (DER) the tokens of the journal's batches and renewals name, oldest use first. */
export async function journalTsaCertificates(store: Store, trust: TokenTrust): Promise<Buffer[]> {
  const tokens = [
    ...(await allBatches(store)).map((b) => b.token),
    ...(await store.journal.renewals()).map((r) => r.token),
  ];
  const known = knownTsaCertificates(trust.ours, await storedTsaCertificates(store, tokens));
  const root = new X509Certificate(trust.ours.root);
  const chain = new Map<string, Buffer>();
  for (const token of tokens) {
    const der = namedCertificate(token);
    if (!der) continue;
    const hash = createHash('sha256').update(der).digest('hex');
    if (chain.has(hash) || !known.has(hash)) continue;
    const certificate = new X509Certificate(der);
    if (certificate.checkIssued(root) && certificate.verify(root.publicKey)) chain.set(hash, der);
  }
  return [...chain.values()];
}
