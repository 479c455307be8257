/**
 * The calendar of the long-lived material (EN 319 411-1 6.3, 6.4; EN 319 421 7.6): every certificate and CRL
 * in <dataDir>/pki that ends on a fixed date, with its issuer, its end (notAfter, or a CRL's nextUpdate), the
 * end of its key's usage period where one applies, how it is renewed, and whether a signature depends on it.
 * Read from the files alone (no key, no custody), so `qtsp pki status` works beside a running service and the
 * service can read it again after a ceremony (calendar-watch.ts).
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import * as pkijs from 'pkijs';
import { fromPem } from '../util/base64.ts';
import { loadSignerKeys } from '../trust/key-archive.ts';
import { pkiPaths } from './material.ts';
import { retiredFiles, retiredGenerations } from './issuing-generations.ts';

/** Who renews an object: the running service, a key ceremony with the root key, or the operator by hand. */
export type RenewedBy = 'service' | 'ceremony' | 'operator';

export interface CalendarEntry {
  /** stable name: the metrics label and what `qtsp pki status` prints first */
  readonly object: string;
  /** what it is, in words */
  readonly title: string;
  readonly file: string;
  readonly issuer: string;
  /** a certificate's notAfter, a CRL's nextUpdate */
  readonly endsAt: Date;
  /** an X.509 notAfter, a CRL's nextUpdate, an OpenPGP key's expiration */
  readonly endField: 'notAfter' | 'nextUpdate' | 'expires';
  /** the end of the key's usage period, where it ends before the certificate does */
  readonly keyUsageEndsAt?: Date;
  readonly renewedBy: RenewedBy;
  /** the command (or the operator's action) that renews it */
  readonly renew: string;
  /** how it is renewed once it has ended, where that differs (an expired certificate cannot authenticate) */
  readonly renewWhenEnded?: string;
  /** its end is expected and needs no renewal (a retired CA): not counted as expired */
  readonly lapses?: boolean;
  /** a signature we return depends on it: once it has ended, the service is not ready and signDoc refuses */
  readonly signing: boolean;
}

/** What the calendar reads besides <dataDir>/pki. */
export interface CalendarSources {
  readonly dataDir: string;
  /** our TLS client certificate toward the banks (client.certFile) */
  readonly clientCertFile: string;
  /** our HTTPS server certificate (server.tlsCertFile); listed when the file exists */
  readonly serverCertFile?: string;
  /** how long a signer certificate is valid (signer.validitySeconds): the issuing CA signs none that outlives it */
  readonly signerValiditySeconds: number;
  /** how long a TSU key is used after its certificate's notBefore (calendar.tsuKeyUsageDays) */
  readonly tsuKeyUsageDays: number;
}

const DAY_MS = 24 * 3600 * 1000;

/** The end of a TSU key's usage period (EN 319 421 7.6): `days` after its certificate's notBefore. */
export function tsuKeyUsageEnd(notBefore: Date, days: number): Date {
  return new Date(notBefore.getTime() + days * DAY_MS);
}

/** A renewal at a key ceremony with the root key (ca/renewal.ts). */
export const CEREMONY_RENEW = 'qtsp pki ceremony --renew --ceremony-dir DIR';

/**
 * An expired TLS client certificate cannot authenticate the rotation at the SP directory: a new one is
 * registered with the platform's registration credential, which our operator holds out of band
 * (client-certificate.ts).
 */
export const CLIENT_CERT_REGISTER =
  "qtsp pki client-cert --register [--credential-file FILE] (the platform's registration credential; " +
  'the expired certificate cannot authenticate --rotate)';

/**
 * Our HTTPS server certificate comes from the operator's TLS CA (the sandbox's TLS CA in the sandbox), not from
 * the root: a new pair in place, the key first, and every instance serves it from its next handshake.
 */
export const SERVER_CERT_RENEW =
  'a new certificate from your TLS CA written over server.tlsKeyFile, then server.tlsCertFile (no restart)';

/** An X.509 certificate file as a calendar entry. */
function certificateEntry(file: string, fields: CertificateFields, keyUsage?: KeyUsageEnd): CalendarEntry {
  const der = fromPem(readFileSync(file, 'utf8'))[0];
  if (!der) throw new Error(`no certificate in ${file}`);
  const x = new X509Certificate(der);
  const endsAt = new Date(x.validTo);
  const keyUsageEndsAt = keyUsage?.(new Date(x.validFrom), endsAt);
  return {
    ...fields,
    file,
    issuer: oneLine(x.issuer),
    endsAt,
    endField: 'notAfter',
    ...(keyUsageEndsAt && keyUsageEndsAt < endsAt ? { keyUsageEndsAt } : {}),
  };
}

