/**
 * Form-encoded request bodies (spec 2.4, 2.9, 2.11): content type checked first, body read as text and
 * parsed with URLSearchParams; a parameter sent twice is an error (RFC 6749 section 3.1).
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { invalidRequest } from '../errors.ts';

const FORM = 'application/x-www-form-urlencoded';

/** Rejects anything but a form body; the PAR answers 415 (spec 7.2), the other endpoints 400. */
export function formOnly(status: 400 | 415) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    if (req.is(FORM) !== FORM) throw invalidRequest(`Content-Type must be ${FORM}`, status);
    next();
  };
}

export const formBody = express.text({ type: FORM, limit: '64kb' });

export class Form {
  private constructor(private readonly params: URLSearchParams) {}

  static of(req: Request): Form {
    const params = new URLSearchParams(typeof req.body === 'string' ? req.body : '');
    const seen = new Set<string>();
    for (const key of params.keys()) {
      if (seen.has(key)) throw invalidRequest(`parameter ${key} is repeated`);
      seen.add(key);
    }
    return new Form(params);
  }

  /** The value, or undefined when absent or empty. */
  get(name: string): string | undefined {
    const value = this.params.get(name);
    return value === null || value === '' ? undefined : value;
  }

  require(name: string): string {
    const value = this.get(name);
    if (value === undefined) throw invalidRequest(`parameter ${name} is missing`);
    return value;
  }
}

export function noStore(_req: Request, res: Response, next: NextFunction): void {
  res.set('Cache-Control', 'no-cache, no-store');
  next();
}
