/**
 * `qtsp evidence show TXN`: what the store holds for one AS transaction (spec 5.13, 6.3.1): each signing with
 * its hashes, the signer certificate with its status, the signatures kept for it (signing/once.ts) and the
 * introspection JWT exactly as received (the evidence; an access token is never stored, so none can be
 * printed). The decoded JWT payload is shown for reading only; it is not verified here (that is
 * `qtsp evidence verify`).
 * `qtsp evidence export`: the evidence of a period as a verifiable archive (retention/export.ts).
 * Opens the store the QTSP uses (same configuration: QTSP_STORE_*, --data-dir), read-only in effect; SQLite's
 * WAL lets this run beside a serving QTSP.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { hashByOid } from '../crypto/algorithms.ts';
import { loadConfig } from '../config/load.ts';
import { openStore } from '../store/open.ts';
import { signaturesOf } from '../retention/signatures.ts';
import type {
  CertificateStatus,
  SigningTransaction,
  Store,
  StoredCertificate,
  StoredDocument,
  StoredJournalEntry,
} from '../store/types.ts';
import { toPem } from '../util/base64.ts';
import { verifyStoredSignings } from '../trust/evidence-verify.ts';
import { auditJournal, describeFinding } from '../journal/audit.ts';
import { groupFileNames, groupRecordsOf, recordFileNames, recordsOf } from '../journal/records.ts';
import { signingObjects } from '../journal/signing-objects.ts';
import { ensurePrivateDir, writePrivateFile } from '../util/private-files.ts';
import type { TokenTrust } from '../journal/token-trust.ts';
import { journalTsaCertificates } from '../journal/tsa-chain.ts';
import type { Config } from '../config/schema.ts';
import { evidenceStoreMissing, runExport, runRenew } from './evidence-export.ts';
import { checkAnchor } from '../journal/anchor.ts';
import { printAnchorFindings, readAnchor, withAnchor } from './evidence-anchor.ts';
import { evidenceTrust } from './evidence-trust.ts';

const USAGE =
  'usage: qtsp evidence show TXN [--data-dir DIR] [--json]\n' +
  '       qtsp evidence verify TXN [--data-dir DIR]\n' +
  '       qtsp evidence record TXN --out DIR [--root FILE] [--data-dir DIR]\n' +
  '       qtsp evidence audit [--from DATE] [--to DATE] [--root FILE] [--anchor FILE|DIR|URL] [--data-dir DIR]\n' +
  '                           [--json]\n' +
  '       qtsp evidence renew [--force] [--hash SHA-512] [--data-dir DIR] [--tsa-url URL] [--publication-url URL]\n' +
  '       qtsp evidence export --from DATE --to DATE --out DIR [--data-dir DIR] [--tsa-url URL]\n' +
  '                            [--publication-url URL]\n';

function statusText(s: CertificateStatus): string {
  return s.status === 'revoked' ? `revoked at ${s.revokedAt.toISOString()} (${s.reason})` : s.status;
}

function decodedPayload(jwt: string): string {
  try {
    return JSON.stringify({ header: decodeProtectedHeader(jwt), payload: decodeJwt(jwt) }, null, 2);
  } catch {
    return '(not a decodable JWT)';
  }
}

const indent = (text: string, by = '    ') => text.replace(/^/gm, by);

/** The signatures kept for a signing: document hash, when, what was asked, and the signature object (Base64). */
function formatSignatures(t: SigningTransaction, signatures: readonly StoredDocument[]): string[] {
  const lines = [`  kept signatures   ${signatures.length} of ${t.hashes.length} documents`];
  for (const d of signatures) {
    const bytes = Buffer.from(d.signature!, 'base64');
    const revocation = d.revocation
      ? `, revocationInfo ${d.revocation.ocsp.length} OCSP ${d.revocation.crl.length} CRL`
      : '';
    lines.push(
      `    [${t.hashes.indexOf(d.hash)}] ${d.hash}`,
      `        signed ${d.signedAt?.toISOString() ?? 'unknown'} (${d.requestKey}${revocation})`,
      `        ${bytes.length} bytes, SHA-256 ${createHash('sha256').update(bytes).digest('hex')}`,
      indent(d.signature!, '        '),
    );
  }
  return lines;
}

