/**
 * The relying party's PDF side of PAdES (ETSI EN 319 142-1; ISO 32000-2 12.8): a signature placeholder with
 * SubFilter ETSI.CAdES.detached, the bytes its /ByteRange covers (only their hash goes to signDoc), the CMS
 * embedded into /Contents; for B-LT a /DSS dictionary (Certs, OCSPs, CRLs; 5.4.2); for B-LTA a document
 * time-stamp (/Type /DocTimeStamp, SubFilter ETSI.RFC3161; 5.5). Every step is an incremental update
 * (pdf-increment.ts), so signatures already in the file stay valid.
 *
 * Libraries: @signpdf/placeholder-pdf-lib adds the signature dictionary, widget and AcroForm entries;
 * @signpdf/signpdf fills in /ByteRange, hands over the covered bytes and embeds the CMS. Both are used
 * through prepare(): SignPdf.sign() wants the CMS from inside one call, we need the hash first (it goes into
 * the PAR, spec 2.7) and the CMS only after the whole flow.
 */
import { createHash } from 'node:crypto';
import { pdflibAddPlaceholder } from '@signpdf/placeholder-pdf-lib';
import { SignPdf } from '@signpdf/signpdf';
import { DEFAULT_BYTE_RANGE_PLACEHOLDER, Signer, SUBFILTER_ETSI_CADES_DETACHED } from '@signpdf/utils';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import {
  decodePDFRawStream,
  PDFArray,
  PDFDict,
  PDFHexString,
  PDFName,
  PDFRawStream,
  PDFString,
  type PDFDocument,
  type PDFRef,
} from 'pdf-lib';
import { PdfFormatError, PdfIncrement } from './pdf-increment.ts';

export { PdfFormatError } from './pdf-increment.ts';

/**
 * Space reserved for the CMS in /Contents, in bytes (the placeholder holds twice as many hex digits). Our PAdES
 * CMS never carries revocation data (they go into the DSS, EN 319 142-1 5.4.2), so its size is predictable: a
 * few KB, the signer chain and from B-T on the time-stamp token (test/integration/pades.test.ts prints the
 * sizes). 16 KB leaves room for RSA CA and TSA chains.
 */
export const SIGNATURE_CONTENTS_BYTES = 16_384;
/** The same for a document time-stamp token (TSA certificate chain included). */
export const TIMESTAMP_CONTENTS_BYTES = 8_192;
const SUBFILTER_ETSI_RFC3161 = 'ETSI.RFC3161';
const OID_SIGNATURE_TIME_STAMP = '1.2.840.113549.1.9.16.2.14';

export interface PreparedPdf {
  /** the bytes the /ByteRange covers: hash them and send only the hash */
  readonly covered: Buffer;
  /** embeds the CMS (or time-stamp token) into /Contents and returns the finished PDF */
  complete(contents: Buffer): Promise<Buffer>;
}

/**
 * SignPdf.sign() in two halves. It calls the signer with the covered bytes and waits for the CMS; the
 * promise it waits on is settled by complete().
 */
async function prepare(withPlaceholder: Buffer): Promise<PreparedPdf> {
  let handOver!: (covered: Buffer) => void;
  const covered = new Promise<Buffer>((resolve) => (handOver = resolve));
  let supply!: (contents: Buffer) => void;
  const contents = new Promise<Buffer>((resolve) => (supply = resolve));
  class DeferredSigner extends Signer {
    override async sign(bytes: Buffer): Promise<Buffer> {
      handOver(bytes);
      return contents;
    }
  }
  const signed = new SignPdf().sign(withPlaceholder, new DeferredSigner());
  // SignPdf fails before calling the signer when the placeholder is missing: surface that here
  const bytes = await Promise.race([
    covered,
    signed.then(() => Promise.reject(new Error('SignPdf finished without asking for a signature'))),
  ]);
  return {
    covered: bytes,
    complete: async (der) => {
      supply(der);
      return signed;
    },
  };
}

/** A field name not yet used by a top-level AcroForm field (field names must be unique, ISO 32000-1 12.7.3.2). */
function freeFieldName(doc: PDFDocument, prefix: string): string {
  const fields = doc.catalog.lookupMaybe(PDFName.of('AcroForm'), PDFDict)?.lookupMaybe(PDFName.of('Fields'), PDFArray);
  const taken = new Set<string>();
  for (let i = 0; i < (fields?.size() ?? 0); i++) {
    const t = fields!.lookupMaybe(i, PDFDict)?.lookupMaybe(PDFName.of('T'), PDFString, PDFHexString);
    if (t) taken.add(t.decodeText());
  }
  let n = 1;
  while (taken.has(`${prefix}${n}`)) n++;
  return `${prefix}${n}`;
}

