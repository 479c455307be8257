/**
 * The evidence records of a signing: each journal entry about it (its certificate serial) as the data object
 * (the canonical JSON bytes) with its RFC 4998 EvidenceRecord, once its batch is sealed.
 */
import type { JournalRenewal, Store, StoredJournalEntry } from '../store/types.ts';
import { evidenceRecord, secondEvidenceRecord } from './evidence-record.ts';

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
  for (const entry of entries) {
    const batch = await store.journal.batchOf(entry.seq);
    out.push({
      entry,
      record: batch ? evidenceRecord(batch, entry.seq, all) : undefined,
      secondRecord: batch ? secondEvidenceRecord(batch, entry.seq) : undefined,
    });
  }
  return out;
}

/** file names of an entry's data object and records: journal-<seq>-<kind>.json / .ers / .tsa2.ers */
export function recordFileNames(entry: StoredJournalEntry): { data: string; record: string; secondRecord: string } {
  const base = `journal-${entry.seq}-${entry.kind}`;
  return { data: `${base}.json`, record: `${base}.ers`, secondRecord: `${base}.tsa2.ers` };
}