export function formatSigning(
  t: SigningTransaction,
  certificate: StoredCertificate | undefined,
  index: number,
  total: number,
  signatures: readonly StoredDocument[] = [],
): string {
  const alg = hashByOid(t.hashAlgorithmOid);
  const lines = [
    `signing ${index + 1} of ${total} for txn ${t.txn}`,
    `  time              ${t.createdAt.toISOString()}`,
    `  issuer (iss)      ${t.iss}`,
    `  user (sub)        ${t.sub}`,
    `  relying party     ${t.clientId} (client_state ${t.clientState})`,
    `  format, level     ${t.signatureFormat}, ${t.conformanceLevel}`,
    `  AS key vouched by ${t.keySource ?? 'not recorded'}`,
    `  signer key kept in ${t.keyCustody ?? 'not recorded (software)'}`,
    `  hashes            ${t.hashes.length} x ${alg?.name ?? 'unknown algorithm'} (${t.hashAlgorithmOid})`,
    ...t.hashes.map((h, i) => `    [${i}] ${h}`),
    `  signer certificate serial ${t.certificateSerialHex}`,
  ];
  if (certificate) {
    lines.push(
      `    subject         ${certificate.subject}`,
      `    issuer key id   ${certificate.issuerKeyId}`,
      `    valid           ${certificate.notBefore.toISOString()} .. ${certificate.notAfter.toISOString()}`,
      `    issued          ${certificate.issuedAt.toISOString()}`,
      `    status          ${statusText(certificate.status)}`,
      indent(toPem(certificate.der, 'CERTIFICATE').trimEnd()),
    );
  } else {
    lines.push('    (certificate not found in the store)');
  }
  lines.push(
    ...formatSignatures(t, signatures),
    '  introspection response (signed JWT, as received):',
    indent(t.introspectionJwt),
    '  decoded (not verified here):',
    indent(decodedPayload(t.introspectionJwt)),
  );
  return `${lines.join('\n')}\n`;
}

async function show(store: Store, txn: string, json: boolean): Promise<number> {
  const signings = await store.getTransaction(txn);
  if (signings.length === 0) {
    process.stderr.write(`no signing recorded for txn ${txn}\n`);
    return 1;
  }
  const certificates = await Promise.all(signings.map((t) => store.getCertificate(t.certificateSerialHex)));
  const signatures = await keptSignatures(store, signings);
  if (json) {
    const out = signings.map((t, i) => ({
      ...t,
      certificate: certificates[i] && { ...certificates[i], der: certificates[i]!.der.toString('base64') },
      signatures: signatures[i],
    }));
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  } else {
    const text = signings.map((t, i) => formatSigning(t, certificates[i], i, signings.length, signatures[i]));
    process.stdout.write(text.join('\n'));
  }
  return 0;
}

/** the signatures kept for each signing of one txn (its consents: one per issuer) */
async function keptSignatures(store: Store, signings: readonly SigningTransaction[]): Promise<StoredDocument[][]> {
  const issuers = [...new Set(signings.map((t) => t.iss))];
  const documents = (await Promise.all(issuers.map((iss) => store.documentsOf(iss, signings[0]!.txn)))).flat();
  return signings.map((t) =>
    signaturesOf(
      t,
      signings.filter((s) => s.iss === t.iss),
      documents,
    ),
  );
}

/**
 * The objects a signing's format-3 entries name by their SHA-256 (journal/signing-objects.ts), from their rows,
 * into `dir` beside the entries: the number of those that are not what their sealed entry says (said on stderr).
 */
function writeObjects(
  dir: string,
  signing: SigningTransaction,
  certificate: StoredCertificate | undefined,
  signatures: readonly StoredDocument[],
  entries: readonly StoredJournalEntry[],
): number {
  const objects = signingObjects(signing, certificate, signatures, entries);
  if (!objects.named) return 0; // formats 1 and 2 carry the objects in the entries themselves
  for (const o of objects.files) {
    writePrivateFile(join(dir, o.file), o.bytes);
    process.stdout.write(`${join(dir, o.file)}\n`);
  }
  for (const d of objects.differs)
    process.stderr.write(`${join(dir, d)}: not what its sealed journal entry says (qtsp evidence audit)\n`);
  return objects.differs.length;
}

