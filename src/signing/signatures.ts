/**
 * Step 8 of signDoc and the replay of step 5b: the signature data of the answer (spec 2.12), one signature per
 * hash in request order, with the revocationInfo of every distinct OCSP response and CRL they used.
 */
import { builderFor } from '../ades/builders.ts';
import type { SigningChoice } from '../ades/offer.ts';
import type { AdesServices, RevocationInfo } from '../ades/types.ts';
import type { KeyedCertificate } from '../ca/authority.ts';
import { keptRevocationInfo } from '../store/records.ts';
import type { KeptSignature } from '../store/types.ts';
import { base64Text, checkedBase64Text, type Base64Text } from '../util/base64.ts';
import type { Metrics } from '../util/metrics.ts';
import type { ParsedSignDocRequest } from './request.ts';
import type { EphemeralSigner } from './signer.ts';

/** The signatures of a signDoc answer (spec 2.12): SignatureObject and revocationInfo. */
export interface Signatures {
  readonly SignatureObject: Base64Text[];
  readonly revocationInfo?: { ocsp: Base64Text[]; crl: Base64Text[] };
}

export interface SignaturesDeps {
  readonly issuingCa: KeyedCertificate;
  /** TSA and revocation sources for B-T and above */
  readonly ades: AdesServices;
  readonly metrics: Metrics;
}

/**
 * step 8: one signature per hash, in request order, in the requested format and level. Built concurrently:
 * at B-LT each signature waits for revocation data issued after its time-stamp (up to a second, no CPU), and
 * the signatures of one request share that wait and that data instead of queueing a second each.
 */
export async function signHashes(
  request: ParsedSignDocRequest,
  choice: SigningChoice,
  signer: EphemeralSigner,
  deps: SignaturesDeps,
): Promise<Signatures> {
  const build = builderFor(choice.format, choice.level)!; // chooseSigning admitted only offered combinations
  const key = signer.key;
  const signingTime = new Date();
  const built = await Promise.all(
    request.hashes.map((hash) =>
      build({
        hash,
        hashAlgorithm: request.hashAlgorithm,
        signerCertificate: signer.certificate,
        chain: [deps.issuingCa.der],
        key,
        signingTime,
        services: deps.ades,
      }),
    ),
  );
  deps.metrics.signatures.inc(built.length);
  return {
    SignatureObject: built.map((b) => base64Text(b.signature)),
    ...revocationInfo(built.map((b) => b.revocation)),
  };
}

/** the response's revocationInfo (spec 2.12): every distinct OCSP response and CRL used, Base64 DER */
function revocationInfo(all: readonly (RevocationInfo | undefined)[]): Pick<Signatures, 'revocationInfo'> {
  const present = all.filter((r): r is RevocationInfo => r !== undefined);
  if (present.length === 0) return {};
  const unique = (list: Buffer[]) => [...new Set(list.map(base64Text))];
  return {
    revocationInfo: {
      ocsp: unique(present.flatMap((r) => [...r.ocsp])),
      crl: unique(present.flatMap((r) => [...r.crl])),
    },
  };
}

/**
 * step 5b, a replay: the signatures kept for these documents, as first returned (once.ts). Read back from the
 * store, so their characters are checked: the answer carries Base64Text into its JSON unescaped.
 */
export function replayed(kept: readonly KeptSignature[]): Signatures {
  return { SignatureObject: kept.map((s) => checkedBase64Text(s.signature)), ...revocationOf(kept) };
}

/** revocationInfo of kept signatures: each kept the revocationInfo of the response it was returned in */
function revocationOf(kept: readonly KeptSignature[]): Pick<Signatures, 'revocationInfo'> {
  const info = keptRevocationInfo(kept);
  if (!info) return {};
  return { revocationInfo: { ocsp: info.ocsp.map(checkedBase64Text), crl: info.crl.map(checkedBase64Text) } };
}
