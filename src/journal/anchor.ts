/**
 * The journal's chain kept outside the database: each sealed batch as a small JSON record (its number, seq
 * range, previous root, root and tokens), the same bytes on the publication listener (`GET /journal/batches`)
 * and in the append-only git repository (anchor-repo.ts). Whoever saved such records earlier holds an anchor:
 * `qtsp evidence audit --anchor FILE|DIR|URL` compares the store's batches with it and names a batch the
 * anchor has and the store lacks (a truncated tail) and one the store holds with another root or token (a
 * re-sealed batch). The records carry no leaves: the roots and tokens are what an anchor must keep, and the
 * leaves stay with the evidence (the export's batches.json).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { JournalBatch, Store } from '../store/types.ts';
import { httpRequest } from '../util/http-client.ts';

/** One sealed batch as published: hashes in hex, tokens (DER TimeStampToken) in Base64. */
export interface AnchorBatch {
  readonly batchNo: number;
  readonly firstSeq: number;
  readonly throughSeq: number;
  readonly hashOid: string;
  readonly sealedAt: string;
  readonly prevRoot: string | null;
  readonly root: string;
  readonly token: string;
  readonly secondToken: string | null;
}

/** What every written form of a batch states first (this record, the export's batches.json): hashes in hex. */
export function batchHeader(b: JournalBatch): Omit<AnchorBatch, 'token' | 'secondToken'> {
  return {
    batchNo: b.batchNo,
    firstSeq: b.firstSeq,
    throughSeq: b.throughSeq,
    hashOid: b.hashOid,
    sealedAt: b.sealedAt.toISOString(),
    prevRoot: b.prevRoot?.toString('hex') ?? null,
    root: b.root.toString('hex'),
  };
}

export function anchorRecord(b: JournalBatch): AnchorBatch {
  return {
    ...batchHeader(b),
    token: b.token.toString('base64'),
    secondToken: b.secondToken?.toString('base64') ?? null,
  };
}

/** the record as a file: one field per line, so that a diff shows what changed */
export const anchorText = (record: AnchorBatch): string => `${JSON.stringify(record, null, 2)}\n`;

export class AnchorError extends Error {
  override name = 'AnchorError';
}

const HEX = /^[0-9a-f]+$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** one record, checked field by field: an anchor is input from outside */
function parseRecord(value: unknown, where: string): AnchorBatch {
  const r = value as Record<string, unknown> | null;
  const bad = (field: string) => new AnchorError(`${where}: ${field} is missing or malformed`);
  if (typeof r !== 'object' || r === null || Array.isArray(r)) throw new AnchorError(`${where}: not a batch record`);
  for (const field of ['batchNo', 'firstSeq', 'throughSeq'])
    if (!Number.isSafeInteger(r[field]) || (r[field] as number) < 1) throw bad(field);
  for (const field of ['hashOid', 'sealedAt']) if (typeof r[field] !== 'string') throw bad(field);
  if (typeof r['root'] !== 'string' || !HEX.test(r['root'])) throw bad('root');
  if (r['prevRoot'] !== null && (typeof r['prevRoot'] !== 'string' || !HEX.test(r['prevRoot']))) throw bad('prevRoot');
  if (typeof r['token'] !== 'string' || !BASE64.test(r['token'])) throw bad('token');
  if (r['secondToken'] !== null && (typeof r['secondToken'] !== 'string' || !BASE64.test(r['secondToken'])))
    throw bad('secondToken');
  return {
    batchNo: r['batchNo'] as number,
    firstSeq: r['firstSeq'] as number,
    throughSeq: r['throughSeq'] as number,
    hashOid: r['hashOid'] as string,
    sealedAt: r['sealedAt'] as string,
    prevRoot: r['prevRoot'] as string | null,
    root: r['root'],
    token: r['token'],
    secondToken: r['secondToken'] as string | null,
  };
}

/** a listing page (`{batches, next}`) or one record, as JSON text */
export function parseAnchorText(text: string, where: string): { batches: AnchorBatch[]; next: string | null } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new AnchorError(`${where}: not JSON`);
  }
  const page = json as { batches?: unknown; next?: unknown };
  if (typeof page !== 'object' || page === null || !('batches' in page))
    return { batches: [parseRecord(json, where)], next: null };
  if (!Array.isArray(page.batches)) throw new AnchorError(`${where}: batches is not a list`);
  if (page.next !== undefined && page.next !== null && typeof page.next !== 'string')
    throw new AnchorError(`${where}: next is not a link`);
  return {
    batches: page.batches.map((b, i) => parseRecord(b, `${where}, batches[${i}]`)),
    next: typeof page.next === 'string' ? page.next : null,
  };
}

