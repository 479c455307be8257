/**
 * `qtsp evidence export --from DATE --to DATE --out DIR`: the evidence of signings recorded in [from, to) as a
 * directory an auditor verifies with openssl (retention/export.ts has the layout). The manifest is
 * time-stamped by our TSA and the CA certificates come from our publication server (server.publicBaseUrl, or
 * --publication-url), so the QTSP must be running; with tsa.url set, that external TSA time-stamps instead and
 * the archive carries its tsa.chainFile. Run it before the purge deletes the period (config `retention`).
 * `qtsp evidence renew`: an RFC 4998 renewal of the journal's evidence records (journal/renewal.ts) with the
 * same TSA: a time-stamp renewal when due (journal.renewMarginDays) or with --force, a hash-tree renewal
 * with --hash.
 */
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { pkiUrls, publicBaseUrl } from '../ca/publication.ts';
import { loadConfig } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { hashByName } from '../crypto/algorithms.ts';
import { renewHashTree, renewTimeStamps } from '../journal/renewal.ts';
import { journalTsaCertificates } from '../journal/tsa-chain.ts';
import { exportEvidence } from '../retention/export.ts';
import { openStore, sqlitePath } from '../store/open.ts';
import type { Store } from '../store/types.ts';
import { RemoteTsa } from '../timestamping/tsa.ts';
import { externalTsaChain, journalSecondTsaChain } from '../trust-services.ts';
import { httpRequest } from '../util/http-client.ts';
import { journalTrust } from '../trust-services.ts';

interface ExportArgs {
  readonly from: Date;
  readonly to: Date;
  readonly out: string;
  readonly dataDir: string | undefined;
  readonly tsaUrl: string | undefined;
  readonly publicationUrl: string | undefined;
}