/** A signing's entries with their records, and the record over both entries as one data group (records.ts). */
async function writeSigningRecords(store: Store, signing: SigningTransaction, dir: string, kept: StoredDocument[]) {
  ensurePrivateDir(dir);
  let pending = 0;
  const records = await recordsOf(store, signing.certificateSerialHex);
  for (const { entry, record, secondRecord } of records) {
    const names = recordFileNames(entry);
    writePrivateFile(join(dir, names.data), entry.body);
    if (record) writePrivateFile(join(dir, names.record), record);
    else pending++;
    process.stdout.write(`${join(dir, record ? names.record : names.data)}\n`);
    if (secondRecord) {
      writePrivateFile(join(dir, names.secondRecord), secondRecord);
      process.stdout.write(`${join(dir, names.secondRecord)}\n`);
    }
  }
  for (const group of await groupRecordsOf(store, signing.certificateSerialHex)) {
    const names = groupFileNames(group);
    writePrivateFile(join(dir, names.record), group.record);
    process.stdout.write(`${join(dir, names.record)}\n`);
    if (group.secondRecord) {
      writePrivateFile(join(dir, names.secondRecord), group.secondRecord);
      process.stdout.write(`${join(dir, names.secondRecord)}\n`);
    }
  }
  const certificate = await store.getCertificate(signing.certificateSerialHex);
  const entries = records.map((r) => r.entry);
  return { pending, differs: writeObjects(dir, signing, certificate, kept, entries) };
}

/**
 * `record TXN --out DIR`: for each signing of the txn, its journal entries (the data objects, canonical JSON)
 * and their RFC 4998 evidence records, as BouncyCastle's ERSEvidenceRecord or any RFC 4998 verifier reads them,
 * the record over both entries as one data group, and the objects the entries name by digest. 1 when one of
 * those is not what its sealed entry says.
 */
async function writeRecords(store: Store, txn: string, out: string | undefined, trust: TokenTrust): Promise<number> {
  if (!out) {
    process.stderr.write(`--out DIR is required\n${USAGE}`);
    return 2;
  }
  const signings = await store.getTransaction(txn);
  if (signings.length === 0) {
    process.stderr.write(`no signing recorded for txn ${txn}\n`);
    return 1;
  }
  ensurePrivateDir(out);
  const kept = await keptSignatures(store, signings);
  let pending = 0;
  let differs = 0;
  for (const [i, signing] of signings.entries()) {
    const written = await writeSigningRecords(store, signing, join(out, signing.certificateSerialHex), kept[i]!);
    pending += written.pending;
    differs += written.differs;
  }
  if (pending > 0) process.stderr.write(`${pending} entry(ies) not sealed yet: no record until the next seal\n`);
  await writeTsaChain(store, trust, out);
  return differs === 0 ? 0 : 1;
}

/**
 * `tsa-chain.pem` beside the records: our TSA certificates their tokens name (each issued by our root), then
 * the root. It helps a verifier build the path; the anchor it validates against is the root it holds.
 */
async function writeTsaChain(store: Store, trust: TokenTrust, out: string): Promise<void> {
  const chain = [...(await journalTsaCertificates(store, trust)), ...(trust.external ?? []), trust.ours.root];
  const file = join(out, 'tsa-chain.pem');
  writePrivateFile(file, chain.map((der) => toPem(der, 'CERTIFICATE')).join(''));
  process.stdout.write(`${file}\n`);
}

/**
 * `show TXN ...` / `verify TXN ...`. The AS chooses txn values (the sandbox's are base64url, and one in 64
 * starts with '-'), so the word after the subcommand is the txn whatever it starts with, unless it is a long
 * option (then the txn comes later, or after `--`).
 */
function splitArgs(args: readonly string[]): { sub: string | undefined; txn: string | undefined; rest: string[] } {
  const [sub, second] = args;
  return second !== undefined && !second.startsWith('--')
    ? { sub, txn: second, rest: args.slice(2) }
    : { sub, txn: undefined, rest: args.slice(1) };
}

/** What the audit and the records trust (evidence-trust.ts); undefined, after saying why on stderr, when unreadable. */
function trustOrSay(config: Config, rootFile: string | undefined): TokenTrust | undefined {
  try {
    return evidenceTrust(config, rootFile);
  } catch (err) {
    process.stderr.write(`no trust anchor to judge the time-stamps by: ${(err as Error).message} (--root FILE)\n`);
    return undefined;
  }
}

