/**
 * What crosses between the main thread (sqlite-writer.ts) and the SQLite writer thread (sqlite-writer-thread.ts):
 * the messages, and the statements as they travel. A statement's SQL text (Kysely's, up to a kilobyte, the
 * same for each shape of a query) crosses once and gets a number; after that only its number and parameters
 * do, which keeps what crossing threads costs the main thread small.
 */
import type { Durability, Statement } from './group-commit.ts';

/** what the writer thread is started with */
export interface WriterThreadData {
  readonly file: string;
  /** PRAGMA max_page_count from this (per connection: the writing one is the one that must obey it) */
  readonly maxBytes: number;
}

/** a statement as it crosses: its SQL text, or the number of a text sent before (`text` defines that number) */
export interface WireStatement {
  readonly sql?: string;
  readonly text?: number;
  readonly parameters: readonly unknown[];
}

export interface WireWrite {
  readonly id: number;
  readonly statements: WireStatement[];
  readonly durability: Durability;
}

export type ThreadRequest = { readonly kind: 'writes'; readonly writes: WireWrite[] } | { readonly kind: 'close' };

/** an error as it crosses (SqliteError's code, e.g. SQLITE_CONSTRAINT_PRIMARYKEY or SQLITE_FULL, included) */
export interface PlainError {
  readonly name: string;
  readonly message: string;
  readonly code?: string;
}

export type WriteResult =
  | { readonly id: number; readonly ok: true; readonly changes: number[] }
  | { readonly id: number; readonly ok: false; readonly error: PlainError };

export type ThreadReply =
  | { readonly kind: 'ready' }
  | { readonly kind: 'failed'; readonly error: PlainError }
  | { readonly kind: 'closed' }
  | { readonly kind: 'results'; readonly results: readonly WriteResult[] };

/** how many distinct SQL texts get a number (shapes of the store's queries: a few per row count) */
const NUMBERED_TEXTS = 4096;

export function plainError(err: unknown): PlainError {
  const e = err instanceof Error ? err : new Error(String(err));
  const code = (e as { code?: unknown }).code;
  return { name: e.name, message: e.message, ...(typeof code === 'string' ? { code } : {}) };
}

export function toError(e: PlainError): Error {
  return Object.assign(new Error(e.message), { name: e.name, ...(e.code ? { code: e.code } : {}) });
}

/**
 * Bytes as their own copy: a message carries a typed array's whole ArrayBuffer, and a small Buffer is a view
 * into Node's shared 8 KiB pool
 */
function compact(parameter: unknown): unknown {
  return parameter instanceof Uint8Array && parameter.byteLength !== parameter.buffer.byteLength
    ? new Uint8Array(parameter)
    : parameter;
}

/** The sending side: numbers each SQL text the first time it crosses (messages arrive in order). */
export function statementSender(): (statement: Statement) => WireStatement {
  const textNumbers = new Map<string, number>();
  return (s) => {
    const parameters = s.parameters.map(compact);
    const known = textNumbers.get(s.sql);
    if (known !== undefined) return { text: known, parameters };
    if (textNumbers.size >= NUMBERED_TEXTS) return { sql: s.sql, parameters };
    const text = textNumbers.size;
    textNumbers.set(s.sql, text);
    return { sql: s.sql, text, parameters }; // defines the number
  };
}

/** The receiving side: the SQL texts by number. */
export function statementReceiver(): (statement: WireStatement) => Statement {
  const texts = new Map<number, string>();
  return (s) => {
    if (s.sql !== undefined) {
      if (s.text !== undefined) texts.set(s.text, s.sql);
      return { sql: s.sql, parameters: s.parameters };
    }
    const sql = texts.get(s.text!);
    // cannot happen: messages arrive in order, and a number is defined by the first message that uses it
    if (sql === undefined) throw new Error(`statement text ${s.text} was never sent`);
    return { sql, parameters: s.parameters };
  };
}
