/**
 * Renewal by the service of the issuing CA's delegated OCSP responder certificate (RFC 6960 4.2.2.2): the
 * issuing CA's key is online, so the service certifies the responder's key again once its certificate comes
 * within calendar.responderRenewDays of its end (also after it ended), with the lifetime it had.
 *
 * Once across all instances on one store: the new certificate's validity and serial are a function of the old
 * one (notBefore = the moment the renewal fell due; the serial a hash of the responder's key and that moment),
 * so every instance computes the same serial; the first stores its certificate, the others find it under that
 * serial and take the stored one. OCSP responses signed before stay verifiable: each carries its certificate.
 * renewedOnce does the same for any certificate an online key of ours issues (the S/MIME mail certificate:
 * notification/mail-certificate.ts).
 */
import { createHash, X509Certificate, type KeyObject } from 'node:crypto';
import type { IssuedCertificate, Store } from '../store/types.ts';
import type { KeyedCertificate } from './authority.ts';
import { caKeyId } from './certificate-list.ts';
import { recertifyOcspResponder } from './init.ts';

const DAY_MS = 24 * 3600 * 1000;

export type CertificateRecords = Pick<Store, 'getCertificate' | 'addCertificate'>;

/** A positive 16-byte serial every instance derives alike from the certified key and the renewal moment. */
function renewalSerial(responder: X509Certificate, dueAt: Date): Buffer {
  const spki = responder.publicKey.export({ type: 'spki', format: 'der' });
  const serial = createHash('sha256').update(spki).update(dueAt.toISOString()).digest().subarray(0, 16);
  serial[0] = (serial[0]! & 0x7f) | 0x40;
  return serial;
}

/** A new certificate for the key `current` certifies, with the validity and serial given. */
export type Recertify = (
  publicKey: KeyObject,
  validity: { readonly notBefore: Date; readonly notAfter: Date },
  serial: Buffer,
) => Promise<{ der: Buffer }>;

/**
 * The renewed certificate (DER) of the key `currentDer` certifies, by `issuer`, or undefined while it is not
 * due at `now` (renewBeforeDays before its end). Stored in `records` (once across instances); taken from there
 * when another instance was first.
 */
export async function renewedOnce(
  currentDer: Buffer,
  issuer: { readonly der: Buffer },
  records: CertificateRecords,
  renewBeforeDays: number,
  now: Date,
  recertify: Recertify,
): Promise<Buffer | undefined> {
  const current = new X509Certificate(currentDer);
  const notBefore = new Date(current.validFrom);
  const notAfter = new Date(current.validTo);
  const dueAt = new Date(notAfter.getTime() - renewBeforeDays * DAY_MS);
  if (now < dueAt) return undefined;
  const serial = renewalSerial(current, dueAt);
  const serialHex = serial.toString('hex');
  const stored = await records.getCertificate(serialHex);
  if (stored) return stored.der;
  const validity = {
    notBefore: dueAt,
    notAfter: new Date(dueAt.getTime() + (notAfter.getTime() - notBefore.getTime())),
  };
  const { der } = await recertify(current.publicKey, validity, serial);
  const renewed = new X509Certificate(der);
  const record: IssuedCertificate = {
    serialHex,
    issuerKeyId: caKeyId(issuer.der).toString('hex'),
    subject: renewed.subject.split('\n').join(', '),
    notBefore: new Date(renewed.validFrom),
    notAfter: new Date(renewed.validTo),
    issuedAt: now,
    txn: null,
    der,
  };
  try {
    await records.addCertificate(record);
    return der;
  } catch (err) {
    const first = await records.getCertificate(serialHex); // another instance stored it in between
    if (!first) throw err;
    return first.der;
  }
}

/** The issuing CA's responder certificate renewed (renewedOnce), for the key it certifies. */
export function renewedResponder(
  currentDer: Buffer,
  issuing: KeyedCertificate,
  records: CertificateRecords,
  renewBeforeDays: number,
  now: Date,
): Promise<Buffer | undefined> {
  return renewedOnce(currentDer, issuing, records, renewBeforeDays, now, (publicKey, validity, serial) =>
    recertifyOcspResponder(issuing, publicKey, validity, serial),
  );
}
