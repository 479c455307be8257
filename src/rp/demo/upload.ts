/**
 * The upload form's body (multipart/form-data), read with a size limit and parsed by the platform's own
 * multipart parser (fetch's Response.formData). A body over the limit is read to its end and dropped, so the
 * browser gets the error page instead of a reset connection; one far over it is cut off.
 */
import type { Request } from 'express';

export class UploadError extends Error {
  override name = 'UploadError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** room for the form's other fields and the multipart framing around the file */
const FRAMING_BYTES = 64 * 1024;
/** how much of an oversized body is read and dropped before the connection is cut */
const DRAIN_FACTOR = 8;

export function tooLarge(maxBytes: number): UploadError {
  const mb = (maxBytes / (1024 * 1024)).toLocaleString('en', { maximumFractionDigits: 1 });
  return new UploadError(413, `The file is too large: this demo takes files of up to ${mb} MB.`);
}

/** The raw body, or an UploadError(413) once it has been read (or, far over the limit, cut off). */
function readLimited(req: Request, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    req.on('data', (chunk: Buffer) => {
      total += chunk.length;
      if (total <= limit) chunks.push(chunk);
      else if (total > limit * DRAIN_FACTOR) {
        req.destroy();
        reject(new UploadError(413, 'too large'));
      } else chunks.length = 0;
    });
    req.on('end', () => (total <= limit ? resolve(Buffer.concat(chunks)) : reject(new UploadError(413, 'too large'))));
    req.on('error', reject);
  });
}

/** The form's fields and files; an UploadError for a body that is not a form or is over `maxFileBytes`. */
export async function readUploadForm(req: Request, maxFileBytes: number): Promise<FormData> {
  const contentType = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data\s*;/i.test(contentType)) {
    req.resume();
    throw new UploadError(400, 'The form was not sent as multipart/form-data.');
  }
  let body: Buffer;
  try {
    body = await readLimited(req, maxFileBytes + FRAMING_BYTES);
  } catch (err) {
    if (err instanceof UploadError) throw tooLarge(maxFileBytes);
    throw err;
  }
  try {
    return await new Response(new Uint8Array(body), { headers: { 'content-type': contentType } }).formData();
  } catch {
    throw new UploadError(400, 'The form could not be read.');
  }
}
