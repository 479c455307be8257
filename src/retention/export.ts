/**
 * `qtsp evidence export`: the evidence of a period as a directory an operator can archive (tar it, copy it to
 * write-once storage) before the purge deletes it. Every file is plain: a signing's introspection JWT exactly as
 * received (spec 5.13), its signer certificate (PEM), its kept signatures (DER CMS or XML, as returned) and a
 * JSON of what the store held; the CA certificates that issued them; `manifest.json`, naming every file with its
 * SHA-256; and `manifest.tsr`, an RFC 3161 TimeStampResp of our TSA over SHA-256 of manifest.json. An auditor
 * checks the archive with openssl alone:
 *
 *   openssl ts -verify -data manifest.json -in manifest.tsr -CAfile ca/root.pem
 *   sha256sum of each file against the manifest
 *
 * Each signing also carries its journal entries (journal-<seq>-<kind>.json, the canonical bytes) and, once
 * sealed, their RFC 4998 evidence records (.ers; .tsa2.ers under a second TSA's token), which outlive the
 * manifest's one time-stamp, and one record over both entries as a data group (docs/evidence.md).
 *
 * Entries of format 3 name the JWT, the certificate, the signatures and the revocationInfo by SHA-256 alone:
 * each file of those is checked against its sealed entry (journal/signing-objects.ts), and a signing.returned
 * entry's revocationInfo is written as the bytes its digest covers.
 *
 * Layout: signings/<created, UTC>-<certificate serial>/{signing.json, introspection.jwt, certificate.pem,
 * signature-<n>.p7s|.xml, journal-<seq>-<kind>.json|.ers|.tsa2.ers,
 * journal-<seq>-signing.returned.revocation-info.json, journal-<seq>-<seq>-signing.group.ers|.group.tsa2.ers};
 * journal/{batches.json, batch-<n>.tst|.tsa2.tst} (the chain of batches sealed in the period, writeBatchChain);
 * ca/<name>.pem; manifest.json; manifest.tsr.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { SHA256 } from '../crypto/algorithms.ts';
import type { TimestampProvider } from '../timestamping/provider.ts';
import { timeStampResp } from '../timestamping/tsa.ts';
import type { JournalBatch, JournalRenewal, SigningTransaction, Store, StoredDocument } from '../store/types.ts';
import { toPem } from '../util/base64.ts';
import { ensurePrivateDir, writePrivateFile } from '../util/private-files.ts';
import { signaturesOf } from './signatures.ts';
import { batchHeader } from '../journal/anchor.ts';
import { groupFileNames, groupRecordsOf, recordFileNames, recordsOf } from '../journal/records.ts';
import { signingObjects } from '../journal/signing-objects.ts';

export const ARCHIVE_FORMAT = 'qtsp-evidence-archive/1';
const PAGE = 200;

export interface ExportOptions {
  /** the period: signings recorded at or after `from` and before `to` */
  readonly from: Date;
  readonly to: Date;
  /** a directory that does not exist yet or is empty */
  readonly out: string;
  /** our TSA (RFC 3161), which time-stamps the manifest */
  readonly tsa: TimestampProvider;
  /** the CA certificates the archive carries (root first), DER, by file name without extension */
  readonly caCertificates: readonly { readonly name: string; readonly der: Buffer }[];
  readonly qtspId: string;
}

export interface ManifestFile {
  readonly path: string;
  readonly sha256: string;
  readonly bytes: number;
}

export interface ExportSummary {
  readonly signings: number;
  readonly signatures: number;
  readonly files: number;
  /** objects written as the store holds them that are not what their sealed journal entry says */
  readonly differs: readonly string[];
}

/** Writes the archive's files, each recorded for the manifest. */
class ArchiveWriter {
  readonly files: ManifestFile[] = [];
  constructor(private readonly out: string) {}

