/**
 * How the token signs: we hash (node:crypto, all six hashes) and the token signs the digest. CKM_ECDSA (r||s,
 * turned into DER for X.509 and CMS), CKM_RSA_PKCS over the DigestInfo (RFC 8017 9.2), CKM_RSA_PKCS_PSS with its
 * parameters (hash, MGF1 with the same hash, salt as long as the hash: as rsaPssParams in crypto/keys.ts).
 */
import { HASH_ALGORITHMS } from '../../crypto/algorithms.ts';
import type { SignatureScheme, SignHash } from '../../crypto/signature.ts';
import { algorithmIdentifier, integerFromBytes, octetString, sequence } from '../../util/der.ts';
import { pkcs11js } from './token.ts';

/**
 * Hash and MGF1 identifiers for CK_RSA_PKCS_PSS_PARAMS. SHA-3: PKCS#11 3.0 values (pkcs11t.h), which
 * pkcs11js (written against 2.40) does not name. A token that lacks them refuses PSS with SHA-3 (SoftHSM 2.6
 * does): probed at start, and then not offered (supports()).
 */
const PSS_HASH: Readonly<Record<SignHash, { hashAlg: number; mgf: number }>> = {
  sha256: { hashAlg: pkcs11js.CKM_SHA256, mgf: pkcs11js.CKG_MGF1_SHA256 },
  sha384: { hashAlg: pkcs11js.CKM_SHA384, mgf: pkcs11js.CKG_MGF1_SHA384 },
  sha512: { hashAlg: pkcs11js.CKM_SHA512, mgf: pkcs11js.CKG_MGF1_SHA512 },
  'sha3-256': { hashAlg: 0x2b0, mgf: 0x7 },
  'sha3-384': { hashAlg: 0x2c0, mgf: 0x8 },
  'sha3-512': { hashAlg: 0x2d0, mgf: 0x9 },
};

const HASH_BY_NODE_NAME = new Map([...HASH_ALGORITHMS.values()].map((h) => [h.node, h]));

export function hashInfo(hash: SignHash) {
  const h = HASH_BY_NODE_NAME.get(hash);
  if (!h) throw new TypeError(`unknown hash ${hash}`);
  return h;
}

/** DigestInfo (RFC 8017 9.2 step 2) with NULL parameters, as OpenSSL writes it for SHA-2 and SHA-3 alike. */
function digestInfo(hash: SignHash, digest: Buffer): Buffer {
  return sequence(algorithmIdentifier(hashInfo(hash).oid, true), octetString(digest));
}

/** What the token signs, and how, for a scheme and a hash. */
export function signOperation(
  scheme: SignatureScheme,
  hash: SignHash,
  digest: Buffer,
): { mechanism: pkcs11js.Mechanism; input: Buffer } {
  switch (scheme) {
    case 'ecdsa':
      return { mechanism: { mechanism: pkcs11js.CKM_ECDSA }, input: digest };
    case 'rsa-pkcs1-v1_5':
      return { mechanism: { mechanism: pkcs11js.CKM_RSA_PKCS }, input: digestInfo(hash, digest) };
    case 'rsa-pss': {
      const { hashAlg, mgf } = PSS_HASH[hash];
      return {
        mechanism: {
          mechanism: pkcs11js.CKM_RSA_PKCS_PSS,
          parameter: { type: pkcs11js.CK_PARAMS_RSA_PSS, hashAlg, mgf, saltLen: digest.length } as pkcs11js.RsaPSS,
        },
        input: digest,
      };
    }
  }
}

/** ECDSA-Sig-Value (RFC 5480 2.2 / X9.62) from r||s as CKM_ECDSA returns it. */
export function ecdsaRawToDer(raw: Buffer): Buffer {
  const half = raw.length / 2;
  return sequence(integerFromBytes(raw.subarray(0, half)), integerFromBytes(raw.subarray(half)));
}
