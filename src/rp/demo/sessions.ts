/**
 * The demo RP's browser sessions, in memory: the uploaded document waiting for the bank, the pending
 * authorizations (spec 5.11: state bound to the session, used once) and the results. A session is found only
 * through its HttpOnly cookie, expires after a while of idleness, and holds a few entries at most. A stranger
 * cannot push a live session out: a client address that starts too many gives way only its own oldest, and
 * when every place is taken a new session is refused, not made by evicting another browser's.
 */
import { randomBytes } from 'node:crypto';
import type { PendingAuthorization } from '../flow.ts';
import type { PreparedPades } from '../pades.ts';
import type { Verdict } from './verify.ts';

/** What the person uploaded and chose on the form. */
export interface DocumentChoice {
  readonly fileName: string;
  readonly bytes: Buffer;
  /** signDoc signature_format (spec 2.12) */
  readonly format: 'C' | 'X' | 'P';
  /** signDoc conformance_level */
  readonly level: string;
}

/** Between PAR and the bank's redirect to our callback. */
export interface PendingSigning {
  readonly choice: DocumentChoice;
  readonly authorization: PendingAuthorization;
  /** PAdES: the PDF with its placeholder, waiting for the CMS */
  readonly pades?: PreparedPades;
}

export interface DownloadFile {
  readonly name: string;
  readonly contentType: string;
  readonly bytes: Buffer;
}

export interface SigningResult {
  readonly fileName: string;
  readonly format: 'C' | 'X' | 'P';
  readonly level: string;
  readonly txn: string;
  /** the signature file (.p7s, .xml) and, for PAdES, the signed PDF */
  readonly downloads: Readonly<Record<string, DownloadFile>>;
  readonly verdict: Verdict;
}

export class DemoSession {
  expiresAt = 0;
  /** the client address that started it */
  client = '';
  /** account chooser state -> the document it was asked for (spec 2.1 state: bound to this session) */
  readonly chooser = new BoundedMap<DocumentChoice>();
  /** OAuth state -> the pending signing */
  readonly pending = new BoundedMap<PendingSigning>();
  readonly results = new BoundedMap<SigningResult>();

  constructor(readonly id: string) {}
}

/** Entries per kind and session; the oldest goes first. */
const MAX_ENTRIES = 4;

/** A small map whose entries are taken out once (take) and whose oldest entries give way to new ones. */
export class BoundedMap<T> {
  private readonly entries = new Map<string, T>();

  set(key: string, value: T): void {
    this.entries.set(key, value);
    while (this.entries.size > MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
  }

  get(key: string): T | undefined {
    return this.entries.get(key);
  }

  /** The entry, removed: a state is good for one redirect only. */
  take(key: string): T | undefined {
    const value = this.entries.get(key);
    this.entries.delete(key);
    return value;
  }

  values(): IterableIterator<T> {
    return this.entries.values();
  }
}

/** The buffers a session keeps (documents, prepared PDFs, result files), each once. */
function keptBuffers(s: DemoSession, into: Set<Buffer>): void {
  for (const choice of s.chooser.values()) into.add(choice.bytes);
  for (const p of s.pending.values()) {
    into.add(p.choice.bytes);
    for (const pdf of p.pades?.prepared ?? []) into.add(pdf.covered);
  }
  for (const r of s.results.values()) for (const file of Object.values(r.downloads)) into.add(file.bytes);
}

export interface SessionOptions {
  /** idle lifetime of a session and everything in it */
  readonly ttlMs: number;
  /** sessions kept at most; when all are live, a new one is refused */
  readonly maxSessions: number;
  /** sessions one client address keeps at most; its own least recently used one gives way */
  readonly maxPerClient: number;
  readonly now?: () => number;
}

export class DemoSessions {
  private readonly sessions = new Map<string, DemoSession>();
  private readonly now: () => number;

  constructor(private readonly options: SessionOptions) {
    this.now = options.now ?? Date.now;
  }

  /** The live session of this cookie value, its lifetime renewed; undefined for an unknown or expired one. */
  find(id: string | undefined): DemoSession | undefined {
    this.sweep();
    const session = id === undefined ? undefined : this.sessions.get(id);
    if (!session) return undefined;
    this.sessions.delete(session.id); // re-inserted: the map's order is the order of use
    this.sessions.set(session.id, session);
    session.expiresAt = this.now() + this.options.ttlMs;
    return session;
  }

  /**
   * A new session with an unguessable id (the cookie value; never used as a state) for this client address;
   * undefined when every place is taken by a live session of others.
   */
  create(client: string): DemoSession | undefined {
    this.sweep();
    const own = [...this.sessions.values()].filter((s) => s.client === client);
    // the map's order is the order of use: the client's least recently used sessions first
    for (const s of own.slice(0, Math.max(0, own.length - this.options.maxPerClient + 1))) this.sessions.delete(s.id);
    if (this.sessions.size >= this.options.maxSessions) return undefined;
    const session = new DemoSession(randomBytes(32).toString('base64url'));
    session.client = client;
    session.expiresAt = this.now() + this.options.ttlMs;
    this.sessions.set(session.id, session);
    return session;
  }

  get size(): number {
    return this.sessions.size;
  }

  /** The bytes every live session keeps: documents, prepared PDFs and result files. */
  keptBytes(): number {
    this.sweep();
    const buffers = new Set<Buffer>();
    for (const s of this.sessions.values()) keptBuffers(s, buffers);
    let total = 0;
    for (const b of buffers) total += b.length;
    return total;
  }

  private sweep(): void {
    const now = this.now();
    for (const [id, s] of this.sessions) if (s.expiresAt <= now) this.sessions.delete(id);
  }

  clear(): void {
    this.sessions.clear();
  }
}