  write(path: string, data: string | Buffer): void {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    ensurePrivateDir(dirname(join(this.out, path)));
    writePrivateFile(join(this.out, path), bytes);
    this.files.push({ path, sha256: createHash('sha256').update(bytes).digest('hex'), bytes: bytes.length });
  }
}

const compactTime = (d: Date) =>
  d
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
/**
 * One signing: its JWT, certificate, kept signatures and what the store held, its journal entries with their
 * records, and what a format-3 entry names by digest (journal/signing-objects.ts). The signatures it wrote, and
 * each object that is not what its sealed entry says.
 */
async function writeSigning(
  store: Store,
  archive: ArchiveWriter,
  signing: SigningTransaction,
  consentOf: (s: SigningTransaction) => Promise<{ signings: SigningTransaction[]; documents: StoredDocument[] }>,
  renewals: readonly JournalRenewal[],
): Promise<{ signatures: number; differs: string[] }> {
  const dir = `signings/${compactTime(signing.createdAt)}-${signing.certificateSerialHex}`;
  const consent = await consentOf(signing);
  const signatures = signaturesOf(signing, consent.signings, consent.documents);
  const certificate = await store.getCertificate(signing.certificateSerialHex);
  const records = await recordsOf(store, signing.certificateSerialHex, renewals);
  const objects = signingObjects(
    signing,
    certificate,
    signatures,
    records.map((r) => r.entry),
  );
  for (const o of objects.files) archive.write(`${dir}/${o.file}`, o.bytes);
  const kept = signatures.map((d, i) => ({
    file: objects.signatures[i]!,
    hash: d.hash,
    signedAt: d.signedAt,
    requestKey: d.requestKey,
    revocation: d.revocation,
  }));
  const { introspectionJwt: _jwt, ...fields } = signing;
  const record = {
    ...fields,
    certificate: certificate && { subject: certificate.subject, status: certificate.status, file: 'certificate.pem' },
    introspectionJwt: 'introspection.jwt',
    signatures: kept,
  };
  archive.write(`${dir}/signing.json`, `${JSON.stringify(record, null, 2)}\n`);
  // the journal entries of the signing with their RFC 4998 evidence records (journal/records.ts)
  for (const { entry, record: ers, secondRecord } of records) {
    const names = recordFileNames(entry);
    archive.write(`${dir}/${names.data}`, entry.body);
    if (ers) archive.write(`${dir}/${names.record}`, ers);
    if (secondRecord) archive.write(`${dir}/${names.secondRecord}`, secondRecord);
  }
  for (const group of await groupRecordsOf(store, signing.certificateSerialHex, renewals)) {
    const names = groupFileNames(group);
    archive.write(`${dir}/${names.record}`, group.record);
    if (group.secondRecord) archive.write(`${dir}/${names.secondRecord}`, group.secondRecord);
  }
  return { signatures: kept.length, differs: objects.differs.map((d) => `${dir}/${d}`) };
}

/**
 * The chain of batches sealed in the period, and the one before them, which links this archive to the one
 * before it: an archive missing from a series shows as a gap in batch numbers. Per batch its seq range, every
 * leaf of its tree (the previous root, the entries' leaves, the data groups' leaves), root and genTime in
 * journal/batches.json, and its token (DER TimeStampToken) in
 * journal/batch-<n>.tst, which `openssl ts -verify -digest <root> -token_in` checks; the second TSA's token, when
 * the batch has one, in journal/batch-<n>.tsa2.tst.
 */
