/**
 * The QTSP's S/MIME mail certificate (spec 6.3: "Signing and encrypting the email is strongly recommended"):
 * <dataDir>/pki/qtsp-mail.pem / .key.pem, created on first use and issued by our mail CA (pki/mail-ca.pem, which
 * the root issued at the key ceremony), so an IDP verifies our notifications against the same root it uses for
 * our signatures; the mail carries the mail CA certificate (mailCertificateChain). Not issued by the root,
 * whose key is offline, nor by the issuing CA, whose certificate policy is qualified electronic signatures.
 * Profile (RFC 8550 4.4): rfc822Name = the sender address, keyUsage digitalSignature, EKU emailProtection.
 * A changed sender address gets a new certificate.
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import * as pkijs from 'pkijs';
import { fromPem } from '../util/base64.ts';
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
  const p = pkiPaths(dataDir);
  return { cert: p.mailCert, key: p.mailKey };
}

/** rfc822Name entries of the subjectAltName extension */
export function certificateEmails(certificate: pkijs.Certificate): string[] {
  const san = certificate.extensions?.find((e) => e.extnID === OID.subjectAltName);
  const names = (san?.parsedValue as pkijs.GeneralNames | undefined)?.names ?? [];
  return names.filter((n) => n.type === 1).map((n) => String(n.value));
}

function issueMailCertificate(ca: KeyedCertificate, address: string): SoftwareKeyedCertificate {
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
    issuer: ca.issuer,
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

/** The certificates a mail carries beside ours: the mail CA's (DER), so that a verifier needs only our root. */
export function mailCertificateChain(dataDir: string): Buffer[] {
  return fromPem(readFileSync(pkiPaths(dataDir).mailCaCert, 'utf8')).slice(0, 1);
}

/** `certificate` was signed by the mail CA (one issued by the root, before the root went offline, was not). */
function issuedBy(certificate: Buffer, ca: Buffer): boolean {
  const caCert = new X509Certificate(ca);
  const cert = new X509Certificate(certificate);
  return cert.checkIssued(caCert) && cert.verify(caCert.publicKey);
}

/** The mail certificate for `address`, created (or replaced: new address, near expiry, other issuer) by the mail CA. */
export function ensureMailCertificate(dataDir: string, address: string): KeyedCertificate {
  const paths = mailCertificatePaths(dataDir);
  const p = pkiPaths(dataDir);
  const mailCa = loadKeyed(p.mailCaCert, p.mailCaKey);
  if (existsSync(paths.cert) && existsSync(paths.key)) {
    const existing = loadKeyed(paths.cert, paths.key);
    const expired = existing.certificate.notAfter.value.getTime() < Date.now() + 24 * 3600_000;
    const current = !expired && issuedBy(existing.der, mailCa.der);
    if (current && certificateEmails(existing.certificate).includes(address)) return existing;
  }
  const created = issueMailCertificate(mailCa, address);
  saveKeyed(created, paths.cert, paths.key);
  return created;
}
