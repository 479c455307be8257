/**
 * S/MIME 4.0 (RFC 8551) for the end-user notification (spec 6.3), written by hand because nodemailer has no
 * S/MIME: the message is composed here and sent raw.
 *   signed:    multipart/signed; protocol="application/pkcs7-signature"; micalg=sha-256 (RFC 8551 3.5.3),
 *              a detached CMS SignedData over the inner MIME part exactly as transmitted (CRLF line ends,
 *              base64 body, so no transport can alter it), built with our CMS parts (crypto/cms.ts:
 *              DER-sorted signed attributes, signing-certificate-v2).
 *   encrypted: application/pkcs7-mime; smime-type=enveloped-data (RFC 8551 3.3), pkijs EnvelopedData with
 *              AES-256-CBC around the whole signed entity (sign, then encrypt: 3.6).
 */
import { createHash, randomBytes } from 'node:crypto';
import * as pkijs from 'pkijs';
import { SHA256 } from '../crypto/algorithms.ts';
import { baselineSignedAttributes, encodeSignedData, signerInfo, signSignerInfo } from '../crypto/cms.ts';
import type { KeyedCertificate } from '../ca/authority.ts';

const CRLF = '\r\n';

export type Header = readonly [name: string, value: string];

/** base64 in lines of 76 characters (RFC 2045 6.8), CRLF-separated, no trailing line break */
export function base64Lines(data: Uint8Array): string {
  return (
    Buffer.from(data)
      .toString('base64')
      .match(/.{1,76}/g) ?? []
  ).join(CRLF);
}

/** A header value must be one line: no CR or LF can come in from the data that fills it (header injection). */
function headerLine([name, value]: Header): string {
  if (/[\r\n]/.test(name) || /[\r\n]/.test(value)) throw new TypeError(`header ${name} must not contain line breaks`);
  return `${name}: ${value}`;
}

/** RFC 2047 encoded-word for a header value that is not plain ASCII. */
export function encodeHeaderText(text: string): string {
  return /^[\x20-\x7e]*$/.test(text) ? text : `=?UTF-8?B?${Buffer.from(text, 'utf8').toString('base64')}?=`;
}

/** A MIME entity: headers, empty line, body; CRLF throughout (the canonical form RFC 8551 3.1.1 signs). */
export function mimeEntity(headers: readonly Header[], body: string): Buffer {
  return Buffer.from(headers.map(headerLine).join(CRLF) + CRLF + CRLF + body, 'utf8');
}

/** text/plain in UTF-8, base64-encoded: 7-bit safe, and immune to trailing-space or line-length rewriting. */
export function textPart(text: string): Buffer {
  const canonical = text.replace(/\r?\n/g, CRLF);
  return mimeEntity(
    [
      ['Content-Type', 'text/plain; charset=utf-8'],
      ['Content-Transfer-Encoding', 'base64'],
    ],
    base64Lines(Buffer.from(canonical, 'utf8')),
  );
}

function boundary(): string {
  return `----=_qtsp_${randomBytes(12).toString('hex')}`;
}

/** Detached CMS SignedData over `content` with SHA-256 (micalg=sha-256), our certificate and its chain inside. */
export async function detachedSignature(
  content: Uint8Array,
  signer: KeyedCertificate,
  chain: readonly Buffer[],
  signingTime: Date,
): Promise<Buffer> {
  const hash = createHash('sha256').update(content).digest();
  const signed = await signSignerInfo({
    hashAlgorithm: SHA256,
    signerCertificate: signer,
    key: signer.key,
    signedAttributes: baselineSignedAttributes({ hash, signerCertificate: signer, signingTime }),
  });
  return encodeSignedData({
    hashAlgorithm: SHA256,
    signerInfo: signerInfo(signed),
    certificates: [signer.der, ...chain],
  });
}

/** multipart/signed around `part` (RFC 8551 3.5.3): the signature covers `part` byte for byte. */
export async function signedEntity(
  part: Buffer,
  signer: KeyedCertificate,
  chain: readonly Buffer[],
  signingTime = new Date(),
): Promise<Buffer> {
  const b = boundary();
  const signature = await detachedSignature(part, signer, chain, signingTime);
  const head = mimeEntity(
    [['Content-Type', `multipart/signed; protocol="application/pkcs7-signature"; micalg=sha-256; boundary="${b}"`]],
    `This is a cryptographically signed message in MIME format.${CRLF}${CRLF}--${b}${CRLF}`,
  );
  const signaturePart = mimeEntity(
    [
      ['Content-Type', 'application/pkcs7-signature; name="smime.p7s"'],
      ['Content-Transfer-Encoding', 'base64'],
      ['Content-Disposition', 'attachment; filename="smime.p7s"'],
    ],
    base64Lines(signature),
  );
  return Buffer.concat([
    head,
    part,
    Buffer.from(`${CRLF}--${b}${CRLF}`),
    signaturePart,
    Buffer.from(`${CRLF}--${b}--${CRLF}`),
  ]);
}

/** application/pkcs7-mime enveloped-data around `entity`, for the holder of `recipient` (RSA: OAEP; EC: ECDH). */
export async function encryptedEntity(entity: Buffer, recipient: pkijs.Certificate): Promise<Buffer> {
  const enveloped = new pkijs.EnvelopedData();
  enveloped.addRecipientByCertificate(recipient, { oaepHashAlgorithm: 'SHA-256', kdfAlgorithm: 'SHA-256' });
  await enveloped.encrypt({ name: 'AES-CBC', length: 256 } as Algorithm, new Uint8Array(entity).buffer);
  const contentInfo = new pkijs.ContentInfo({
    contentType: pkijs.ContentInfo.ENVELOPED_DATA,
    content: enveloped.toSchema(),
  });
  return mimeEntity(
    [
      ['Content-Type', 'application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"'],
      ['Content-Transfer-Encoding', 'base64'],
      ['Content-Disposition', 'attachment; filename="smime.p7m"'],
    ],
    base64Lines(new Uint8Array(contentInfo.toSchema().toBER())),
  );
}

/** The whole message: the envelope headers (From, To, ...) followed by the top entity's own headers and body. */
export function message(headers: readonly Header[], entity: Buffer): Buffer {
  return Buffer.concat([Buffer.from(headers.map(headerLine).join(CRLF) + CRLF, 'utf8'), entity]);
}

/** RFC 5322 3.3 date-time in UTC: "Tue, 05 Mar 2024 10:00:00 +0000" */
export function mailDate(date: Date): string {
  return date.toUTCString().replace(/GMT$/, '+0000');
}
