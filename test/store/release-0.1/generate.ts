/**
 * Writes test/store/release-0.1/qtsp.sqlite with the SQLite store of release fdcfad6 itself (kept here so the
 * fixture can be made again; today's code cannot make it). Run from the repository root:
 *   mkdir -p .old-store && for f in sqlite records types; do git show fdcfad6:src/store/$f.ts > .old-store/$f.ts; done
 *   node --import tsx test/store/release-0.1/generate.ts && rm -r .old-store
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { olderCertificate, outbox, revocation, revokedCertificate, signerCertificate, transactions } from './rows.ts';

const old = (await import(pathToFileURL(join(process.cwd(), '.old-store', 'sqlite.ts')).href)) as {
  openSqliteStore(file: string): import('../../../src/store/types.ts').Store;
};
const file = join(process.cwd(), 'test', 'store', 'release-0.1', 'qtsp.sqlite');
rmSync(file, { force: true });
const store = old.openSqliteStore(file);
await store.recordSigning({ certificate: olderCertificate, transaction: transactions[0]! });
await store.recordSigning({ certificate: signerCertificate, transaction: transactions[1]!, outbox: [outbox[0]!] });
await store.addCertificate(revokedCertificate);
await store.revokeCertificate(revokedCertificate.serialHex, revocation.reason, revocation.revokedAt);
await store.addOutbox([outbox[1]!]);
await store.markOutbox(outbox[1]!.id, 'delivered', outbox[1]!.lastError!);
await store.close(); // WAL checkpointed into the one file
