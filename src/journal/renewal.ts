/**
 * Renewal of the journal's evidence records (RFC 4998 section 5), one time-stamp per renewal over a hash tree:
 *
 * - time-stamp renewal (5.2): before the TSA certificate of the newest time-stamp in a chain ends, a new
 *   ArchiveTimeStamp joins every current chain. Its tree has one leaf per chain: the group hash of the chain's
 *   time-stamps so far (BouncyCastle checks that the newest ArchiveTimeStamp covers each earlier one of its
 *   chain). Due when that certificate ends within the margin; refused unless the new token's TSA certificate
 *   ends later than the one it replaces (a renewal by the same certificate would prove nothing new).
 * - hash-tree renewal (5.3): with another hash algorithm, a new chain for every entry present in the sealed
 *   batches: its leaf is H(H(entry) || H(the entry's chains so far)); and for every signing's data group: the
 *   group hash of that of each of its two entries, over the group record's chains so far. Only on request.
 *
 * A chain is current when no later chain covers its entries: the batch chains after the newest hash-tree
 * renewal, and that renewal's own chain. Batches sealed after a hash-tree renewal are sealed with the sealing
 * hash (SHA-256) and start chains of their own until the next hash-tree renewal.
 */
import { X509Certificate } from 'node:crypto';
import { setImmediate as turn } from 'node:timers/promises';
import * as pkijs from 'pkijs';
import type { HashAlgorithm } from '../crypto/algorithms.ts';
import type {
  JournalBatch,
  JournalGroup,
  JournalRenewal,
  RenewalLeaf,
  Store,
  StoredJournalEntry,
} from '../store/types.ts';
import type { TimestampProvider } from '../timestamping/provider.ts';
import { genTimeOf } from '../timestamping/tsa.ts';
import type { Logger } from '../util/logger.ts';
import { type PeriodicTask, runEvery } from '../util/periodic.ts';
import {
  groupChains,
  groupIntact,
  groupKey,
  hashOf,
  hashRenewalGroupLeaf,
  hashRenewalLeaf,
  recordChains,
  renewalCovers,
  timeStampGroup,
} from './evidence-record.ts';
import { groupHash, nodeHash, treeRoot } from './hash-tree.ts';

const PAGE = 1000;

/** One current ArchiveTimeStampChain: where it starts and its time-stamps so far (oldest first). */
export interface CurrentChain {
  /** null: it starts at batch `key`; else at hash-tree renewal `chainOf` (= key) */
  readonly chainOf: number | null;
  readonly key: number;
  readonly hash: HashAlgorithm;
  readonly tokens: readonly Buffer[];
}

export async function allBatches(store: Store): Promise<JournalBatch[]> {
  const batches: JournalBatch[] = [];
  for (;;) {
    const page = await store.journal.batches(batches.length + 1, PAGE);
    batches.push(...page);
    if (page.length < PAGE) return batches;
  }
}

/** the time-stamps of a chain: its first token, then those of the time-stamp renewals that extended it */
function chainTokens(first: Buffer, chainOf: number | null, key: number, renewals: readonly JournalRenewal[]) {
  return [
    first,
    ...renewals
      .filter((r) => r.kind === 'timestamp' && r.chainOf === chainOf && renewalCovers(r, key))
      .map((r) => r.token),
  ];
}

/** The current chains under `renewals` (by number). */
export function currentChains(batches: readonly JournalBatch[], renewals: readonly JournalRenewal[]): CurrentChain[] {
  const hashRenewal = renewals.filter((r) => r.kind === 'hashtree').at(-1);
  const after = hashRenewal?.throughBatch ?? 0;
  const chains: CurrentChain[] = batches
    .filter((b) => b.batchNo > after)
    .map((b) => ({
      chainOf: null,
      key: b.batchNo,
      hash: hashOf(b.hashOid),
      tokens: chainTokens(b.token, null, b.batchNo, renewals),
    }));
  if (hashRenewal)
    chains.unshift({
      chainOf: hashRenewal.renewalNo,
      key: hashRenewal.renewalNo,
      hash: hashOf(hashRenewal.hashOid),
      tokens: chainTokens(hashRenewal.token, hashRenewal.renewalNo, hashRenewal.renewalNo, renewals),
    });
  return chains;
}

