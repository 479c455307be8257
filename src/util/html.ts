/**
 * Server-rendered HTML pages of the sandbox (bank, account chooser, demo RP): one escaping function for every
 * value, one page shell, and the headers every page is sent with.
 */
import type { Response } from 'express';

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

/** Escapes text for HTML content and quoted attributes; never strips a character (spec 2.7: labels). */
export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

/** A tagged template whose interpolations are escaped unless they are already `Html`. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

type Part = Html | string | number | boolean | undefined | null | readonly Part[];

function render(part: Part): string {
  if (part === undefined || part === null || part === false) return '';
  if (part instanceof Html) return part.text;
  if (Array.isArray(part)) return part.map(render).join('');
  return escapeHtml(part);
}

export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0]!;
  values.forEach((v, i) => {
    out += render(v) + strings[i + 1]!;
  });
  return new Html(out);
}

/**
 * The formatting characters of the Unicode Bidirectional Algorithm: embeddings and overrides U+202A-202E,
 * isolates U+2066-2069, and the marks U+200E, U+200F, U+061C. In a label they can reorder what a person reads.
 */
const BIDI_CONTROLS = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;

/** Text with each bidirectional control replaced by a visible mark such as `⟨U+202E⟩`; nothing is dropped. */
export function showBidiControls(text: string): string {
  return text.replace(BIDI_CONTROLS, (c) => `⟨U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}⟩`);
}

/**
 * Text another party chose (a document label, a purpose), shown as it is: in a `<bdi>` element, isolated from
 * the text around it, with its bidirectional controls made visible instead of acting.
 */
export function isolated(text: string, attributes: { id?: string; className?: string } = {}): Html {
  const id = attributes.id === undefined ? '' : html` id="${attributes.id}"`;
  const cls = attributes.className === undefined ? '' : html` class="${attributes.className}"`;
  return html`<bdi${id}${cls}>${showBidiControls(text)}</bdi>`;
}

const STYLE = `body{font-family:system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem;color:#1d2733}
h1{font-size:1.4rem}fieldset{border:1px solid #c8d0da;border-radius:6px;margin:1rem 0}
label{display:block;margin:.3rem 0}button{margin:.3rem .5rem .3rem 0;padding:.4rem 1rem}
.doc{white-space:pre-wrap;background:#f4f6f8;padding:.5rem;border-radius:4px}.error{color:#a01818}
table{border-collapse:collapse}td,th{text-align:left;padding:.2rem .6rem .2rem 0;vertical-align:top}`;

export interface PageOptions {
  readonly title: string;
  /** origins forms on this page may post to besides its own (CSP form-action) */
  readonly formTargets?: readonly string[];
}

/** A whole page: doctype, title, the shared style and the body. */
export function page(options: PageOptions, body: Html): Html {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${options.title}</title><style>${new Html(STYLE)}</style></head>
<body>${body}</body></html>`;
}

/** Sends a page with headers that keep it out of caches and frames and run no script (no script is needed). */
export function sendPage(res: Response, status: number, options: PageOptions, body: Html): void {
  const targets = ["'self'", ...(options.formTargets ?? [])].join(' ');
  const csp = `default-src 'none'; style-src 'unsafe-inline'; form-action ${targets}; frame-ancestors 'none'`;
  res
    .status(status)
    .set({
      'Content-Type': 'text/html; charset=utf-8',
      'Cache-Control': 'no-store',
      'Content-Security-Policy': csp,
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
    })
    .send(page(options, body).text);
}
