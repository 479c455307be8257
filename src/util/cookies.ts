/** Reading a cookie the browser sent (RFC 6265 section 5.4: `name=value` pairs separated by `;`). */
import type { Request } from 'express';

/** The value of the first cookie called `name`, or undefined when the request has none. */
export function cookieValue(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}