/** The root CRL of the ceremony (DER): its nextUpdate; the issuer is the root certificate's subject. */
function crlEntry(file: string, rootCertFile: string): CalendarEntry {
  const crl = pkijs.CertificateRevocationList.fromBER(new Uint8Array(readFileSync(file)));
  const nextUpdate = crl.nextUpdate?.value;
  if (!nextUpdate) throw new Error(`the CRL ${file} has no nextUpdate`);
  const root = fromPem(readFileSync(rootCertFile, 'utf8'))[0];
  return {
    object: 'root-crl',
    title: 'root CRL (status of the issuing CA, TSA and mail CA)',
    file,
    issuer: root ? oneLine(new X509Certificate(root).subject) : 'the root CA',
    endsAt: nextUpdate,
    endField: 'nextUpdate',
    renewedBy: 'ceremony',
    renew: CEREMONY_RENEW,
    signing: true,
  };
}

const oneLine = (name: string) => name.split('\n').join(', ');

type CertificateFields = Omit<CalendarEntry, 'file' | 'issuer' | 'endsAt' | 'endField' | 'keyUsageEndsAt'>;

/** The certificates of the material above the root CRL: file, what it is, and its key usage end where it has one. */
function hierarchy(sources: CalendarSources): [string, CertificateFields, KeyUsageEnd?][] {
  const p = pkiPaths(sources.dataDir);
  return [
    [
      p.rootCert,
      {
        object: 'root-ca',
        title: 'root CA',
        renewedBy: 'ceremony',
        renew: 'a new root at a ceremony, distributed to relying parties and trust lists',
        signing: true,
      },
    ],
    [
      p.issuingCert,
      {
        object: 'issuing-ca',
        title: 'issuing CA (signer certificates)',
        renewedBy: 'ceremony',
        renew: 'issuing CA rollover at a ceremony',
        signing: true,
      },
      // no signer certificate may outlive its CA
      (_, notAfter) => new Date(notAfter.getTime() - sources.signerValiditySeconds * 1000),
    ],
    [
      p.tsaCert,
      { object: 'tsa', title: 'TSA certificate (time-stamping unit)', ...atCeremony },
      // EN 319 421 7.6: the TSU key's usage period ends well before its certificate, which must still verify
      (notBefore) => tsuKeyUsageEnd(notBefore, sources.tsuKeyUsageDays),
    ],
    [
      p.ocspCert,
      {
        object: 'ocsp-responder',
        title: "issuing CA's delegated OCSP responder",
        renewedBy: 'service',
        renew: `the service, calendar.responderRenewDays before its end (or ${CEREMONY_RENEW})`,
        signing: true,
      },
    ],
    [p.rootOcspCert, { object: 'root-ocsp-responder', title: "root's delegated OCSP responder", ...atCeremony }],
  ];
}

type KeyUsageEnd = (notBefore: Date, notAfter: Date) => Date;

const atCeremony = { renewedBy: 'ceremony', renew: CEREMONY_RENEW, signing: true } as const;

/** The certificates below the root CRL: our TLS client certificate and the mail side. */
function beside(sources: CalendarSources): [string, CertificateFields][] {
  const p = pkiPaths(sources.dataDir);
  const listed: [string, CertificateFields][] = [
    [
      sources.clientCertFile,
      {
        object: 'tls-client',
        title: 'our TLS client certificate (introspection at the banks)',
        renewedBy: 'operator',
        renew: 'qtsp pki client-cert --rotate, then --retire once every instance has switched',
        renewWhenEnded: CLIENT_CERT_REGISTER,
        // the banks refuse an expired client certificate: no introspection, no signature
        signing: true,
      },
    ],
    [
      p.mailCaCert,
      {
        object: 'mail-ca',
        title: 'mail CA (S/MIME notifications)',
        renewedBy: 'ceremony',
        renew: 'a new mail CA at a ceremony',
        signing: false,
      },
    ],
  ];
  if (sources.serverCertFile && existsSync(sources.serverCertFile))
    listed.push([
      sources.serverCertFile,
      {
        object: 'tls-server',
        title: 'our HTTPS server certificate (the signDoc listener)',
        renewedBy: 'operator',
        renew: SERVER_CERT_RENEW,
        // relying parties refuse an expired server certificate: no signDoc reaches us
        signing: true,
      },
    ]);
  // made by the service at its first notification
  if (existsSync(p.mailCert))
    listed.push([
      p.mailCert,
      {
        object: 'mail-certificate',
        title: 'S/MIME mail certificate',
        renewedBy: 'service',
        renew: 'the service, calendar.mailRenewDays before its end',
        signing: false,
      },
    ]);
  return listed;
}

