/**
 * The demo RP shows what independent validators say of each result, not what we believe of it: the same
 * tools the test suite trusts (docs/conformance.md), run as child processes with a deadline, one check per
 * part of the result that a tool can judge. CAdES: `openssl cms -verify -cades` against the root CA; XAdES:
 * `xmlsec1 --verify` trusting only the root; PAdES: `pdfsig` with an NSS database that trusts only the root
 * for the signatures, and `openssl ts -verify` for each document time-stamp (B-LTA), which pdfsig lists but
 * cannot validate (poppler has no ETSI.RFC3161 support). No tool takes a PDF's document time-stamp as such:
 * readSignatures (../pdf.ts) hands over its token and the bytes its /ByteRange covers, openssl judges them.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type PdfSignature, readSignatures } from '../pdf.ts';

/** One tool's judgement of one part of the result. */
export interface Check {
  /** the tool and what it checks */
  readonly name: string;
  readonly passed: boolean;
  /** the command line as run, the temporary file names shortened */
  readonly command: string;
  /** what the tool printed (cut at MAX_OUTPUT) or why it could not run */
  readonly output: string;
}

/** Every check that applies to a result; the result passes only when there is one and all of them passed. */
export interface Verdict {
  readonly passed: boolean;
  readonly checks: readonly Check[];
}

function verdictOf(checks: readonly Check[]): Verdict {
  return { passed: checks.length > 0 && checks.every((c) => c.passed), checks };
}

export interface VerifierFiles {
  /** our root CA: the only trust anchor */
  readonly rootCaFile: string;
  /** the issuing CA, offered to xmlsec1 as an untrusted intermediate */
  readonly issuingCaFile: string;
}

const TOOL_TIMEOUT_MS = 30_000;
const MAX_OUTPUT = 8_000;
const XADES_SIGNED_PROPERTIES_ID = 'http://uri.etsi.org/01903/v1.3.2#:SignedProperties';
/** which Debian package brings a tool, for the verdict when it is missing */
const PACKAGES: Record<string, string> = {
  openssl: 'openssl',
  xmlsec1: 'xmlsec1',
  pdfsig: 'poppler-utils',
  certutil: 'libnss3-tools',
};

interface RunResult {
  readonly ok: boolean;
  readonly output: string;
}

function runTool(cmd: string, args: readonly string[]): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      { encoding: 'utf8', timeout: TOOL_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = (err as NodeJS.ErrnoException | null)?.code;
        if (code === 'ENOENT')
          return resolve({ ok: false, output: `${cmd} is not installed (Debian package ${PACKAGES[cmd] ?? cmd})` });
        const timedOut = err && (err as { killed?: boolean }).killed ? `\n${cmd} did not finish in time` : '';
        resolve({ ok: !err, output: `${stdout}${stderr}${timedOut}`.slice(0, MAX_OUTPUT) });
      },
    );
  });
}