/** The leaves a time-stamp renewal of `chains` (one algorithm) time-stamps: per chain its group hash. */
export function timeStampLeaves(chains: readonly CurrentChain[]): RenewalLeaf[] {
  return chains.map((c) => ({ key: c.key, hash: groupHash(nodeHash(c.hash), timeStampGroup(c.hash, c.tokens)) }));
}

/** notAfter of the certificate that signed a time-stamp token (the one its SignerInfo names, else the first) */
export function tsaCertificateEnd(token: Buffer): Date {
  return new Date(tsaCertificate(token).validTo);
}

/** the certificate that signed a time-stamp token: the one its SignerInfo names, else the first it carries */
export function tsaCertificate(token: Buffer): X509Certificate {
  const signed = new pkijs.SignedData({ schema: pkijs.ContentInfo.fromBER(new Uint8Array(token)).content });
  const sid = signed.signerInfos[0]?.sid;
  const certificates = (signed.certificates ?? []).filter((c) => c instanceof pkijs.Certificate);
  const signer =
    certificates.find(
      (c) =>
        sid instanceof pkijs.IssuerAndSerialNumber &&
        Buffer.from(c.serialNumber.valueBlock.valueHexView).equals(
          Buffer.from(sid.serialNumber.valueBlock.valueHexView),
        ),
    ) ?? certificates[0];
  if (!signer) throw new Error('journal: a time-stamp carries no TSA certificate');
  return new X509Certificate(Buffer.from(signer.toSchema().toBER()));
}

/**
 * When the earliest TSA certificate among the chains' newest time-stamps ends. Per group of chains renewed
 * together only the renewal's token, and of the chains not renewed yet the oldest batch's token, are read:
 * the TSA certificate in use is assumed never to end earlier than one used before it.
 */
function earliestEnd(chains: readonly CurrentChain[]): Date {
  const newest = new Map<string, Buffer>();
  let oldestAlone: CurrentChain | undefined;
  for (const c of chains) {
    if (c.tokens.length > 1) newest.set(c.tokens.at(-1)!.toString('base64'), c.tokens.at(-1)!);
    else if (!oldestAlone || c.key < oldestAlone.key) oldestAlone = c;
  }
  if (oldestAlone) newest.set('alone', oldestAlone.tokens[0]!);
  return new Date(Math.min(...[...newest.values()].map((t) => tsaCertificateEnd(t).getTime())));
}

export interface TimeStampRenewalOptions {
  /** renew whatever the certificates' ends (`qtsp evidence renew --force`) */
  readonly force?: boolean;
  /** renew when the earliest TSA certificate ends within this many milliseconds of `now` */
  readonly marginMs: number;
  readonly now?: Date;
}

async function nextRenewalNo(store: Store): Promise<number> {
  return ((await store.journal.renewals()).at(-1)?.renewalNo ?? 0) + 1;
}

/** a renewal stored, or an error when another instance took its number first */
async function addRenewal(store: Store, renewal: JournalRenewal): Promise<JournalRenewal> {
  if (!(await store.journal.addRenewal(renewal)))
    throw new Error(`journal: renewal ${renewal.renewalNo} was added by another instance first; run again`);
  await store.journal.append({
    kind: 'evidence.renewed',
    ref: null,
    at: renewal.renewedAt,
    data: {
      renewalNo: renewal.renewalNo,
      kind: renewal.kind,
      hashOid: renewal.hashOid,
      throughBatch: renewal.throughBatch,
      leaves: renewal.leaves.length,
      root: renewal.root.toString('hex'),
    },
  });
  return renewal;
}

/**
 * Time-stamp renewal (RFC 4998 5.2) of the current chains, one renewal per hash algorithm among them, when
 * due (or forced). The renewals added; none when nothing is due.
 */