/** The field the placeholder library just added (the last of AcroForm /Fields), renamed to a free name. */
function lastField(doc: PDFDocument, name: string): PDFDict {
  const fields = doc.catalog.lookup(PDFName.of('AcroForm'), PDFDict).lookup(PDFName.of('Fields'), PDFArray);
  const widget = fields.lookup(fields.size() - 1, PDFDict);
  widget.set(PDFName.of('T'), PDFString.of(name));
  return widget;
}

export interface SignatureOptions {
  /** the claimed signing time, /M (PAdES: the CMS carries no signing-time, EN 319 142-1 5.4) */
  readonly signingTime?: Date;
  readonly reason?: string;
  readonly location?: string;
  readonly contactInfo?: string;
}

/** Adds an invisible ETSI.CAdES.detached signature field as an incremental update. */
export async function prepareSignature(pdf: Buffer, options: SignatureOptions = {}): Promise<PreparedPdf> {
  const increment = await PdfIncrement.open(pdf);
  const name = freeFieldName(increment.doc, 'Signature');
  pdflibAddPlaceholder({
    pdfDoc: increment.doc,
    reason: options.reason ?? '',
    contactInfo: options.contactInfo ?? '',
    name: '', // the signer's name is in the certificate, which the QTSP mints only when it signs
    location: options.location ?? '',
    signingTime: options.signingTime ?? new Date(),
    signatureLength: SIGNATURE_CONTENTS_BYTES * 2,
    subFilter: SUBFILTER_ETSI_CADES_DETACHED,
  });
  lastField(increment.doc, name);
  return prepare(increment.write());
}

/**
 * Adds a document time-stamp field (ISO 32000-2 12.8.5; EN 319 142-1 5.5) as an incremental update: the
 * placeholder library's field, widget and AcroForm entries, with its signature dictionary replaced by a
 * DocTimeStamp dictionary (Type, Filter, SubFilter ETSI.RFC3161, ByteRange, Contents; no /M, /Name: the
 * token carries the time and the TSA).
 */
export async function prepareDocumentTimestamp(pdf: Buffer): Promise<PreparedPdf> {
  const increment = await PdfIncrement.open(pdf);
  const { doc } = increment;
  const name = freeFieldName(doc, 'Timestamp');
  pdflibAddPlaceholder({
    pdfDoc: doc,
    reason: '',
    contactInfo: '',
    name: '',
    location: '',
    subFilter: SUBFILTER_ETSI_RFC3161,
  });
  const widget = lastField(doc, name);
  const placeholder = PDFName.of(DEFAULT_BYTE_RANGE_PLACEHOLDER);
  const dict = doc.context.obj({
    Type: 'DocTimeStamp',
    Filter: 'Adobe.PPKLite',
    SubFilter: SUBFILTER_ETSI_RFC3161,
    ByteRange: [0, placeholder, placeholder, placeholder], // ByteRange before Contents: SignPdf looks in that order
    Contents: PDFHexString.of('0'.repeat(TIMESTAMP_CONTENTS_BYTES * 2)),
  });
  doc.context.assign(widget.get(PDFName.of('V')) as PDFRef, dict);
  return prepare(increment.write());
}

// ---------------------------------------------------------------------------------------------------------
// Document Security Store (EN 319 142-1 5.4.2: B-LT; ISO 32000-2 12.8.4.3)

export interface ValidationMaterial {
  /** DER certificates */
  readonly certificates: readonly Buffer[];
  /** DER OCSPResponse */
  readonly ocsps: readonly Buffer[];
  /** DER CertificateList */
  readonly crls: readonly Buffer[];
}

const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('base64');

function streamBytes(stream: unknown): Uint8Array | undefined {
  return stream instanceof PDFRawStream ? decodePDFRawStream(stream).decode() : undefined;
}

/** The array `key` of the DSS (created when missing), and the hashes of what it already holds. */
function dssArray(doc: PDFDocument, dss: PDFDict, key: string): { array: PDFArray; present: Set<string> } {
  let array = dss.lookupMaybe(PDFName.of(key), PDFArray);
  if (!array) {
    array = doc.context.obj([]);
    dss.set(PDFName.of(key), array);
  }
  const present = new Set<string>();
  for (let i = 0; i < array.size(); i++) {
    const bytes = streamBytes(array.lookup(i));
    if (bytes) present.add(sha256(bytes));
  }
  return { array, present };
}

/**
 * Adds the validation material to the DSS (created when absent, extended without duplicates when an earlier
 * signature left one) as an incremental update. Each item is one Flate-compressed stream holding the DER.
 */
