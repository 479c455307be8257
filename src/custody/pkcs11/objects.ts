/**
 * Key objects in the token. Every private key is sign-only, sensitive and never extractable:
 * - a long-lived key (types.ts LONG_LIVED_KEYS) is a pair of token objects labelled qtsp-<role>, made by
 *   `qtsp pki init` and found by label at start;
 * - a signer key is a pair of session objects (CKA_TOKEN false), destroyed with C_DestroyObject after its
 *   request, and gone with its session in any case.
 */
import { createPublicKey, randomBytes, type KeyObject } from 'node:crypto';
import { ConfigError } from '../../config/load.ts';
import type { KeyAlgorithm } from '../../crypto/signature.ts';
import type { LongLivedKeyName } from '../types.ts';
import { pkcs11Code, pkcs11js, SETTING, type Handle, type Pkcs11Token } from './token.ts';

/** CKA_LABEL of each long-lived key pair (private and public half alike). */
export const LONG_LIVED_LABELS: Readonly<Record<LongLivedKeyName, string>> = {
  'issuing-ca': 'qtsp-issuing-ca',
  tsa: 'qtsp-tsa',
  'ocsp-responder': 'qtsp-ocsp-responder',
  'root-ocsp-responder': 'qtsp-root-ocsp-responder',
};

/** DER ECParameters namedCurve (RFC 5480 2.1.1) for CKA_EC_PARAMS, and the SPKI prefix up to the point. */
const CURVES = {
  'P-256': {
    params: Buffer.from('06082a8648ce3d030107', 'hex'),
    spkiPrefix: Buffer.from('3059301306072a8648ce3d020106082a8648ce3d030107034200', 'hex'),
    size: 32,
  },
  'P-384': {
    params: Buffer.from('06052b81040022', 'hex'),
    spkiPrefix: Buffer.from('3076301006072a8648ce3d020106052b81040022036200', 'hex'),
    size: 48,
  },
} as const;

const RSA_BITS = 3072;
const RSA_EXPONENT = Buffer.from([1, 0, 1]);

/** Templates of a sign-only key pair; `persistent` = token objects (long-lived), else session objects. */
export function keyPairTemplates(
  algorithm: KeyAlgorithm,
  persistent: boolean,
  label: string,
  id: Buffer,
): { mechanism: pkcs11js.Mechanism; publicTemplate: pkcs11js.Template; privateTemplate: pkcs11js.Template } {
  const common = [
    { type: pkcs11js.CKA_TOKEN, value: persistent },
    { type: pkcs11js.CKA_LABEL, value: label },
    { type: pkcs11js.CKA_ID, value: id },
  ];
  const privateTemplate = [
    ...common,
    { type: pkcs11js.CKA_PRIVATE, value: true },
    { type: pkcs11js.CKA_SENSITIVE, value: true },
    { type: pkcs11js.CKA_EXTRACTABLE, value: false },
    { type: pkcs11js.CKA_SIGN, value: true },
    { type: pkcs11js.CKA_SIGN_RECOVER, value: false },
    { type: pkcs11js.CKA_DECRYPT, value: false },
    { type: pkcs11js.CKA_UNWRAP, value: false },
    { type: pkcs11js.CKA_DERIVE, value: false },
  ];
  const publicCommon = [
    ...common,
    { type: pkcs11js.CKA_PRIVATE, value: false },
    { type: pkcs11js.CKA_VERIFY, value: true },
    { type: pkcs11js.CKA_ENCRYPT, value: false },
    { type: pkcs11js.CKA_WRAP, value: false },
  ];
  if (algorithm === 'RSA-3072') {
    return {
      mechanism: { mechanism: pkcs11js.CKM_RSA_PKCS_KEY_PAIR_GEN },
      publicTemplate: [
        ...publicCommon,
        { type: pkcs11js.CKA_MODULUS_BITS, value: RSA_BITS },
        { type: pkcs11js.CKA_PUBLIC_EXPONENT, value: RSA_EXPONENT },
      ],
      privateTemplate,
    };
  }
  return {
    mechanism: { mechanism: pkcs11js.CKM_EC_KEY_PAIR_GEN },
    publicTemplate: [...publicCommon, { type: pkcs11js.CKA_EC_PARAMS, value: CURVES[algorithm].params }],
    privateTemplate,
  };
}

export interface TokenKeyPair {
  readonly algorithm: KeyAlgorithm;
  readonly privateHandle: Handle;
  readonly publicHandle: Handle;
  readonly publicKey: KeyObject;
  /** connection epoch it was made in: session objects of an earlier one died with their sessions */
  readonly epoch: number;
}

