/**
 * The journal in tests: a TSA from a fresh `pki init` (and a renewed one under the same root), what the audit
 * trusts of that material, and BouncyCastle's check of an RFC 4998 evidence record against a root
 * (test/oracles/ErsChecker.java, Debian libbcpkix-java with a JDK).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadCeremonyRoot, pkiInit, reissue } from '../../src/ca/init.ts';
import { loadCaMaterial, loadTrustServiceMaterial, pkiPaths } from '../../src/ca/material.ts';
import { DEFAULT_PUBLIC_BASE_URL, pkiUrls } from '../../src/ca/publication.ts';
import type { TokenTrust } from '../../src/journal/token-trust.ts';
import { LocalTsa } from '../../src/timestamping/tsa.ts';
import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';
import type { RecordSigningInput, Store } from '../../src/store/types.ts';
import { claimFor } from '../store/store-contract.ts';

/** our TSA over the material `pki init` writes into `dataDir` */
export function testTsa(dataDir: string): LocalTsa {
  pkiInit({ dataDir, qtspId: 'qtsp-journal-test' });
  const { tsa } = loadTrustServiceMaterial(dataDir);
  return new LocalTsa(tsa, loadCaMaterial(dataDir).root.der, SETTINGS);
}

const SETTINGS = { policyOid: '1.3.6.1.4.1.99999.1', accuracySeconds: 1 };

/** A TSA renewed at a ceremony of the material in `dataDir`: a fresh key, its certificate from the same root. */
export function renewedTsa(dataDir: string): LocalTsa {
  const root = loadCeremonyRoot({ dataDir });
  return new LocalTsa(reissue('tsa', dataDir, pkiUrls(DEFAULT_PUBLIC_BASE_URL), root), root.der, SETTINGS);
}

/** What the audit trusts of the material in `dataDir`: its root, its TSA certificate and `more` of ours. */
export function testTrust(dataDir: string, ...more: readonly Buffer[]): TokenTrust {
  const certificates = [loadTrustServiceMaterial(dataDir).tsa.der, ...more];
  return { ours: { root: loadCaMaterial(dataDir).root.der, certificates, keyUsageDays: 365 } };
}

/** the root certificate file (PEM) of the material in `dataDir` */
export const rootFileOf = (dataDir: string): string => pkiPaths(dataDir).rootCert;

const CHECKER = fileURLToPath(new URL('../oracles/ErsChecker.java', import.meta.url));
const CLASSPATH = ['bcprov', 'bcpkix', 'bcutil'].map((j) => `/usr/share/java/${j}.jar`).join(':');

/** What BouncyCastle anchors at: a root certificate file (PEM), and other certificates to build the path from. */
export interface ErsAnchor {
  readonly root: string;
  readonly chain?: string;
}

/**
 * BouncyCastle's verdict on `record` (a file) for the data object in `data` (a file; several: a group) at `at`,
 * its TSA certificate chained to `anchor.root`
 */
export function bouncyCastleVerdict(
  record: string,
  data: string | readonly string[],
  anchor: ErsAnchor,
  at = new Date(),
): Promise<{ valid: boolean; output: string }> {
  const trust = ['--root', anchor.root, ...(anchor.chain ? ['--chain', anchor.chain] : [])];
  const args = [...trust, record, ...(typeof data === 'string' ? [data] : data), at.toISOString()];
  return checkerClasses().then(
    (classes) =>
      new Promise((resolve, reject) => {
        execFile(
          'java',
          // a short-lived JVM: the quick compiler alone and the serial collector start it with less work
          ['-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC', '-cp', `${classes}:${CLASSPATH}`, 'ErsChecker', ...args],
          { timeout: 120_000 },
          (err, stdout, stderr) => {
            const output = `${stdout}${stderr}`.trim();
            if (err && typeof err.code !== 'number') reject(new Error(`java could not run: ${err.message}\n${output}`));
            else resolve({ valid: !err && stdout.trim() === 'valid', output });
          },
        );
      }),
  );
}

let compiled: Promise<string> | undefined;

/**
 * ErsChecker.java compiled by javac once per test process, into a temp directory removed at exit: java's
 * source-file mode would compile it again on every check.
 */
function checkerClasses(): Promise<string> {
  compiled ??= new Promise((resolve, reject) => {
    const out = mkdtempSync(join(tmpdir(), 'qtsp-ers-checker-'));
    process.once('exit', () => rmSync(out, { recursive: true, force: true }));
    execFile('javac', ['-cp', CLASSPATH, '-d', out, CHECKER], { timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`javac could not compile ${CHECKER}: ${err.message}\n${stdout}${stderr}`));
      else resolve(out);
    });
  });
  return compiled;
}

/** signDoc step 10 for a recorded signing: its first document's signature kept, so its signing.returned entry */
export async function returnSignature(store: Store, input: RecordSigningInput): Promise<void> {
  const hash = input.transaction.hashes[0]!;
  const claim = claimFor(input, [hash]);
  assert.equal((await store.claimDocuments(claim, new Date(0))).kind, 'claimed');
  const signature = { hash, signature: randomBytes(64).toString('base64'), revocation: null };
  await store.keepSignatures({
    claim,
    signatures: [signature],
    evidenceSerialHex: input.certificate.serialHex,
    outbox: [],
  });
}
