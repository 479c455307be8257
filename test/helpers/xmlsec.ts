/**
 * The independent oracle for XAdES: xmlsec1 (Debian package xmlsec1, 1.2.x, OpenSSL backend) verifying a
 * detached signature against the document it references:
 *
 *   xmlsec1 --verify --id-attr:Id http://uri.etsi.org/01903/v1.3.2#:SignedProperties \
 *           --url-map:<document reference URI> doc.bin --trusted-pem root.pem [--untrusted-pem issuing.pem] sig.xml
 *
 * --id-attr:  without a schema xmlsec1 does not know that xades:SignedProperties/@Id is an ID, so the
 *             reference "#xades-..." would not resolve.
 * --url-map:  the document reference names the document by its digest (ni: URI, RFC 6920); the map hands
 *             xmlsec1 the bytes for it, which it digests itself and compares with the signed DigestValue.
 * --trusted-pem: the only trust anchor; the chain is built from KeyInfo (and --untrusted-pem) and checked at
 *             the current time. xmlsec1 does not judge XAdES properties or timestamps: it checks XML-DSig core
 *             validation (both references and SignatureValue) and the certificate chain.
 */
import { inScratch, run, type ToolResult } from './openssl.ts';

export const XADES_SIGNED_PROPERTIES_ID = 'http://uri.etsi.org/01903/v1.3.2#:SignedProperties';

/** The URIs of references that point outside the signature (the detached document). */
export function externalReferenceUris(xml: string): string[] {
  return [...xml.matchAll(/<ds:Reference\b[^>]*\bURI="([^"#][^"]*)"/g)].map((m) => m[1]!.replace(/&amp;/g, '&'));
}

export interface XmlsecOptions {
  readonly trustedPem: string;
  readonly untrustedPem?: string;
}

/** `runner`: how xmlsec1 is started (another clock: test/helpers/moved-clock.ts) */
export function xmlsecVerify(
  signatureXml: Uint8Array,
  document: Uint8Array,
  options: XmlsecOptions,
  runner: (cmd: string, args: readonly string[]) => Promise<ToolResult> = run,
): Promise<ToolResult> {
  return inScratch(async (s) => {
    const doc = s.file('doc.bin', document);
    const maps = externalReferenceUris(Buffer.from(signatureXml).toString('utf8')).flatMap((uri) => [
      `--url-map:${uri}`,
      doc,
    ]);
    const untrusted = options.untrustedPem ? ['--untrusted-pem', options.untrustedPem] : [];
    return runner('xmlsec1', [
      '--verify',
      '--id-attr:Id',
      XADES_SIGNED_PROPERTIES_ID,
      ...maps,
      '--trusted-pem',
      options.trustedPem,
      ...untrusted,
      s.file('sig.xml', signatureXml),
    ]);
  });
}