/** a date or date-time (ISO 8601; a date alone is midnight UTC) */
function parseDate(text: string | undefined): Date | undefined {
  if (!text) return undefined;
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

function parseExportArgs(args: string[]): ExportArgs | string {
  const { values } = parseArgs({
    args,
    options: {
      from: { type: 'string' },
      to: { type: 'string' },
      out: { type: 'string' },
      'data-dir': { type: 'string' },
      'tsa-url': { type: 'string' },
      'publication-url': { type: 'string' },
    },
  });
  const from = parseDate(values.from);
  const to = parseDate(values.to);
  if (!from || !to || !values.out) return '--from, --to (dates, ISO 8601) and --out are required';
  if (from.getTime() >= to.getTime()) return '--from must be before --to';
  return {
    from,
    to,
    out: values.out,
    dataDir: values['data-dir'],
    tsaUrl: values['tsa-url'],
    publicationUrl: values['publication-url'],
  };
}

async function fetchCertificate(url: string, timeoutMs: number): Promise<Buffer> {
  const res = await httpRequest(url, { timeoutMs });
  if (res.status !== 200) throw new Error(`${url} answered HTTP ${res.status}`);
  return res.body;
}

/** our root and issuing CA certificates, and the chain of an external TSA when one time-stamps */
async function caCertificates(config: Config, base: string): Promise<{ name: string; der: Buffer }[]> {
  const urls = pkiUrls(base);
  const timeoutMs = config.trust.httpTimeoutMs;
  const ours = [
    { name: 'root', der: await fetchCertificate(urls.rootCert, timeoutMs) },
    { name: 'issuing', der: await fetchCertificate(urls.issuingCert, timeoutMs) },
  ];
  const external = externalTsaChain(config, ours[0]!.der);
  // the second TSA of the journal's batches (journal.secondTsaUrl): its chain checks journal/batch-<n>.tsa2.tst
  const second = journalSecondTsaChain(config);
  return [
    ...ours,
    ...external.map((der, i) => ({ name: `tsa-${i + 1}`, der })),
    ...second.map((der, i) => ({ name: `journal-tsa2-${i + 1}`, der })),
  ];
}

/**
 * Our TSA certificates the journal's tokens name, each issued by `root` (journal/tsa-chain.ts), as
 * ca/our-tsa-<n>.pem: with ca/root.pem the chain a verifier of the records builds (docs/evidence.md).
 */
async function ourTsaCertificates(
  store: Store,
  config: Config,
  root: Buffer,
): Promise<{ name: string; der: Buffer }[]> {
  const chain = await journalTsaCertificates(store, journalTrust(config, root));
  return chain.map((der, i) => ({ name: `our-tsa-${i + 1}`, der }));
}

/**
 * True, after saying so on stderr, when the data directory has no SQLite store: opening would create an empty
 * one, and a mistyped --data-dir should be told instead.
 */
export function evidenceStoreMissing(config: Config): boolean {
  if (config.store.driver !== 'sqlite' || existsSync(sqlitePath(config.dataDir))) return false;
  process.stderr.write(`no evidence store in ${config.dataDir} (${sqlitePath(config.dataDir)} does not exist)\n`);
  return true;
}

export async function runExport(args: string[], usage: string): Promise<number> {
  let parsed: ExportArgs | string;
  try {
    parsed = parseExportArgs(args);
  } catch (err) {
    parsed = (err as Error).message;
  }
  if (typeof parsed === 'string') {
    process.stderr.write(`${parsed}\n${usage}`);
    return 2;
  }
  const config = loadConfig(parsed.dataDir ? { dataDir: parsed.dataDir } : {});
  if (evidenceStoreMissing(config)) return 1;
  const base = parsed.publicationUrl ?? publicBaseUrl(config);
  const tsa = cliTsa(config, parsed.tsaUrl, base);
  const store = await openStore(config);
  try {
    const certificates = await caCertificates(config, base);
    const summary = await exportEvidence(store, {
      from: parsed.from,
      to: parsed.to,
      out: parsed.out,
      tsa,
      caCertificates: [...certificates, ...(await ourTsaCertificates(store, config, certificates[0]!.der))],
      qtspId: config.qtspId,
    });
    process.stdout.write(
      `archived ${summary.signings} signing(s) with ${summary.signatures} kept signature(s) in ${parsed.out}\n` +
        `verify: cd ${parsed.out} && openssl ts -verify -data manifest.json -in manifest.tsr -CAfile ca/root.pem\n`,
    );
    // archived as the store holds them, and said: run `qtsp evidence audit`, which names the rows
    for (const file of summary.differs) process.stderr.write(`${file}: not what its sealed journal entry says\n`);
    return summary.differs.length === 0 ? 0 : 1;
  } catch (err) {
    process.stderr.write(`export failed: ${(err as Error).message}\n`);
    return 1;
  } finally {
    await store.close();
  }
}

/** the TSA that time-stamps for the CLI: the configured external one, else ours behind the publication server */
function cliTsa(config: Config, tsaUrl: string | undefined, publicationUrl: string | undefined): RemoteTsa {
  const url = tsaUrl ?? config.tsa.url ?? pkiUrls(publicationUrl ?? publicBaseUrl(config)).tsa;
  return new RemoteTsa({ url, timeoutMs: config.tsa.timeoutMs, retries: config.tsa.retries, chain: [] });
}

/** `renew [--force] [--hash NAME]`: 0 when renewed or nothing was due, 1 on a failure */
export async function runRenew(args: string[], usage: string): Promise<number> {
  let values: { force?: boolean; hash?: string; 'data-dir'?: string; 'tsa-url'?: string; 'publication-url'?: string };
  try {
    values = parseArgs({
      args,
      options: {
        force: { type: 'boolean' },
        hash: { type: 'string' },
        'data-dir': { type: 'string' },
        'tsa-url': { type: 'string' },
        'publication-url': { type: 'string' },
      },
    }).values;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${usage}`);
    return 2;
  }
  const hash = values.hash === undefined ? undefined : hashByName(values.hash);
  if (values.hash !== undefined && !hash) {
    process.stderr.write(`--hash: unknown hash algorithm ${values.hash} (SHA-512, SHA3-512, ...)\n${usage}`);
    return 2;
  }
  const config = loadConfig(values['data-dir'] ? { dataDir: values['data-dir'] } : {});
  if (evidenceStoreMissing(config)) return 1;
  const tsa = cliTsa(config, values['tsa-url'], values['publication-url']);
  const store = await openStore(config);
  try {
    const renewed = hash
      ? [await renewHashTree(store, tsa, hash)].filter((r) => r !== undefined)
      : await renewTimeStamps(store, tsa, {
          force: values.force === true,
          marginMs: config.journal.renewMarginDays * 86_400_000,
        });
    for (const r of renewed)
      process.stdout.write(
        `renewal ${r.renewalNo}: ${r.kind}, ${r.leaves.length} ${r.kind === 'timestamp' ? 'chain(s)' : 'entries'}, ` +
          `time-stamped ${r.renewedAt.toISOString()}\n`,
      );
    if (renewed.length === 0) process.stdout.write('nothing to renew\n');
    return 0;
  } catch (err) {
    process.stderr.write(`renewal failed: ${(err as Error).message}\n`);
    return 1;
  } finally {
    await store.close();
  }
}
