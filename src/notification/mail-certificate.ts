/**
 * The QTSP's S/MIME mail certificate (spec 6.3: "Signing and encrypting the email is strongly recommended"):
 * <dataDir>/pki/qtsp-mail.pem / .key.pem, created on first use and issued by our root CA, so an IDP verifies
 * our notifications against the same root it uses for our signatures. Issued by the root rather than by the
 * issuing CA, whose certificate policy is qualified electronic signatures and not mail.
 * Profile (RFC 8550 4.4): rfc822Name = the sender address, keyUsage digitalSignature, EKU emailProtection.
 * A changed sender address gets a new certificate.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as pkijs from 'pkijs';
import { SoftwareSigningKey } from '../crypto/signature.ts';
import {
  certifiedKey,
  loadKeyed,
  saveKeyed,
  type KeyedCertificate,
  type SoftwareKeyedCertificate,
} from '../ca/authority.ts';
import { pkiPaths } from '../ca/material.ts';
import { generateKeyPair } from '../crypto/keys.ts';
import {
  basicConstraintsExtension,
  buildName,
  extKeyUsageExtension,
  issueCertificate,
  keyUsageExtension,
  OID,
  rawExtension,
  spkiOf,
} from '../ca/x509.ts';

const EMAIL_PROTECTION = '1.3.6.1.5.5.7.3.4';
const YEARS = 2;

export function mailCertificatePaths(dataDir: string): { cert: string; key: string } {
  const dir = pkiPaths(dataDir).dir;
  return { cert: join(dir, 'qtsp-mail.pem'), key: join(dir, 'qtsp-mail.key.pem') };
}

/** rfc822Name entries of the subjectAltName extension */
export function certificateEmails(certificate: pkijs.Certificate): string[] {
  const san = certificate.extensions?.find((e) => e.extnID === OID.subjectAltName);
  const names = (san?.parsedValue as pkijs.GeneralNames | undefined)?.names ?? [];
  return names.filter((n) => n.type === 1).map((n) => String(n.value));
}

function issueMailCertificate(root: KeyedCertificate, address: string): SoftwareKeyedCertificate {
  const keys = generateKeyPair('P-256');
  const now = Date.now();
  const san = new pkijs.GeneralNames({ names: [new pkijs.GeneralName({ type: 1, value: address })] });
  const { der, certificate } = issueCertificate({
    subject: buildName([
      { type: OID.countryName, value: 'DE' },
      { type: OID.organizationName, value: 'qtsp sandbox trust service' },
      { type: OID.commonName, value: 'qtsp end-user notifications' },
    ]),
    publicKey: spkiOf(keys.publicKey),
    issuer: root.issuer,
    notBefore: new Date(now - 3600_000),
    notAfter: new Date(now + YEARS * 365 * 24 * 3600_000),
    extensions: [
      basicConstraintsExtension(false),
      keyUsageExtension(['digitalSignature', 'nonRepudiation']),
      extKeyUsageExtension([EMAIL_PROTECTION]),
      rawExtension(OID.subjectAltName, san.toSchema()),
    ],
    keyIdentifiers: true,
  });
  return { ...certifiedKey(der, new SoftwareSigningKey(keys.privateKey), certificate), privateKey: keys.privateKey };
}

/** The mail certificate for `address`, created (or replaced, when the address changed) from the root CA. */
export function ensureMailCertificate(dataDir: string, address: string): KeyedCertificate {
  const paths = mailCertificatePaths(dataDir);
  if (existsSync(paths.cert) && existsSync(paths.key)) {
    const existing = loadKeyed(paths.cert, paths.key);
    const expired = existing.certificate.notAfter.value.getTime() < Date.now() + 24 * 3600_000;
    if (!expired && certificateEmails(existing.certificate).includes(address)) return existing;
  }
  const created = issueMailCertificate(loadKeyed(pkiPaths(dataDir).rootCert, pkiPaths(dataDir).rootKey), address);
  saveKeyed(created, paths.cert, paths.key);
  return created;
}