/** every .json file under a directory (a clone of the anchor repository), sorted by path */
function jsonFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .filter((e) => !e.name.startsWith('.'))
    .flatMap((e) =>
      e.isDirectory() ? jsonFiles(join(dir, e.name)) : e.name.endsWith('.json') ? [join(dir, e.name)] : [],
    )
    .sort();
}

function readLocal(path: string): AnchorBatch[] {
  let files: string[];
  try {
    files = statSync(path).isDirectory() ? jsonFiles(path) : [path];
  } catch (err) {
    throw new AnchorError(`${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (files.length === 0) throw new AnchorError(`${path}: no batch record (.json) found`);
  return files.flatMap((file) => {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new AnchorError(`${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    return parseAnchorText(text, file).batches;
  });
}

const MAX_PAGES = 100_000;

/** the listing at `url`, following its `next` links */
async function readRemote(url: string, timeoutMs: number): Promise<AnchorBatch[]> {
  const batches: AnchorBatch[] = [];
  for (let at: string | null = url, pages = 0; at !== null && pages < MAX_PAGES; pages++) {
    let res: Awaited<ReturnType<typeof httpRequest>>;
    try {
      res = await httpRequest(at, { timeoutMs, maxResponseBytes: 64 * 1024 * 1024 });
    } catch (err) {
      throw new AnchorError(`${at}: ${(err as Error).message}`);
    }
    if (res.status !== 200) throw new AnchorError(`${at}: HTTP ${res.status}`);
    const page = parseAnchorText(res.body.toString('utf8'), at);
    batches.push(...page.batches);
    at = page.next === null ? null : new URL(page.next, at).toString();
  }
  return batches;
}

/**
 * The anchor's batches by number: from a file saved from the publication listener (a listing page or one
 * batch), a directory (a clone of the anchor repository: every .json under it) or an http(s) URL of the
 * listing. Throws AnchorError when it cannot be read, is malformed, or holds one number twice with two roots.
 */
export async function loadAnchor(source: string, timeoutMs: number): Promise<Map<number, AnchorBatch>> {
  const list = /^https?:\/\//i.test(source) ? await readRemote(source, timeoutMs) : readLocal(source);
  if (list.length === 0) throw new AnchorError(`${source}: holds no batch`);
  const byNo = new Map<number, AnchorBatch>();
  for (const b of list) {
    const known = byNo.get(b.batchNo);
    if (known && anchorText(known) !== anchorText(b))
      throw new AnchorError(`${source}: batch ${b.batchNo} appears twice with different contents`);
    byNo.set(b.batchNo, b);
  }
  return byNo;
}

/**
 * `truncated`: the anchor holds the batch, the store ends before it; `missing`: the store lacks it, not its
 * successors; `resealed`: the store's batch of that number differs from the anchor's
 */
export interface AnchorFinding {
  readonly kind: 'truncated' | 'missing' | 'resealed';
  readonly batchNo: number;
  /** the fields that differ (resealed) */
  readonly fields: readonly string[];
  readonly anchorRoot: string;
  readonly storeRoot?: string;
}

const COMPARED = [
  'firstSeq',
  'throughSeq',
  'hashOid',
  'prevRoot',
  'root',
  'token',
  'secondToken',
] as const satisfies (keyof AnchorBatch)[];

const STORE_PAGE = 100;

/** Compares every batch of the anchor with the store's batch of that number (read a page at a time). */
export async function checkAnchor(store: Store, anchor: ReadonlyMap<number, AnchorBatch>): Promise<AnchorFinding[]> {
  const findings: AnchorFinding[] = [];
  const newest = (await store.journal.lastBatch())?.batchNo ?? 0;
  let page: JournalBatch[] = [];
  for (const [batchNo, kept] of [...anchor].sort(([a], [b]) => a - b)) {
    const last = page.at(-1);
    if (!last || batchNo > last.batchNo) page = await store.journal.batches(batchNo, STORE_PAGE);
    const batch = page.find((b) => b.batchNo === batchNo);
    if (!batch) {
      findings.push({ kind: batchNo > newest ? 'truncated' : 'missing', batchNo, fields: [], anchorRoot: kept.root });
      continue;
    }
    const stored = anchorRecord(batch);
    const fields = COMPARED.filter((f) => stored[f] !== kept[f]);
    if (fields.length > 0)
      findings.push({ kind: 'resealed', batchNo, fields, anchorRoot: kept.root, storeRoot: stored.root });
  }
  return findings;
}

export function describeAnchorFinding(f: AnchorFinding): string {
  if (f.kind !== 'resealed')
    return (
      `batch ${f.batchNo}: missing from the store, held by the anchor (root ${f.anchorRoot})` +
      (f.kind === 'truncated' ? ': truncated tail' : '')
    );
  return (
    `batch ${f.batchNo}: re-sealed: the store's ${f.fields.join(', ')} differ from the anchor's ` +
    `(store root ${f.storeRoot}, anchor root ${f.anchorRoot})`
  );
}
