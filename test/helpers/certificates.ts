/** End-entity certificates a test makes for a party the suite plays (a bank's mail key, an old data directory). */
import type { KeyObject } from 'node:crypto';
import {
  basicConstraintsExtension,
  buildName,
  extKeyUsageExtension,
  type Issuer,
  issueCertificate,
  keyUsageExtension,
  OID,
  spkiOf,
} from '../../src/ca/x509.ts';
import type * as pkijs from 'pkijs';

export interface EndEntity {
  readonly commonName: string;
  readonly publicKey: KeyObject;
  /** the issuing CA; without one, self-signed with `selfSignKey` */
  readonly issuer?: Issuer;
  readonly selfSignKey?: KeyObject;
  /** notAfter, in hours from now (negative: already ended) */
  readonly validHours: number;
  /** notBefore, in hours from now (default -1; positive: not valid yet) */
  readonly fromHours?: number;
  readonly keyUsage: Parameters<typeof keyUsageExtension>[0];
  readonly extKeyUsage: readonly string[];
  readonly extra?: readonly pkijs.Extension[];
}

/** The DER of a certificate valid from an hour ago (or fromHours) until validHours from now, not a CA. */
export function endEntityCertificate(e: EndEntity): Buffer {
  return issueCertificate({
    subject: buildName([{ type: OID.commonName, value: e.commonName }]),
    publicKey: spkiOf(e.publicKey),
    ...(e.issuer ? { issuer: e.issuer, keyIdentifiers: true } : { selfSignKey: e.selfSignKey }),
    notBefore: new Date(Date.now() + (e.fromHours ?? -1) * 3600_000),
    notAfter: new Date(Date.now() + e.validHours * 3600_000),
    extensions: [
      basicConstraintsExtension(false),
      keyUsageExtension(e.keyUsage),
      extKeyUsageExtension(e.extKeyUsage),
      ...(e.extra ?? []),
    ],
  }).der;
}
