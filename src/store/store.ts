/**
 * The store (types.ts), once for both databases: every query is written with Kysely, which speaks SQLite's
 * and PostgreSQL's SQL; what the two do differently is in dialects.ts. One contract suite
 * (test/store/store-contract.ts) runs against both.
 *
 * Reads go straight to the database. Writes are compiled and handed to the dialect's writer as one atomic
 * unit each (SQLite: a savepoint in a group commit; PostgreSQL: a transaction), so recordSigning's rows land
 * together or not at all, and a write resolves only once it is durable.
 *
 * The store is put together from its parts, one per concern: certificates (certificates.ts), the evidence of
 * each signDoc (evidence.ts), the outbox (outbox.ts), documents signed under a consent (documents.ts), the
 * sealed journal (journal.ts), and here readiness' write probe.
 */
import { randomUUID } from 'node:crypto';
import { type StoreAccess, storeAccess } from './access.ts';
import { auditReads } from './audit-reads.ts';
import { certificates } from './certificates.ts';
import type { StoreDialect } from './dialects.ts';
import { documents } from './documents.ts';
import { evidence } from './evidence.ts';
import { entryInsert, journal } from './journal.ts';
import { outbox } from './outbox.ts';
import { retention } from './retention.ts';
import type { Store } from './types.ts';

/** Choices the store is made with; `journal: false` writes no journal entry (config journal.enabled). */
export interface StoreOptions {
  readonly journal?: boolean;
}

export function createStore(dialect: StoreDialect, options: StoreOptions = {}): Store {
  const access = storeAccess(dialect);
  const journaling = options.journal !== false;
  const certificateParts = certificates(access, journaling);
  const outboxParts = outbox(access);
  // undefined with the journal off: the writes that carry an entry then carry none
  const insertJournal = journaling ? entryInsert(access) : undefined;
  return {
    driver: dialect.driver,
    ...evidence(access, {
      insertCertificate: certificateParts.insert,
      insertOutbox: outboxParts.insert,
      insertJournal,
    }),
    ...certificateParts.methods,
    ...outboxParts.methods,
    ...documents(access, outboxParts.insert, insertJournal),
    ...retention(access),
    journal: journal(access, dialect.driver, journaling),
    audit: auditReads(access),
    ping: writeProbe(access, dialect.probeFiller),
    close: access.close,
  };
}

/**
 * Readiness' ping: a committed write, so a database that cannot write (disk full, file at its cap, read-only
 * replica) fails here as an evidence record would; the deleted row's pages are reused.
 */
function writeProbe(a: StoreAccess, filler: Buffer | undefined): Store['ping'] {
  const probeId = randomUUID();
  return async () => {
    a.ensureOpen();
    const row = { id: probeId, at: a.time(new Date()), ...(filler ? { filler } : {}) };
    await a.write([
      a.db.insertInto('health_probe').values(row),
      a.db.deleteFrom('health_probe').where('id', '=', probeId),
    ]);
  };
}
