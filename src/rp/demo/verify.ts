/**
 * The demo RP shows what an independent validator says of each result, not what we believe of it: the same
 * tools the test suite trusts (docs/conformance.md), run as child processes with a deadline. CAdES: `openssl
 * cms -verify -cades` against the root CA; XAdES: `xmlsec1 --verify` trusting only the root; PAdES: `pdfsig`
 * with an NSS database that trusts only the root.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Verdict {
  readonly passed: boolean;
  /** the command line as run, the temporary file names shortened */
  readonly command: string;
  /** what the tool printed (cut at MAX_OUTPUT) or why it could not run */
  readonly output: string;
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
    return { passed: r.ok, command: shown('openssl', all, dir), output: r.output };
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
    return { passed: r.ok, command: shown('xmlsec1', args, dir), output: r.output };
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

/**
 * pdfsig's judgement of one signature: valid, and for the CAdES signature also a trusted certificate (a
 * document time-stamp of B-LTA is judged valid or not).
 */
function pdfsigAccepts(section: string): boolean {
  const valid = /Signature Validation: Signature is Valid\./.test(section);
  const cades = /Signature Type: ETSI\.CAdES\.detached/.test(section);
  return valid && (!cades || /Certificate Validation: Certificate is Trusted\./.test(section));
}

/** PAdES: pdfsig must call every signature in the PDF valid and the signer's certificate trusted. */
export function verifyPades(pdf: Buffer, files: VerifierFiles): Promise<Verdict> {
  return inScratch(async (dir) => {
    const nss = await nssDatabase(dir, files.rootCaFile);
    if (!nss.ok) return { passed: false, command: 'certutil (the NSS database for pdfsig)', output: nss.output };
    const file = join(dir, 'signed.pdf');
    writeFileSync(file, pdf);
    const args = ['-nssdir', nss.output, file];
    const r = await runTool('pdfsig', args);
    const signatures = r.output.split(/^Signature #\d+:$/m).slice(1);
    const passed = r.ok && signatures.length > 0 && signatures.every(pdfsigAccepts);
    return { passed, command: shown('pdfsig', args, dir).replace(dir, '<tmp>'), output: r.output };
  });
}