export async function renewTimeStamps(
  store: Store,
  tsa: TimestampProvider,
  options: TimeStampRenewalOptions,
): Promise<JournalRenewal[]> {
  const now = options.now ?? new Date();
  const batches = await allBatches(store);
  const added: JournalRenewal[] = [];
  const byHash = new Map<string, CurrentChain[]>();
  for (const c of currentChains(batches, await store.journal.renewals()))
    byHash.set(c.hash.oid, [...(byHash.get(c.hash.oid) ?? []), c]);
  for (const chains of byHash.values()) {
    const ends = earliestEnd(chains);
    if (!options.force && ends.getTime() - options.marginMs > now.getTime()) continue;
    const hash = chains[0]!.hash;
    const leaves = timeStampLeaves(chains);
    const root = treeRoot(
      nodeHash(hash),
      leaves.map((l) => l.hash),
    );
    const token = await tsa.timestamp(root, hash);
    const freshEnds = tsaCertificateEnd(token);
    if (!options.force && freshEnds.getTime() <= ends.getTime())
      throw new Error(
        `journal: the TSA certificate ends ${freshEnds.toISOString()}, no later than the time-stamps it would ` +
          `renew (${ends.toISOString()}): renew the TSA certificate first`,
      );
    added.push(
      await addRenewal(store, {
        renewalNo: await nextRenewalNo(store),
        kind: 'timestamp',
        hashOid: hash.oid,
        chainOf: chains[0]!.chainOf,
        throughBatch: batches.at(-1)?.batchNo ?? 0,
        leaves,
        root,
        token,
        renewedAt: genTimeOf(token),
      }),
    );
  }
  return added;
}

/**
 * The data groups of `batch` whose two entries are present and as sealed, with their data objects (`entries`:
 * the batch's, by seq; a signing.authorized entry sealed in an earlier batch is read).
 */
export async function intactGroups(
  store: Store,
  batch: JournalBatch,
  entries: ReadonlyMap<number, StoredJournalEntry>,
): Promise<{ group: JournalGroup; bodies: [Buffer, Buffer] }[]> {
  const out: { group: JournalGroup; bodies: [Buffer, Buffer] }[] = [];
  for (const group of batch.groups ?? []) {
    const authorized =
      entries.get(group.authorizedSeq) ??
      (await store.journal.entries(group.authorizedSeq - 1, group.authorizedSeq)).find(
        (e) => e.seq === group.authorizedSeq,
      );
    const returned = entries.get(group.returnedSeq);
    if (!authorized || !returned) continue; // purged by retention (or deleted: the audit says which)
    const bodies: [Buffer, Buffer] = [authorized.body, returned.body];
    if (groupIntact(batch, group, bodies)) out.push({ group, bodies });
  }
  return out;
}

/**
 * The leaves of a hash-tree renewal with `hash`: every entry of the sealed batches that is still present, as
 * sealed (an entry whose bytes changed refuses the renewal: `qtsp evidence audit` names it), then every data
 * group of the batch whose two entries are present (RFC 4998 5.3 for a data group).
 */
async function hashRenewalLeaves(
  store: Store,
  hash: HashAlgorithm,
  batches: readonly JournalBatch[],
  renewals: readonly JournalRenewal[],
): Promise<RenewalLeaf[]> {
  const leaves: RenewalLeaf[] = [];
  for (const batch of batches) {
    const sealedHash = nodeHash(hashOf(batch.hashOid));
    const entries = new Map((await store.journal.entries(batch.firstSeq - 1, batch.throughSeq)).map((e) => [e.seq, e]));
    for (const leaf of batch.leaves) {
      const entry = entries.get(leaf.seq);
      if (!entry) continue; // purged by retention (or deleted: the audit says which)
      if (!sealedHash(entry.body).equals(leaf.hash))
        throw new Error(`journal: entry ${leaf.seq} differs from what batch ${batch.batchNo} sealed: run the audit`);
      leaves.push({ key: leaf.seq, hash: hashRenewalLeaf(hash, entry.body, recordChains(batch, leaf.seq, renewals)) });
    }
    for (const { group, bodies } of await intactGroups(store, batch, entries))
      leaves.push({
        key: groupKey(group),
        hash: hashRenewalGroupLeaf(hash, bodies, groupChains(batch, group, bodies, renewals)!),
      });
    await turn(); // a long renewal lets other work in
  }
  return leaves;
}

