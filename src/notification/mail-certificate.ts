/**
 * The QTSP's S/MIME mail certificate (spec 6.3: "Signing and encrypting the email is strongly recommended"):
 * <dataDir>/pki/qtsp-mail.pem / .key.pem, created on first use and issued by our mail CA (pki/mail-ca.pem, which
 * the root issued at the key ceremony), so an IDP verifies our notifications against the same root it uses for
 * our signatures; the mail carries the mail CA certificate (mailCertificateChain). Not issued by the root,
 * whose key is offline, nor by the issuing CA, whose certificate policy is qualified electronic signatures.
 * Profile (RFC 8550 4.4): rfc822Name = the sender address, keyUsage digitalSignature, EKU emailProtection.
 * A changed sender address gets a new certificate. The service renews it before its end for the same key
 * (renewedMailCertificate, once across the instances on one store: ca/responder-renewal.ts renewedOnce); every
 * deliverer signs with the certificate file as it is when it sends (mailSigner).
 */
import { X509Certificate, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { fromPem, toPem } from '../util/base64.ts';
import { renewedOnce, type CertificateRecords } from '../ca/responder-renewal.ts';
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
import type { Logger } from '../util/logger.ts';
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
  // pkijs parses subjectAltName (RFC 5280 4.2.1.6) as an AltName
  const names = (san?.parsedValue as pkijs.AltName | undefined)?.altNames ?? [];
  return names.filter((n) => n.type === 1).map((n) => String(n.value));
}

/** The mail certificate for `publicKey` (RFC 8550 4.4), with the validity and serial given (else fresh ones). */
function mailCertificateFor(
  ca: KeyedCertificate,
  publicKey: KeyObject,
  address: string,
  validity: { readonly notBefore: Date; readonly notAfter: Date },
  serial?: Buffer,
) {
  const san = new pkijs.GeneralNames({ names: [new pkijs.GeneralName({ type: 1, value: address })] });
  return issueCertificate({
    subject: buildName([
      { type: OID.countryName, value: 'DE' },
      { type: OID.organizationName, value: 'qtsp sandbox trust service' },
      { type: OID.commonName, value: 'qtsp end-user notifications' },
    ]),
    publicKey: spkiOf(publicKey),
    issuer: ca.issuer,
    ...validity,
    ...(serial ? { serial } : {}),
    extensions: [
      basicConstraintsExtension(false),
      keyUsageExtension(['digitalSignature', 'nonRepudiation']),
      extKeyUsageExtension([EMAIL_PROTECTION]),
      rawExtension(OID.subjectAltName, san.toSchema()),
    ],
    keyIdentifiers: true,
  });
}

function issueMailCertificate(ca: KeyedCertificate, address: string): SoftwareKeyedCertificate {
  const keys = generateKeyPair('P-256');
  const now = Date.now();
  const validity = { notBefore: new Date(now - 3600_000), notAfter: new Date(now + YEARS * 365 * 24 * 3600_000) };
  const { der, certificate } = mailCertificateFor(ca, keys.publicKey, address, validity);
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

/**
 * The mail certificate renewed by the mail CA for the same key and address, `renewBeforeDays` before its end
 * (renewedOnce: once across the instances on one store), written over the file; undefined while none exists,
 * none is due, or the file holds the renewed one already.
 */
export async function renewMailCertificate(
  dataDir: string,
  records: CertificateRecords,
  renewBeforeDays: number,
  now: Date,
): Promise<Buffer | undefined> {
  const paths = mailCertificatePaths(dataDir);
  if (!existsSync(paths.cert)) return undefined;
  const current = fromPem(readFileSync(paths.cert, 'utf8'))[0]!;
  const p = pkiPaths(dataDir);
  const mailCa = loadKeyed(p.mailCaCert, p.mailCaKey);
  const address = certificateEmails(pkijs.Certificate.fromBER(new Uint8Array(current)))[0] ?? '';
  const renewed = await renewedOnce(current, mailCa, records, renewBeforeDays, now, async (key, validity, serial) =>
    mailCertificateFor(mailCa, key, address, validity, serial),
  );
  if (!renewed || renewed.equals(current)) return undefined;
  writeFileSync(`${paths.cert}.renewing`, toPem(renewed, 'CERTIFICATE'));
  renameSync(`${paths.cert}.renewing`, paths.cert);
  return renewed;
}

/**
 * renewMailCertificate when due, its outcome logged; after a renewal `renewed` runs (the calendar reads the
 * files again). Every deliverer reads the renewed file when it next sends (mailSigner).
 */
export async function renewMail(
  dataDir: string,
  records: CertificateRecords,
  renewBeforeDays: number,
  renewed: () => void,
  logger: Logger,
): Promise<void> {
  try {
    if (!(await renewMailCertificate(dataDir, records, renewBeforeDays, new Date()))) return;
    logger.info({ event: 'pki.mail_certificate_renewed' }, 'renewed the S/MIME mail certificate');
    renewed();
  } catch (err) {
    logger.error({ event: 'pki.mail_renewal_failed', error: (err as Error).message }, 'mail certificate not renewed');
  }
}

/**
 * What a deliverer signs with: the mail certificate for `address` (ensureMailCertificate, at once), read again
 * whenever its file was replaced (a renewal by any instance), so no restart is needed.
 */
export function mailSigner(dataDir: string, address: string): () => KeyedCertificate {
  const { cert } = mailCertificatePaths(dataDir);
  const stampOf = () => {
    const s = statSync(cert);
    return `${s.ino}:${s.mtimeMs}:${s.size}`;
  };
  const load = () => ({ signer: ensureMailCertificate(dataDir, address), stamp: stampOf() });
  let loaded = load();
  return () => {
    if (stampOf() !== loaded.stamp) loaded = load();
    return loaded.signer;
  };
}
