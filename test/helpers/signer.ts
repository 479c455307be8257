/** A signer certificate for Erika Mustermann under `issuingCa`, with the default profile (country DE, no PDS). */
import type { KeyObject } from 'node:crypto';
import type { KeyedCertificate } from '../../src/ca/authority.ts';
import { mintSignerCertificate, signerProfile, type SignerCertificate } from '../../src/ca/signer-certificate.ts';

export function mintTestSignerCertificate(
  issuingCa: KeyedCertificate,
  publicKey: KeyObject,
  txn: string,
): Promise<SignerCertificate> {
  return mintSignerCertificate({
    claims: { given_name: 'Erika', family_name: 'Mustermann' },
    publicKey,
    issuingCa,
    validitySeconds: 600,
    profile: signerProfile({ defaultCountry: 'DE', pdsUrls: {} }),
    keyInQscd: false,
    consent: { issuer: 'https://bank.test', txn },
  });
}