async function writeBatchChain(store: Store, archive: ArchiveWriter, from: Date, to: Date): Promise<number> {
  const chain: JournalBatch[] = [];
  let before: JournalBatch | undefined;
  for (let next = 1; ; ) {
    const page = await store.journal.batches(next, PAGE);
    for (const b of page) {
      if (b.sealedAt < from) before = b;
      else if (b.sealedAt < to) chain.push(b);
    }
    if (page.length < PAGE) break;
    next += page.length;
  }
  if (before) chain.unshift(before);
  const batches = chain.map((b) => {
    archive.write(`journal/batch-${b.batchNo}.tst`, b.token);
    if (b.secondToken) archive.write(`journal/batch-${b.batchNo}.tsa2.tst`, b.secondToken);
    return {
      ...batchHeader(b),
      leaves: b.leaves.map((l) => [l.seq, l.hash.toString('hex')]),
      // the data groups' leaves, after the entries' (journal/seal.ts batchLeaves): the root recomputes from this file
      groups: (b.groups ?? []).map((g) => [g.authorizedSeq, g.returnedSeq, g.hash.toString('hex')]),
      token: `batch-${b.batchNo}.tst`,
      secondToken: b.secondToken ? `batch-${b.batchNo}.tsa2.tst` : null,
    };
  });
  archive.write('journal/batches.json', `${JSON.stringify({ batches }, null, 2)}\n`);
  return batches.length;
}

/** every signing and document of a consent, read once per consent */
function consentReader(store: Store) {
  const cache = new Map<string, Promise<{ signings: SigningTransaction[]; documents: StoredDocument[] }>>();
  return (s: SigningTransaction) => {
    const key = JSON.stringify([s.iss, s.txn]);
    let found = cache.get(key);
    if (!found) {
      found = Promise.all([store.getTransaction(s.txn), store.documentsOf(s.iss, s.txn)]).then(
        ([signings, documents]) => ({ signings: signings.filter((t) => t.iss === s.iss), documents }),
      );
      if (cache.size > 1000) cache.clear();
      cache.set(key, found);
    }
    return found;
  };
}

/** the manifest of every file written, its SHA-256 time-stamped by the TSA */
async function sealManifest(archive: ArchiveWriter, options: ExportOptions, counts: ExportSummary): Promise<void> {
  const manifest = {
    format: ARCHIVE_FORMAT,
    qtspId: options.qtspId,
    from: options.from.toISOString(),
    to: options.to.toISOString(),
    exportedAt: new Date().toISOString(),
    signings: counts.signings,
    signatures: counts.signatures,
    files: [...archive.files].sort((x, y) => (x.path < y.path ? -1 : 1)),
  };
  const text = Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`, 'utf8');
  const token = await options.tsa.timestamp(createHash('sha256').update(text).digest(), SHA256);
  writePrivateFile(join(options.out, 'manifest.json'), text);
  writePrivateFile(join(options.out, 'manifest.tsr'), timeStampResp(token));
}

/** Writes the archive of the period; rejects, writing no manifest, when a read or the TSA fails. */
export async function exportEvidence(store: Store, options: ExportOptions): Promise<ExportSummary> {
  if (existsSync(options.out) && readdirSync(options.out).length > 0)
    throw new Error(`${options.out} is not empty: an archive goes into a new directory`);
  ensurePrivateDir(options.out);
  const archive = new ArchiveWriter(options.out);
  for (const ca of options.caCertificates) archive.write(`ca/${ca.name}.pem`, toPem(ca.der, 'CERTIFICATE'));
  const consentOf = consentReader(store);
  const renewals = await store.journal.renewals(); // read once: every record carries those covering it
  let signings = 0;
  let signatures = 0;
  const differs: string[] = [];
  let after: SigningTransaction | undefined;
  for (;;) {
    const page = await store.signingsBetween(options.from, options.to, PAGE, after);
    for (const signing of page) {
      const written = await writeSigning(store, archive, signing, consentOf, renewals);
      signatures += written.signatures;
      differs.push(...written.differs);
    }
    signings += page.length;
    after = page.at(-1);
    if (page.length < PAGE) break;
  }
  await writeBatchChain(store, archive, options.from, options.to);
  const counts = { signings, signatures, files: archive.files.length + 2, differs };
  await sealManifest(archive, options, counts);
  await store.journal.append({
    kind: 'evidence.exported',
    ref: null,
    at: new Date(),
    data: { from: options.from.toISOString(), to: options.to.toISOString(), signings, signatures },
  });
  return counts;
}