/** Hash-tree renewal (RFC 4998 5.3) with `hash`, which must differ from the hash of every current chain. */
export async function renewHashTree(
  store: Store,
  tsa: TimestampProvider,
  hash: HashAlgorithm,
): Promise<JournalRenewal | undefined> {
  const batches = await allBatches(store);
  const renewals = await store.journal.renewals();
  const inUse = new Set(currentChains(batches, renewals).map((c) => c.hash.oid));
  if (inUse.has(hash.oid))
    throw new Error(`journal: ${hash.name} is the hash of a current chain; renew with another one`);
  const leaves = await hashRenewalLeaves(store, hash, batches, renewals);
  if (leaves.length === 0) return undefined;
  const root = treeRoot(
    nodeHash(hash),
    leaves.map((l) => l.hash),
  );
  const token = await tsa.timestamp(root, hash);
  return addRenewal(store, {
    renewalNo: (renewals.at(-1)?.renewalNo ?? 0) + 1,
    kind: 'hashtree',
    hashOid: hash.oid,
    chainOf: null,
    throughBatch: batches.at(-1)!.batchNo,
    leaves,
    root,
    token,
    renewedAt: genTimeOf(token),
  });
}

/** close(): stops the timer and waits for a check under way */
export type RenewalJob = PeriodicTask;

/**
 * The time-stamp renewals due now (one per hash algorithm of the current chains whose earliest TSA certificate
 * ends within `marginMs`): after a check that renewed them, 0; more while a renewal fails.
 */
export async function renewalsDue(store: Store, marginMs: number, now = new Date()): Promise<number> {
  const byHash = new Map<string, CurrentChain[]>();
  for (const c of currentChains(await allBatches(store), await store.journal.renewals()))
    byHash.set(c.hash.oid, [...(byHash.get(c.hash.oid) ?? []), c]);
  return [...byHash.values()].filter((chains) => earliestEnd(chains).getTime() - marginMs <= now.getTime()).length;
}

/**
 * Checks every `intervalSeconds` whether a time-stamp renewal is due (margin `marginDays`), the first time one
 * interval after the start, as the retention purge is scheduled; 0: never (`qtsp evidence renew` only).
 * A failed check is logged and tried next time. After each check, the renewals still due are told to `checked`
 * (the metrics).
 */
export function startRenewalCheck(
  store: Store,
  tsa: TimestampProvider,
  settings: { readonly renewCheckIntervalSeconds: number; readonly renewMarginDays: number },
  logger: Logger,
  checked: (due: number) => void = () => undefined,
): RenewalJob {
  if (settings.renewCheckIntervalSeconds === 0) return { close: async () => undefined };
  const marginMs = settings.renewMarginDays * 86_400_000;
  return runEvery(settings.renewCheckIntervalSeconds * 1000, async () => {
    await renewDue(store, tsa, marginMs, logger);
    await renewalsDue(store, marginMs).then(checked, () => undefined);
  });
}

/** One check: renews what is due; a failure is logged. */
async function renewDue(store: Store, tsa: TimestampProvider, marginMs: number, logger: Logger): Promise<void> {
  try {
    const renewed = await renewTimeStamps(store, tsa, { marginMs });
    for (const r of renewed)
      logger.info(
        { event: 'journal.renewed', renewal: r.renewalNo, kind: r.kind, chains: r.leaves.length },
        'evidence records renewed',
      );
  } catch (err) {
    logger.warn(
      { event: 'journal.renewal_failed', error: (err as Error).message },
      'evidence renewal failed; tried again later',
    );
  }
}
