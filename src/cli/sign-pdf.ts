/**
 * `qtsp sign doc.pdf --format P --level B-LT`: PAdES through the whole flow (src/rp/pades.ts). Writes
 * doc.signed.pdf next to doc.pdf (the input stays as it was); the signed file is the input followed by
 * incremental updates, so signing doc.signed.pdf again adds a second signature and keeps the first valid.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import type { HashAlgorithm } from '../crypto/algorithms.ts';
import type { RpEndpoints } from '../rp/flow.ts';
import { PADES_LEVELS, signPdfs, type PadesLevel } from '../rp/pades.ts';

/** doc.pdf -> doc.signed.pdf; a name without .pdf gets .signed.pdf appended */
export function signedPdfName(file: string): string {
  return /\.pdf$/i.test(file) ? file.replace(/\.pdf$/i, '.signed.pdf') : `${file}.signed.pdf`;
}

export async function signPdfFiles(
  files: readonly string[],
  level: string,
  hash: HashAlgorithm,
  endpoints: RpEndpoints,
  step: (msg: string) => void,
  algo: { signAlgo?: string; signAlgoParams?: string } = {},
): Promise<number> {
  if (!(PADES_LEVELS as readonly string[]).includes(level)) {
    process.stderr.write(`unknown --level ${level} for PAdES; use one of ${PADES_LEVELS.join(', ')}\n`);
    return 2;
  }
  const pdfs = files.map((f) => readFileSync(f));
  const notPdf = files.find((_, i) => !pdfs[i]!.subarray(0, 1024).includes('%PDF-'));
  if (notPdf) {
    process.stderr.write(`${notPdf} is not a PDF; --format P signs PDF files\n`);
    return 2;
  }
  const result = await signPdfs(endpoints, {
    pdfs,
    labels: files.map((f) => basename(f)),
    level: level as PadesLevel,
    hashAlgorithm: hash,
    onStep: step,
    ...algo,
  });
  const outputs = files.map((f, i) => {
    const out = signedPdfName(f);
    writeFileSync(out, result.pdfs[i]!);
    return out;
  });
  process.stdout.write(`signed ${outputs.length} PDF(s) at ${level}: ${outputs.join(', ')} (txn ${result.txn})\n`);
  return 0;
}