/**
 * `audit [--from DATE] [--to DATE] [--root FILE] [--anchor FILE|DIR|URL] [--json]`: 0 when clean, 1 when
 * something was found (journal/audit.ts, the time-stamps judged against --root, else the data directory's root:
 * evidence-trust.ts; with --anchor, also batches kept elsewhere that the store lacks or holds otherwise:
 * journal/anchor.ts), 2 when an argument or the anchor cannot be read
 */
async function runAudit(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      'data-dir': { type: 'string' },
      json: { type: 'boolean', default: false },
      from: { type: 'string' },
      to: { type: 'string' },
      anchor: { type: 'string' },
      root: { type: 'string' },
    },
  });
  const date = (text: string | undefined) => (text === undefined ? undefined : new Date(text));
  const from = date(values.from);
  const to = date(values.to);
  if ([from, to].some((d) => d && Number.isNaN(d.getTime()))) {
    process.stderr.write(`--from and --to are dates (ISO 8601)\n${USAGE}`);
    return 2;
  }
  const config = loadConfig(values['data-dir'] ? { dataDir: values['data-dir'] } : {});
  const anchor = await readAnchor(values.anchor, config.trust.httpTimeoutMs);
  if (anchor === 'unreadable') return 2;
  if (evidenceStoreMissing(config)) return 1;
  const trust = trustOrSay(config, values.root);
  if (!trust) return 1;
  const store = await openStore(config);
  try {
    const report = await auditJournal(store, { ...(from ? { from } : {}), ...(to ? { to } : {}), trust });
    const anchored = anchor && (await checkAnchor(store, anchor));
    if (values.json) process.stdout.write(`${JSON.stringify(withAnchor(report, anchor, anchored), null, 2)}\n`);
    else {
      for (const f of report.findings) process.stdout.write(`${describeFinding(f)}\n`);
      process.stdout.write(
        `${report.batches} batch(es) (${report.secondTimeStamps} also time-stamped by the second TSA), ` +
          `${report.entries} sealed entries checked, ${report.unsealed} not sealed yet` +
          `${report.rowsBeforeJournal > 0 ? `, ${report.rowsBeforeJournal} row(s) from before the journal` : ''}: ` +
          `${report.clean ? 'clean' : `${report.findings.filter((f) => f.kind !== 'purged').length} finding(s)`}\n`,
      );
      if (anchor && anchored) printAnchorFindings(anchor, anchored);
    }
    return report.clean && !anchored?.length ? 0 : 1;
  } finally {
    await store.close();
  }
}

export async function runEvidence(args: string[]): Promise<number> {
  if (args[0] === 'export') return runExport(args.slice(1), USAGE);
  if (args[0] === 'audit') return runAudit(args.slice(1));
  if (args[0] === 'renew') return runRenew(args.slice(1), USAGE);
  const split = splitArgs(args);
  const { positionals, values } = parseArgs({
    args: split.rest,
    allowPositionals: true,
    options: {
      'data-dir': { type: 'string' },
      json: { type: 'boolean', default: false },
      out: { type: 'string' },
      root: { type: 'string' },
    },
  });
  const sub = split.sub;
  const txn = split.txn ?? positionals[0];
  if (!txn || positionals.length !== (split.txn === undefined ? 1 : 0)) {
    process.stderr.write(USAGE);
    return 2;
  }
  const config = loadConfig(values['data-dir'] ? { dataDir: values['data-dir'] } : {});
  if (evidenceStoreMissing(config)) return 1;
  const store = await openStore(config);
  try {
    switch (sub) {
      case 'show':
        return await show(store, txn, values.json);
      case 'record': {
        const trust = trustOrSay(config, values.root);
        return trust ? await writeRecords(store, txn, values.out, trust) : 1;
      }
      case 'verify': {
        // re-checks the stored introspection JWT against the key the archive held at its iat
        // (src/trust/evidence-verify.ts)
        const signings = await store.getTransaction(txn);
        if (signings.length === 0) {
          process.stderr.write(`no signing recorded for txn ${txn}\n`);
          return 1;
        }
        return await verifyStoredSignings(signings, config, {
          stdout: (t) => process.stdout.write(t),
          stderr: (t) => process.stderr.write(t),
        });
      }
      default:
        process.stderr.write(USAGE);
        return 2;
    }
  } finally {
    await store.close();
  }
}
