/**
 * Incremental updates of a PDF (ISO 32000-1 7.5.6): the original bytes stay untouched, and the objects that
 * were added or changed are appended with a new cross-reference section whose trailer points back (/Prev)
 * to the previous one.
 *
 * Why by hand: pdf-lib 1.17 (the PDF library we have) can only save a whole new file. It renumbers nothing
 * but re-serialises every object and writes a new xref, so the bytes an earlier signature's /ByteRange
 * covers move or change and that signature breaks. So pdf-lib is used to parse the document and to build and
 * serialise objects, and this module writes only the increment: every object whose serialisation differs from
 * the snapshot taken at open() (new objects, and the page, AcroForm or catalog that gained a reference), then a
 * cross-reference section of the same kind as the previous one (a classic table after a table, a
 * cross-reference stream after a stream, 7.5.8), then trailer, startxref and %%EOF.
 */
import { createHash } from 'node:crypto';
import {
  PDFCrossRefSection,
  PDFCrossRefStream,
  PDFDocument,
  PDFNumber,
  PDFTrailer,
  PDFTrailerDict,
  type PDFObject,
  type PDFRef,
} from 'pdf-lib';

export class PdfFormatError extends Error {
  override name = 'PdfFormatError';
}

interface PreviousSection {
  /** byte offset of the last cross-reference section (the value after the last startxref) */
  readonly offset: number;
  readonly isStream: boolean;
  /** its /Size: object numbers below it are taken, even by free entries */
  readonly size: number;
}

const key = (ref: PDFRef) => `${ref.objectNumber} ${ref.generationNumber}`;

/** pdf-lib objects, cross-reference sections and trailers all serialise this way */
interface Serialisable {
  sizeInBytes(): number;
  copyBytesInto(buffer: Uint8Array, offset: number): number;
}

function serialise(object: Serialisable): Uint8Array {
  const bytes = new Uint8Array(object.sizeInBytes());
  object.copyBytesInto(bytes, 0);
  return bytes;
}

function fingerprint(object: PDFObject): string {
  return createHash('sha256').update(serialise(object)).digest('base64');
}

/** The last startxref of the file and what it points at (7.5.5: the trailer is read from the end). */
function previousSection(pdf: Buffer): PreviousSection {
  const tail = pdf.subarray(Math.max(0, pdf.length - 1024)).toString('latin1');
  const match = /startxref\s+(\d+)\s+%%EOF\s*$/.exec(tail);
  if (!match) throw new PdfFormatError('the file does not end with startxref and %%EOF');
  const offset = Number(match[1]);
  if (offset >= pdf.length) throw new PdfFormatError('startxref points past the end of the file');
  const head = pdf.subarray(offset, offset + 4096).toString('latin1');
  const isStream = !head.startsWith('xref');
  // the table's entries are digits only, so the first /Size after the offset is the trailer's (or the
  // cross-reference stream dictionary's)
  const size = /\/Size\s+(\d+)/.exec(head);
  if (!size) throw new PdfFormatError('the last cross-reference section has no /Size');
  return { offset, isStream, size: Number(size[1]) };
}

export class PdfIncrement {
  private constructor(
    /** the parsed document: change it with pdf-lib, then call write() */
    readonly doc: PDFDocument,
    private readonly original: Buffer,
    private readonly previous: PreviousSection,
    private readonly snapshot: ReadonlyMap<string, string>,
  ) {}

  static async open(pdf: Buffer): Promise<PdfIncrement> {
    const previous = previousSection(pdf);
    // updateMetadata false: pdf-lib would otherwise touch /Info (Producer, ModDate) on load
    const doc = await PDFDocument.load(pdf, { updateMetadata: false }).catch((err: unknown) => {
      throw new PdfFormatError(`not a PDF pdf-lib can read: ${(err as Error).message}`);
    });
    if (doc.context.trailerInfo.Encrypt) throw new PdfFormatError('encrypted PDFs are not supported');
    // object numbers below the previous /Size may belong to free entries: never reuse them
    doc.context.largestObjectNumber = Math.max(doc.context.largestObjectNumber, previous.size - 1);
    const snapshot = new Map(
      doc.context.enumerateIndirectObjects().map(([ref, object]) => [key(ref), fingerprint(object)]),
    );
    return new PdfIncrement(doc, pdf, previous, snapshot);
  }

  /** The indirect objects added or changed since open(), in object-number order. */
  private changed(): [PDFRef, PDFObject][] {
    return this.doc.context
      .enumerateIndirectObjects()
      .filter(([ref, object]) => this.snapshot.get(key(ref)) !== fingerprint(object))
      .sort(([a], [b]) => a.objectNumber - b.objectNumber);
  }

  /** The original file followed by the increment. */
  write(): Buffer {
    const context = this.doc.context;
    const parts: Uint8Array[] = [this.original];
    let offset = this.original.length;
    const push = (bytes: Uint8Array) => {
      parts.push(bytes);
      offset += bytes.length;
    };
    const text = (s: string) => push(Buffer.from(s, 'latin1'));
    const last = this.original[this.original.length - 1];
    if (last !== 0x0a && last !== 0x0d) text('\n'); // %%EOF ends a line (7.5.5)

    const entries: [PDFRef, number][] = [];
    const writeObject = (ref: PDFRef, object: PDFObject) => {
      entries.push([ref, offset]);
      text(`${ref.objectNumber} ${ref.generationNumber} obj\n`);
      push(serialise(object));
      text('\nendobj\n');
    };
    for (const [ref, object] of this.changed()) writeObject(ref, object);

    const { Root, Info, ID } = context.trailerInfo;
    const trailer = (size: number) =>
      context.obj({
        Size: PDFNumber.of(size),
        Root: Root!,
        ...(Info ? { Info } : {}),
        ...(ID ? { ID } : {}),
        Prev: PDFNumber.of(this.previous.offset),
      });
    let xrefOffset: number;
    if (this.previous.isStream) {
      const ref = context.nextRef(); // the stream lists itself (7.5.8.3)
      const stream = PDFCrossRefStream.create(trailer(context.largestObjectNumber + 1), true);
      xrefOffset = offset;
      for (const [r, at] of [...entries, [ref, xrefOffset] as [PDFRef, number]]) stream.addUncompressedEntry(r, at);
      writeObject(ref, stream);
    } else {
      xrefOffset = offset;
      const section = PDFCrossRefSection.createEmpty();
      for (const [ref, at] of entries) section.addEntry(ref, at);
      push(serialise(section));
      text('\n');
      push(serialise(PDFTrailerDict.of(trailer(context.largestObjectNumber + 1))));
      text('\n');
    }
    text(`${PDFTrailer.forLastCrossRefSectionOffset(xrefOffset).toString()}\n`);
    return Buffer.concat(parts);
  }
}