/** Every long-lived object of the material, in the order of the hierarchy. */
export function pkiCalendar(sources: CalendarSources): CalendarEntry[] {
  const p = pkiPaths(sources.dataDir);
  return [
    ...hierarchy(sources).map(([file, fields, keyUsage]) => certificateEntry(file, fields, keyUsage)),
    crlEntry(p.rootCrl, p.rootCert),
    ...retiredCalendar(sources.dataDir), // issuing CAs a rollover retired, while they answer for theirs
    ...beside(sources).map(([file, fields]) => certificateEntry(file, fields)),
  ];
}

/**
 * The key archive's trust anchors (trust.keyArchiveSignerKeyFile, OpenPGP) that expire: once one has, commits
 * it signed no longer verify and AS keys come from jwks_uri alone. Keys without an expiration are not listed.
 */
export async function keyArchiveAnchors(signerKeyFile: string): Promise<CalendarEntry[]> {
  const keys = await loadSignerKeys(signerKeyFile);
  const entries: CalendarEntry[] = [];
  for (const key of keys) {
    const expires = await key.getExpirationTime();
    if (!(expires instanceof Date)) continue; // Infinity: never; null: unusable already, refused elsewhere
    entries.push({
      object: `key-archive-signer-${key.getKeyID().toHex()}`,
      title: "key archive operator's OpenPGP key (trust anchor of the AS keys)",
      file: signerKeyFile,
      issuer: key.getUserIDs().join(', ') || 'self-signed',
      endsAt: expires,
      endField: 'expires',
      renewedBy: 'operator',
      renew: "the operator's new key installed as trust.keyArchiveSignerKeyFile",
      signing: false,
    });
  }
  return entries;
}

/** Whole days from `now` until `at` (negative once past). */
export function daysLeft(at: Date, now: Date): number {
  return Math.floor((at.getTime() - now.getTime()) / DAY_MS);
}

/** The earlier of an object's end and its key's usage end: what warnings and renewal plans count down to. */
export function deadlineOf(entry: CalendarEntry): { at: Date; what: string } {
  return entry.keyUsageEndsAt && entry.keyUsageEndsAt < entry.endsAt
    ? { at: entry.keyUsageEndsAt, what: 'key usage period' }
    : { at: entry.endsAt, what: entry.endField };
}

/** Whether an object has ended at `now`: its end, or its key's usage period (the key signs nothing after it). */
export function hasEnded(entry: CalendarEntry, now: Date): boolean {
  return deadlineOf(entry).at.getTime() <= now.getTime();
}

/** The entries a signature depends on that have ended at `now`. */
export function endedForSigning(entries: readonly CalendarEntry[], now: Date): CalendarEntry[] {
  return entries.filter((e) => e.signing && hasEnded(e, now));
}

/** The entries that have ended at `now` and need renewing (what `qtsp pki status` counts as expired). */
export function expired(entries: readonly CalendarEntry[], now: Date): CalendarEntry[] {
  return entries.filter((e) => !e.lapses && hasEnded(e, now));
}

/** How an entry is renewed from here: once it has ended, the way back that still works. */
export function renewalOf(entry: CalendarEntry, now: Date): string {
  return hasEnded(entry, now) && entry.renewWhenEnded ? entry.renewWhenEnded : entry.renew;
}

/** One line naming an ended object, what ended, and what renews it (readiness reasons, the signDoc log detail). */
export function endedReason(entry: CalendarEntry): string {
  const { at, what } = deadlineOf(entry);
  return (
    `expired: ${entry.object} (${entry.title}) ${what} ${at.toISOString()}; ` +
    `renew: ${entry.renewWhenEnded ?? entry.renew}`
  );
}

/**
 * The issuing CAs a rollover retired (ca/rollover.ts), each CA and its responder until they end. No new
 * signature depends on them (signing false); OCSP and CRLs for the certificates they issued do.
 */
function retiredCalendar(dataDir: string): CalendarEntry[] {
  return retiredGenerations(dataDir).flatMap((record) => {
    const files = retiredFiles(dataDir, record.tag);
    const destroy = `qtsp pki ceremony --destroy-issuing-ca ${record.tag}`;
    const fields = (object: string, title: string, renew: string): CertificateFields => ({
      object,
      title,
      renewedBy: 'ceremony',
      renew,
      signing: false,
      lapses: true,
    });
    const kept = record.destroyedAt ? `key destroyed ${record.destroyedAt}` : 'key kept';
    return [
      certificateEntry(
        files.cert,
        fields(
          `issuing-ca-${record.tag}`,
          `retired issuing CA (${kept}; status of the certificates it issued)`,
          record.destroyedAt
            ? 'none: its final CRL and responder certificate last until it ends'
            : `${destroy} once its last certificate has expired`,
        ),
      ),
      certificateEntry(
        files.responderCert,
        fields(
          `ocsp-responder-${record.tag}`,
          "retired issuing CA's delegated OCSP responder",
          record.destroyedAt
            ? 'none: certified until the retired CA ends'
            : `${destroy} certifies it until the CA ends`,
        ),
      ),
    ];
  });
}