/** Runs `fn` with a fresh temporary directory that is removed afterwards. */
async function inScratch<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'qtsp-demo-verify-'));
  try {
    return await fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function shown(cmd: string, args: readonly string[], dir: string): string {
  return [cmd, ...args].map((a) => a.replaceAll(`${dir}/`, '')).join(' ');
}

/** CAdES (detached CMS): openssl checks the signature, the ESS signing-certificate-v2 and the chain to the root. */
export function verifyCades(signature: Buffer, document: Buffer, files: VerifierFiles): Promise<Verdict> {
  return inScratch(async (dir) => {
    const sig = join(dir, 'signature.p7s');
    const doc = join(dir, 'document');
    writeFileSync(sig, signature);
    writeFileSync(doc, document);
    const args = ['cms', '-verify', '-cades', '-binary', '-inform', 'DER', '-in', sig, '-content', doc];
    const all = [...args, '-CAfile', files.rootCaFile, '-out', '/dev/null'];
    const r = await runTool('openssl', all);
    const name = 'openssl cms -verify -cades: the signature, its signing certificate and the chain to our root';
    return verdictOf([{ name, passed: r.ok, command: shown('openssl', all, dir), output: r.output }]);
  });
}

/** The URIs of references that point outside the signature: the detached document. */
function externalReferenceUris(xml: string): string[] {
  return [...xml.matchAll(/<ds:Reference\b[^>]*\bURI="([^"#][^"]*)"/g)].map((m) => m[1]!.replace(/&amp;/g, '&'));
}

/** XAdES (detached): xmlsec1 checks both references, the signature value and the chain to the root. */
export function verifyXades(signature: Buffer, document: Buffer, files: VerifierFiles): Promise<Verdict> {
  return inScratch(async (dir) => {
    const sig = join(dir, 'signature.xml');
    const doc = join(dir, 'document');
    writeFileSync(sig, signature);
    writeFileSync(doc, document);
    const maps = externalReferenceUris(signature.toString('utf8')).flatMap((uri) => [`--url-map:${uri}`, doc]);
    const args = [
      '--verify',
      '--id-attr:Id',
      XADES_SIGNED_PROPERTIES_ID,
      ...maps,
      '--trusted-pem',
      files.rootCaFile,
      '--untrusted-pem',
      files.issuingCaFile,
      sig,
    ];
    const r = await runTool('xmlsec1', args);
    const name = 'xmlsec1 --verify: both references, the signature value and the chain to our root';
    return verdictOf([{ name, passed: r.ok, command: shown('xmlsec1', args, dir), output: r.output }]);
  });
}

/** An NSS database (pdfsig's trust store) that trusts our root and nothing else. */
async function nssDatabase(dir: string, rootCaFile: string): Promise<RunResult> {
  mkdirSync(join(dir, 'nss'));
  const db = `sql:${join(dir, 'nss')}`;
  for (const args of [
    ['-N', '--empty-password', '-d', db],
    ['-A', '-n', 'root', '-t', 'CT,C,C', '-i', rootCaFile, '-d', db],
  ]) {
    const r = await runTool('certutil', args);
    if (!r.ok) return r;
  }
  return { ok: true, output: db };
}

const SUBFILTER_DOCUMENT_TIMESTAMP = 'ETSI.RFC3161';

/** pdfsig's "Signed Ranges: [a - b], [c - d]" of the PDF's /ByteRange [a b-a c d-c] */
const signedRanges = (sig: PdfSignature) => {
  const [a, b, c, d] = sig.byteRange;
  return `[${a} - ${a + b}], [${c} - ${c + d}]`;
};

/**
 * pdfsig's judgement of one signature: valid, and for the CAdES signature also a trusted certificate. A
 * section pdfsig leaves unverified passes only when its signed ranges are those of a document time-stamp,
 * which the openssl check judges instead.
 */
function pdfsigAccepts(section: string, timestampRanges: readonly string[]): boolean {
  const valid = /Signature Validation: Signature is Valid\./.test(section);
  const cades = /Signature Type: ETSI\.CAdES\.detached/.test(section);
  if (valid) return !cades || /Certificate Validation: Certificate is Trusted\./.test(section);
  const ranges = /Signed Ranges: (.*)/.exec(section)?.[1]?.trim() ?? '';
  return /Signature has not yet been verified\./.test(section) && timestampRanges.includes(ranges);
}

/** pdfsig: every signature valid and the signer's certificate trusted; document time-stamps left to openssl. */
async function pdfsigCheck(
  dir: string,
  file: string,
  timestamps: readonly PdfSignature[],
  files: VerifierFiles,
): Promise<Check> {
  const name = "pdfsig: every signature in the PDF valid, the signer's certificate trusted";
  const nss = await nssDatabase(dir, files.rootCaFile);
  if (!nss.ok) return { name, passed: false, command: 'certutil (the NSS database for pdfsig)', output: nss.output };
  const args = ['-nssdir', nss.output, file];
  const r = await runTool('pdfsig', args);
  const sections = r.output.split(/^Signature #\d+:$/m).slice(1);
  const ranges = timestamps.map(signedRanges);
  const passed = r.ok && sections.length > 0 && sections.every((s) => pdfsigAccepts(s, ranges));
  const note = ranges.length
    ? `pdfsig cannot validate document time-stamps (${SUBFILTER_DOCUMENT_TIMESTAMP}): openssl ts -verify below ` +
      `checks the one of signed ranges ${ranges.join(' and the one of ')}.\n\n`
    : '';
  return { name, passed, command: shown('pdfsig', args, dir).replace(dir, '<tmp>'), output: note + r.output };
}

/**
 * openssl ts -verify of a document time-stamp token over the bytes its /ByteRange covers, trusting only our
 * root; the TSA's certificate comes from the token, the issuing CA is offered as an untrusted intermediate.
 */
async function timestampCheck(
  dir: string,
  ts: PdfSignature,
  n: number,
  of: number,
  files: VerifierFiles,
): Promise<Check> {
  const which = of > 1 ? ` ${n} of ${of}` : '';
  const name = `openssl ts -verify: the document time-stamp${which} over its byte range, its TSA chain to our root`;
  const token = join(dir, `timestamp-${n}.tsr`);
  const data = join(dir, `timestamp-${n}-byterange.bin`);
  writeFileSync(token, ts.contents);
  writeFileSync(data, ts.covered);
  const args = ['ts', '-verify', '-token_in', '-in', token, '-data', data];
  const all = [...args, '-CAfile', files.rootCaFile, '-untrusted', files.issuingCaFile];
  const r = await runTool('openssl', all);
  return { name, passed: r.ok, command: shown('openssl', all, dir), output: r.output };
}

/** The document time-stamps in the PDF, or the failed check that says why they cannot be read. */
function documentTimestamps(pdf: Buffer): { timestamps: PdfSignature[]; failure?: Check } {
  try {
    return { timestamps: readSignatures(pdf).filter((s) => s.subFilter === SUBFILTER_DOCUMENT_TIMESTAMP) };
  } catch (err) {
    const name = "the PDF's signature dictionaries, read for its document time-stamps";
    const output = `the signatures cannot be read: ${(err as Error).message}`;
    return { timestamps: [], failure: { name, passed: false, command: '(read by the demo RP)', output } };
  }
}

/** PAdES: pdfsig for the signatures, openssl ts -verify for each document time-stamp. */
export function verifyPades(pdf: Buffer, files: VerifierFiles): Promise<Verdict> {
  return inScratch(async (dir) => {
    const file = join(dir, 'signed.pdf');
    writeFileSync(file, pdf);
    const { timestamps, failure } = documentTimestamps(pdf);
    const checks = await Promise.all([
      pdfsigCheck(dir, file, timestamps, files),
      ...timestamps.map((ts, i) => timestampCheck(dir, ts, i + 1, timestamps.length, files)),
    ]);
    return verdictOf(failure ? [...checks, failure] : checks);
  });
}
