/**
 * The end-user notification mail (spec 6.3 step 3): to the IDP's notification_email, carrying the original
 * iss, sub and txn of the introspection, our SP id and the message the IDP passes on to its user. Signed
 * with our mail certificate; encrypted as well when we hold an encryption certificate of that IDP.
 * Message-ID derives from the outbox id, so a retried send is recognisable as the same message.
 */
import type * as pkijs from 'pkijs';
import type { KeyedCertificate } from '../ca/authority.ts';
import { encodeHeaderText, encryptedEntity, mailDate, message, signedEntity, textPart, type Header } from './smime.ts';

export interface NotificationPayload {
  readonly txn: string;
  readonly iss: string;
  readonly sub: string;
  readonly message: string;
  /** ISO time the notification was requested */
  readonly requestedAt: string;
}

export interface NotificationMail {
  readonly id: string;
  readonly from: string;
  readonly to: string;
  readonly spId: string;
  readonly payload: NotificationPayload;
}

/** The text the IDP reads: the identifiers first, one per line, so a program can pick them out as well. */
export function notificationText(mail: NotificationMail): string {
  const p = mail.payload;
  return [
    'End-user notification from a qualified trust service provider (remote signature creation).',
    'Please pass the message below on to the user identified by sub at the issuer iss.',
    '',
    `iss: ${p.iss}`,
    `sub: ${p.sub}`,
    `txn: ${p.txn}`,
    `sp_id: ${mail.spId}`,
    `requested_at: ${p.requestedAt}`,
    '',
    'message:',
    p.message,
    '',
  ].join('\n');
}

function domainOf(address: string): string {
  return address.slice(address.lastIndexOf('@') + 1);
}

/** The raw RFC 5322 message, ready for SMTP. */
export async function composeNotification(
  mail: NotificationMail,
  signer: KeyedCertificate,
  chain: readonly Buffer[],
  recipientCertificate?: pkijs.Certificate,
): Promise<Buffer> {
  const signed = await signedEntity(textPart(notificationText(mail)), signer, chain);
  const entity = recipientCertificate ? await encryptedEntity(signed, recipientCertificate) : signed;
  const headers: Header[] = [
    ['From', mail.from],
    ['To', mail.to],
    // identifiers stay in the body: headers travel in clear even when the body is encrypted
    ['Subject', encodeHeaderText(`End-user notification from ${mail.spId}`)],
    ['Date', mailDate(new Date())],
    ['Message-ID', `<${mail.id}@${domainOf(mail.from)}>`],
    ['MIME-Version', '1.0'],
  ];
  return message(headers, entity);
}
