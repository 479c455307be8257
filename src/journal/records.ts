/**
 * The evidence records of a signing: each journal entry about it (its certificate serial) as the data object
 * (the canonical JSON bytes) with its RFC 4998 EvidenceRecord, once its batch is sealed; and one record over
 * both of its entries (signing.authorized and signing.returned) as a data group.
 */
import type { JournalRenewal, Store, StoredJournalEntry } from '../store/types.ts';
import { evidenceRecord, groupEvidenceRecord, groupIntact, secondEvidenceRecord } from './evidence-record.ts';

export interface EntryRecord {
  readonly entry: StoredJournalEntry;
  /** DER EvidenceRecord; undefined while the entry waits for its batch */
  readonly record: Buffer | undefined;
  /** DER EvidenceRecord under the batch's second time-stamp (another operator's TSA), when it has one */
  readonly secondRecord: Buffer | undefined;
}

/**
 * `renewals`: the journal's renewals (store.journal.renewals()), read once by a caller that asks for many
 * signings' records (an export); read here when not given.
 */
export async function recordsOf(
  store: Store,
  certificateSerialHex: string,
  renewals?: readonly JournalRenewal[],
): Promise<EntryRecord[]> {
  const entries = await store.journal.entriesOf(certificateSerialHex);
  const all = renewals ?? (await store.journal.renewals());
  const out: EntryRecord[] = [];
  let sealedThrough: number | undefined;
  // seq 0, -7, or one in a gap between batches: no batch sealed it and none ever will
  const neverSealed = async (seq: number) => {
    if (seq < 1) return true;
    sealedThrough ??= await lastSealed(store);
    return seq <= sealedThrough;
  };
  for (const entry of entries) {
    const batch = await store.journal.batchOf(entry.seq);
    // an entry that is no leaf of its batch, or that no batch sealed below the last one, gets no record and is
    // not handed out as a data object either (the audit names it)
    if (batch ? !batch.leaves.some((l) => l.seq === entry.seq) : await neverSealed(entry.seq)) continue;
    out.push({
      entry,
      record: batch ? evidenceRecord(batch, entry.seq, all) : undefined,
      secondRecord: batch ? secondEvidenceRecord(batch, entry.seq) : undefined,
    });
  }
  return out;
}

const lastSealed = async (store: Store) => (await store.journal.lastBatch())?.throughSeq ?? 0;

/** file names of an entry's data object and records: journal-<seq>-<kind>.json / .ers / .tsa2.ers */
export function recordFileNames(entry: StoredJournalEntry): { data: string; record: string; secondRecord: string } {
  const base = `journal-${entry.seq}-${entry.kind}`;
  return { data: `${base}.json`, record: `${base}.ers`, secondRecord: `${base}.tsa2.ers` };
}

/** A signing's two entries as one data group, with the record over both (and under the second TSA's token). */
export interface GroupRecord {
  readonly authorized: StoredJournalEntry;
  readonly returned: StoredJournalEntry;
  readonly record: Buffer;
  readonly secondRecord: Buffer | undefined;
}

/** The group records of a signing: one per signing.returned entry sealed with its data group. */
export async function groupRecordsOf(
  store: Store,
  certificateSerialHex: string,
  renewals?: readonly JournalRenewal[],
): Promise<GroupRecord[]> {
  const entries = await store.journal.entriesOf(certificateSerialHex);
  const all = renewals ?? (await store.journal.renewals());
  const out: GroupRecord[] = [];
  for (const returned of entries.filter((e) => e.kind === 'signing.returned')) {
    const batch = await store.journal.batchOf(returned.seq);
    const group = batch?.groups?.find((g) => g.returnedSeq === returned.seq);
    const authorized = group && entries.find((e) => e.seq === group.authorizedSeq);
    if (!batch || !group || !authorized) continue;
    const bodies: [Buffer, Buffer] = [authorized.body, returned.body];
    if (!groupIntact(batch, group, bodies)) continue; // an entry not as sealed: the audit names it
    out.push({
      authorized,
      returned,
      record: groupEvidenceRecord(batch, group, bodies, all)!,
      secondRecord: groupEvidenceRecord(batch, group, bodies, all, true),
    });
  }
  return out;
}

/** file names of a group's records: journal-<seq>-<seq>-signing.group.ers / .group.tsa2.ers */
export function groupFileNames(group: GroupRecord): { record: string; secondRecord: string } {
  const base = `journal-${group.authorized.seq}-${group.returned.seq}-signing.group`;
  return { record: `${base}.ers`, secondRecord: `${base}.tsa2.ers` };
}