/** The public key of a token key pair as a KeyObject: EC from CKA_EC_POINT, RSA from modulus and exponent. */
export function readPublicKey(
  token: Pkcs11Token,
  session: Handle,
  publicHandle: Handle,
  algorithm: KeyAlgorithm,
): KeyObject {
  const p = token.pkcs11;
  if (algorithm === 'RSA-3072') {
    const [n, e] = p.C_GetAttributeValue(session, publicHandle, [
      { type: pkcs11js.CKA_MODULUS },
      { type: pkcs11js.CKA_PUBLIC_EXPONENT },
    ]);
    return createPublicKey({
      key: { kty: 'RSA', n: n!.value.toString('base64url'), e: e!.value.toString('base64url') },
      format: 'jwk',
    });
  }
  const [point] = p.C_GetAttributeValue(session, publicHandle, [{ type: pkcs11js.CKA_EC_POINT }]);
  // CKA_EC_POINT is the DER OCTET STRING of the uncompressed point (PKCS#11 2.40 curr 2.3.3); 0x04 0x41/0x61
  const der = point!.value;
  const uncompressed = der[0] === 0x04 && der[1] === der.length - 2 ? der.subarray(2) : der;
  return createPublicKey({
    key: Buffer.concat([CURVES[algorithm].spkiPrefix, uncompressed]),
    format: 'der',
    type: 'spki',
  });
}

/** The key algorithm of a token public key: CKA_KEY_TYPE, and the curve from CKA_EC_PARAMS. */
export function readKeyAlgorithm(token: Pkcs11Token, session: Handle, publicHandle: Handle): KeyAlgorithm {
  const p = token.pkcs11;
  const [type] = p.C_GetAttributeValue(session, publicHandle, [{ type: pkcs11js.CKA_KEY_TYPE }]);
  const keyType = type!.value.readUIntLE(0, Math.min(6, type!.value.length));
  if (keyType === pkcs11js.CKK_RSA) return 'RSA-3072';
  if (keyType === pkcs11js.CKK_EC) {
    const [params] = p.C_GetAttributeValue(session, publicHandle, [{ type: pkcs11js.CKA_EC_PARAMS }]);
    for (const [name, curve] of Object.entries(CURVES))
      if (curve.params.equals(params!.value)) return name as KeyAlgorithm;
  }
  throw new ConfigError(
    `setting ${SETTING.tokenLabel}: a long-lived key in token ${JSON.stringify(token.label)} ` +
      'is neither P-256, P-384 nor RSA',
  );
}

export function findObject(
  token: Pkcs11Token,
  session: Handle,
  objectClass: number,
  label: string,
): Handle | undefined {
  const p = token.pkcs11;
  p.C_FindObjectsInit(session, [
    { type: pkcs11js.CKA_CLASS, value: objectClass },
    { type: pkcs11js.CKA_TOKEN, value: true },
    { type: pkcs11js.CKA_LABEL, value: label },
  ]);
  try {
    const found = p.C_FindObjects(session, 2);
    if (found.length > 1)
      throw new ConfigError(
        `setting ${SETTING.tokenLabel}: token ${JSON.stringify(token.label)} holds more than one key ` +
          `labelled ${label}`,
      );
    return found[0];
  } finally {
    p.C_FindObjectsFinal(session);
  }
}

/** C_GenerateKeyPair (asynchronous: off the event loop) and the public key read back. */
export async function generateTokenKeyPair(
  token: Pkcs11Token,
  session: Handle,
  pair: { algorithm: KeyAlgorithm; persistent: boolean; label: string; epoch: number },
): Promise<TokenKeyPair> {
  const { algorithm, persistent, label, epoch } = pair;
  const { mechanism, publicTemplate, privateTemplate } = keyPairTemplates(
    algorithm,
    persistent,
    label,
    randomBytes(16),
  );
  const handles = await token.pkcs11.C_GenerateKeyPairAsync(session, mechanism, publicTemplate, privateTemplate);
  try {
    return {
      algorithm,
      privateHandle: handles.privateKey,
      publicHandle: handles.publicKey,
      publicKey: readPublicKey(token, session, handles.publicKey, algorithm),
      epoch,
    };
  } catch (err) {
    destroyHandles(token, session, [handles.privateKey, handles.publicKey]);
    throw err;
  }
}

/** C_DestroyObject of each handle; one that names no object any more is gone already. */
export function destroyHandles(token: Pkcs11Token, session: Handle, handles: readonly Handle[]): void {
  for (const handle of handles) {
    try {
      token.pkcs11.C_DestroyObject(session, handle);
    } catch (err) {
      if (pkcs11Code(err) !== pkcs11js.CKR_OBJECT_HANDLE_INVALID) throw err;
    }
  }
}

/** Destroys every token object labelled `label`, private and public halves alike. */
export function destroyLabelled(token: Pkcs11Token, session: Handle, label: string): void {
  for (const objectClass of [pkcs11js.CKO_PRIVATE_KEY, pkcs11js.CKO_PUBLIC_KEY]) {
    for (
      let old = findObject(token, session, objectClass, label);
      old;
      old = findObject(token, session, objectClass, label)
    )
      token.pkcs11.C_DestroyObject(session, old);
  }
}
