/**
 * CA events the journal records besides the key ceremony's (docs/evidence.md; EN 319 411-1 asks for the
 * certificate and CRL life cycle on record):
 *
 * - `pki.crl_issued`: a CRL of the issuing CA, signed by the running service. It signs one whenever the second
 *   or the revocation list changed and a fetch or a B-LT signature asks (revocation/crl.ts), so the journal
 *   holds the first CRL of each list and one per refresh interval: the CRLs between two entries differ from the
 *   earlier one only in their times (number and thisUpdate follow from the second). Appended without waiting,
 *   off the signing path; a failed append is logged.
 * - `pki.certificate_renewed`: a certificate the service renewed itself (the issuing CA's OCSP responder,
 *   ca/responder-renewal.ts), journaled by the instance whose store write issued it, so once per store.
 * - the CLI's renewals at a ceremony (`pki.renewed`) and its TLS client certificate rotations
 *   (`pki.client_certificate_rotated`) describe their certificates with certificateFacts.
 */
import { createHash, X509Certificate } from 'node:crypto';
import type { IssuedCertificate, JournalStore, Store } from '../store/types.ts';
import type { CanonicalValue } from '../util/canonical-json.ts';
import type { Logger } from '../util/logger.ts';

/** What a CRL issuer reports of a CRL it signed. */
export interface IssuedCrl {
  readonly der: Buffer;
  readonly number: number;
  readonly thisUpdate: Date;
  readonly nextUpdate: Date;
  readonly revokedCount: number;
}

const sha256 = (der: Buffer) => createHash('sha256').update(der).digest('hex');

/** A certificate as the journal describes it: its name in the PKI, subject, serial, validity and SHA-256. */
export function certificateFacts(name: string, der: Buffer): { [key: string]: CanonicalValue } {
  const cert = new X509Certificate(der);
  return {
    name,
    subject: cert.subject.split('\n').join(', '),
    serialHex: cert.serialNumber.toLowerCase(),
    notBefore: new Date(cert.validFrom).toISOString(),
    notAfter: new Date(cert.validTo).toISOString(),
    sha256: sha256(der),
  };
}

/**
 * The journal's side of a CRL issuer (its `issued` option): an entry for a CRL whose list differs from the last
 * one journaled here, or issued `refreshSeconds` or more after it.
 */
export function crlJournal(
  journal: Pick<JournalStore, 'append'>,
  ca: string,
  refreshSeconds: number,
  logger: Logger,
): (crl: IssuedCrl) => void {
  let last: { count: number; at: number } | undefined;
  return (crl) => {
    const at = crl.thisUpdate.getTime();
    if (last && last.count === crl.revokedCount && at - last.at < refreshSeconds * 1000) return;
    last = { count: crl.revokedCount, at };
    journal
      .append({
        kind: 'pki.crl_issued',
        ref: null,
        at: crl.thisUpdate,
        data: {
          ca,
          crlNumber: crl.number,
          thisUpdate: crl.thisUpdate.toISOString(),
          nextUpdate: crl.nextUpdate.toISOString(),
          revoked: crl.revokedCount,
          sha256: sha256(crl.der),
        },
      })
      .catch((err: Error) =>
        logger.warn({ event: 'journal.append_failed', kind: 'pki.crl_issued', error: err.message }, 'not journaled'),
      );
  };
}

export type CertificateRecords = Pick<Store, 'getCertificate' | 'addCertificate'>;

/**
 * The store's certificate records, journaling each certificate this process adds as renewed by the service
 * (`name`: its name in the PKI). Only the instance whose insert lands journals it; a failed append is logged,
 * and the certificate stays issued.
 */
export function journaledIssuance(
  store: CertificateRecords & { readonly journal: Pick<JournalStore, 'append'> },
  name: string,
  logger: Logger,
): CertificateRecords {
  return {
    getCertificate: (serialHex) => store.getCertificate(serialHex),
    async addCertificate(record: IssuedCertificate) {
      await store.addCertificate(record);
      try {
        await store.journal.append({
          kind: 'pki.certificate_renewed',
          ref: null,
          at: record.issuedAt,
          data: { by: 'service', ...certificateFacts(name, record.der) },
        });
      } catch (err) {
        logger.warn(
          { event: 'journal.append_failed', kind: 'pki.certificate_renewed', error: (err as Error).message },
          'not journaled',
        );
      }
    },
  };
}
