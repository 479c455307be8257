/**
 * The evidence records of a signing: each journal entry about it (its certificate serial) as the data object
 * (the canonical JSON bytes) with its RFC 4998 EvidenceRecord, once its batch is sealed.
 */
import type { Store, StoredJournalEntry } from '../store/types.ts';
import { evidenceRecord } from './evidence-record.ts';

export interface EntryRecord {
  readonly entry: StoredJournalEntry;
  /** DER EvidenceRecord; undefined while the entry waits for its batch */
  readonly record: Buffer | undefined;
}

export async function recordsOf(store: Store, certificateSerialHex: string): Promise<EntryRecord[]> {
  const entries = await store.journal.entriesOf(certificateSerialHex);
  const out: EntryRecord[] = [];
  for (const entry of entries) {
    const batch = await store.journal.batchOf(entry.seq);
    out.push({ entry, record: batch ? evidenceRecord(batch, entry.seq) : undefined });
  }
  return out;
}

/** file names of an entry's data object and record: journal-<seq>-<kind>.json / .ers */
export function recordFileNames(entry: StoredJournalEntry): { data: string; record: string } {
  const base = `journal-${entry.seq}-${entry.kind}`;
  return { data: `${base}.json`, record: `${base}.ers` };
}
