/**
 * The evidence records of a signing: each journal entry about it (its certificate serial) as the data object
 * (the canonical JSON bytes) with its RFC 4998 EvidenceRecord, once its batch is sealed.
 */
import type { JournalRenewal, Store, StoredJournalEntry } from '../store/types.ts';
import { evidenceRecord } from './evidence-record.ts';

export interface EntryRecord {
  readonly entry: StoredJournalEntry;
  /** DER EvidenceRecord; undefined while the entry waits for its batch */
  readonly record: Buffer | undefined;
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
    out.push({ entry, record: batch ? evidenceRecord(batch, entry.seq, all) : undefined });
  }
  return out;
}

/** file names of an entry's data object and record: journal-<seq>-<kind>.json / .ers */
export function recordFileNames(entry: StoredJournalEntry): { data: string; record: string } {
  const base = `journal-${entry.seq}-${entry.kind}`;
  return { data: `${base}.json`, record: `${base}.ers` };
}
