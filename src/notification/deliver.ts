/**
 * Delivering one end-user notification (spec 6.3): the IDP record from the IDP directory (4.6) names the
 * target address (notification_email); the signed (and, with a recipient certificate, encrypted) mail goes
 * out over SMTP with STARTTLS required, TLS 1.2+ (spec 8), sent raw through nodemailer.
 * An SMTP 5xx answer, an unknown IDP or a record without notification_email is permanent; anything else
 * (directory down, 4xx, connection trouble) is retried by the worker.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import nodemailer, { type Transporter } from 'nodemailer';
import * as pkijs from 'pkijs';
import type { KeyedCertificate } from '../ca/authority.ts';
import type { Config } from '../config/schema.ts';
import { PermanentDeliveryError, type Deliver } from '../delivery/worker.ts';
import type { OutboxEntry } from '../store/types.ts';
import type { IdpDirectory } from '../trust/idp-directory.ts';
import { fromPem } from '../util/base64.ts';
import { composeNotification, type NotificationPayload } from './compose.ts';

export interface NotificationSender {
  /** smtp://host:port or smtps://host:port */
  readonly smtpUrl: string;
  readonly from: string;
  readonly spId: string;
  /** PEM CAs trusted for the SMTP server's certificate */
  readonly ca: Buffer;
  readonly timeoutMs: number;
  /** our mail certificate as it is now (the service renews it: mail-certificate.ts) */
  readonly signer: () => KeyedCertificate;
  readonly chain: readonly Buffer[];
  /** <encodeURIComponent(iss)>.pem: the IDP's encryption certificate, when it has one */
  readonly recipientCertDir: string;
  readonly idps: Pick<IdpDirectory, 'record'>;
}

/** a plain addr-spec, nothing that could smuggle a header or a second recipient */
const ADDRESS = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?$/;

/** Where the IDPs' encryption certificates are kept (setting notification.recipientCertDir). */
export function recipientCertDir(config: Pick<Config, 'dataDir' | 'notification'>): string {
  return config.notification.recipientCertDir ?? join(config.dataDir, 'notification-recipients');
}

export function recipientCertificateFile(dir: string, iss: string): string {
  return join(dir, `${encodeURIComponent(iss)}.pem`);
}

function recipientCertificate(dir: string, iss: string): pkijs.Certificate | undefined {
  const file = recipientCertificateFile(dir, iss);
  if (!existsSync(file)) return undefined;
  const der = fromPem(readFileSync(file, 'utf8'))[0];
  if (!der) throw new PermanentDeliveryError(`no certificate in the recipient certificate file of this IDP`);
  return pkijs.Certificate.fromBER(new Uint8Array(der));
}

async function targetAddress(idps: Pick<IdpDirectory, 'record'>, iss: string): Promise<string> {
  const record = await idps.record(iss); // throws IdpDirectoryUnavailable: retried
  if (!record) throw new PermanentDeliveryError('the IDP directory knows no IDP with this issuer');
  const address = record.notification_email;
  if (typeof address !== 'string' || !ADDRESS.test(address))
    throw new PermanentDeliveryError('the IDP record has no usable notification_email');
  return address;
}

function transportOf(s: NotificationSender): Transporter {
  const url = new URL(s.smtpUrl);
  const secure = url.protocol === 'smtps:';
  return nodemailer.createTransport({
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: Number(url.port || (secure ? 465 : 587)),
    secure,
    requireTLS: !secure, // STARTTLS or nothing: the mail carries sub and txn
    tls: { ca: s.ca, minVersion: 'TLSv1.2' },
    connectionTimeout: s.timeoutMs,
    greetingTimeout: s.timeoutMs,
    socketTimeout: s.timeoutMs,
  });
}

export function notificationDeliverer(sender: NotificationSender): Deliver {
  const transport = transportOf(sender);
  return async (entry: OutboxEntry) => {
    const payload = entry.payload as NotificationPayload;
    const to = await targetAddress(sender.idps, payload.iss);
    const raw = await composeNotification(
      { id: entry.id, from: sender.from, to, spId: sender.spId, payload },
      sender.signer(),
      sender.chain,
      recipientCertificate(sender.recipientCertDir, payload.iss),
    );
    try {
      await transport.sendMail({ envelope: { from: sender.from, to: [to] }, raw });
    } catch (err) {
      const code = (err as { responseCode?: unknown }).responseCode;
      if (typeof code === 'number' && code >= 500)
        throw new PermanentDeliveryError(`the mail server refused the notification: ${(err as Error).message}`);
      throw err;
    }
  };
}