export async function addDss(pdf: Buffer, material: ValidationMaterial): Promise<Buffer> {
  const increment = await PdfIncrement.open(pdf);
  const { doc } = increment;
  let dss = doc.catalog.lookupMaybe(PDFName.of('DSS'), PDFDict);
  if (!dss) {
    dss = doc.context.obj({ Type: 'DSS' });
    doc.catalog.set(PDFName.of('DSS'), doc.context.register(dss));
  }
  const groups: [string, readonly Buffer[]][] = [
    ['Certs', material.certificates],
    ['OCSPs', material.ocsps],
    ['CRLs', material.crls],
  ];
  for (const [key, items] of groups) {
    if (items.length === 0) continue;
    const { array, present } = dssArray(doc, dss, key);
    for (const der of items) {
      if (present.has(sha256(der))) continue;
      present.add(sha256(der));
      array.push(doc.context.register(doc.context.flateStream(der)));
    }
  }
  return increment.write();
}

/** The DSS of a PDF as DER items (empty lists when there is none). */
export async function readDss(pdf: Buffer): Promise<ValidationMaterial> {
  const increment = await PdfIncrement.open(pdf);
  const dss = increment.doc.catalog.lookupMaybe(PDFName.of('DSS'), PDFDict);
  const items = (key: string) => {
    const array = dss?.lookupMaybe(PDFName.of(key), PDFArray);
    const out: Buffer[] = [];
    for (let i = 0; i < (array?.size() ?? 0); i++) {
      const bytes = streamBytes(array!.lookup(i));
      if (bytes) out.push(Buffer.from(bytes));
    }
    return out;
  };
  return { certificates: items('Certs'), ocsps: items('OCSPs'), crls: items('CRLs') };
}

// ---------------------------------------------------------------------------------------------------------
// Reading signatures back (for the DSS and for checks)

export interface PdfSignature {
  readonly subFilter: string;
  readonly byteRange: readonly [number, number, number, number];
  /** the DER in /Contents, without the zero padding */
  readonly contents: Buffer;
  /** the bytes the /ByteRange covers */
  readonly covered: Buffer;
}

/** DER length of a TLV at the start of `der`, to cut the zero padding after the CMS off exactly. */
function derLength(der: Buffer): number {
  const decoded = asn1js.fromBER(new Uint8Array(der).buffer);
  if (decoded.offset === -1) throw new PdfFormatError('signature /Contents is not DER');
  return decoded.offset;
}

/** Every signature and document time-stamp in the file, in the order of their dictionaries. */
export function readSignatures(pdf: Buffer): PdfSignature[] {
  const out: PdfSignature[] = [];
  const text = pdf.toString('latin1');
  const pattern = /\/ByteRange\s*\[\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\]/g;
  for (let m = pattern.exec(text); m; m = pattern.exec(text)) {
    const [a, b, c, d] = m.slice(1, 5).map(Number) as [number, number, number, number];
    if (a + b > c || c + d > pdf.length || pdf[b] !== 0x3c || pdf[c - 1] !== 0x3e)
      throw new PdfFormatError('a /ByteRange does not frame a hex string');
    const hex = Buffer.from(text.slice(b + 1, c - 1), 'hex');
    const dictStart = text.lastIndexOf('<<', m.index);
    const subFilter = /\/SubFilter\s*\/([^\s/>]+)/.exec(text.slice(dictStart, c + 200))?.[1] ?? '';
    out.push({
      subFilter,
      byteRange: [a, b, c, d],
      contents: hex.subarray(0, derLength(hex)),
      covered: Buffer.concat([pdf.subarray(a, a + b), pdf.subarray(c, c + d)]),
    });
  }
  return out;
}

/** SignedData of a DER ContentInfo. */
function signedDataOf(der: Uint8Array<ArrayBuffer>): pkijs.SignedData {
  return new pkijs.SignedData({ schema: pkijs.ContentInfo.fromBER(der).content });
}

/**
 * The certificates a CMS carries, and those of the time-stamp tokens in its signature-time-stamp attributes
 * (RFC 3161 tokens are CMS themselves): what the DSS /Certs needs to validate the signature offline.
 */
export function cmsCertificates(cms: Uint8Array): Buffer[] {
  const signedData = signedDataOf(new Uint8Array(cms)); // a copy: BufferSource wants an ArrayBuffer-backed view
  const own = (signedData.certificates ?? []).flatMap((c) =>
    c instanceof pkijs.Certificate ? [Buffer.from(c.toSchema().toBER())] : [],
  );
  const tokens = signedData.signerInfos.flatMap((si) =>
    (si.unsignedAttrs?.attributes ?? [])
      .filter((a) => a.type === OID_SIGNATURE_TIME_STAMP)
      .flatMap((a) => a.values.map((v) => Buffer.from(v.toBER()))),
  );
  return [...own, ...tokens.flatMap((t) => cmsCertificates(t))];
}
