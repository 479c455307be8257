/**
 * The independent oracle: the openssl command. run() starts any tool; opensslCmsVerify is OpenSSL's own CMS
 * verification (with -cades: ESS signing-certificate-v2 checked); opensslNewKey makes a P-256 key and a
 * certificate of nobody we know (a foreign CA, a relying party's own client certificate) or a request.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ToolResult {
  readonly ok: boolean;
  readonly output: string;
}

export interface Scratch {
  readonly dir: string;
  /** the path of `name` in the directory, written with `data` when given */
  file(name: string, data?: Uint8Array | string): string;
  remove(): void;
}

/** A scratch directory for one test's files; remove() at the end. */
export function scratch(): Scratch {
  const dir = mkdtempSync(join(tmpdir(), 'qtsp-oracle-'));
  return {
    dir,
    file(name, data) {
      const path = join(dir, name);
      if (data !== undefined) writeFileSync(path, data);
      return path;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** `use` with a scratch directory that is removed when it has finished, however it finished. */
export async function inScratch<T>(use: (s: Scratch) => Promise<T>): Promise<T> {
  const s = scratch();
  try {
    return await use(s);
  } finally {
    s.remove();
  }
}

export function run(cmd: string, args: readonly string[]): Promise<ToolResult> {
  return new Promise((resolve) => {
    execFile(cmd, args, { encoding: 'utf8' }, (err, stdout, stderr) =>
      resolve({ ok: !err, output: `${stdout}${stderr}` }),
    );
  });
}

/** `openssl <args>` that must succeed: the test fails with OpenSSL's output otherwise. */
export async function opensslOk(args: readonly string[]): Promise<ToolResult> {
  const result = await run('openssl', args);
  assert.ok(result.ok, result.output);
  return result;
}

/** The arguments of `openssl cms -verify -cades` over a detached DER signature in files, output discarded. */
export function cmsVerifyArgs(signatureFile: string, contentFile: string, caFile: string): string[] {
  return [
    'cms',
    '-verify',
    '-cades',
    '-binary',
    '-inform',
    'DER',
    '-in',
    signatureFile,
    '-content',
    contentFile,
    '-CAfile',
    caFile,
    '-out',
    '/dev/null',
  ];
}

/** The arguments of `openssl ts -verify` of a token file over a data file or a digest (hex), trusting caFile. */
export function tsVerifyArgs(
  tokenFile: string,
  over: { dataFile: string } | { digestHex: string },
  caFile: string,
  untrusted?: string,
): string[] {
  return [
    'ts',
    '-verify',
    '-token_in',
    '-in',
    tokenFile,
    ...('dataFile' in over ? ['-data', over.dataFile] : ['-digest', over.digestHex]),
    '-CAfile',
    caFile,
    ...(untrusted ? ['-untrusted', untrusted] : []),
  ];
}

/**
 * openssl cms -verify -cades over a detached signature; content and signature given as bytes. signerOut: a
 * file that receives the signer certificate (PEM) once verified.
 */
export function opensslCmsVerify(
  signature: Uint8Array,
  content: Uint8Array,
  caFile: string,
  signerOut?: string,
): Promise<ToolResult> {
  return inScratch((s) =>
    run('openssl', [
      ...cmsVerifyArgs(s.file('sig.p7s', signature), s.file('doc.bin', content), caFile),
      ...(signerOut ? ['-signer', signerOut] : []),
    ]),
  );
}

/**
 * `openssl req` with a new P-256 key (no passphrase) into keyFile: with `days`, a self-signed certificate for
 * `subject` valid that long (-x509); without, a certificate request for it.
 */
export async function opensslNewKey(files: {
  keyFile: string;
  out: string;
  subject: string;
  days?: number;
}): Promise<ToolResult> {
  const selfSigned = files.days === undefined ? [] : ['-x509', '-days', String(files.days)];
  return run('openssl', [
    'req',
    ...selfSigned,
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    files.keyFile,
    '-out',
    files.out,
    '-subj',
    files.subject,
  ]);
}
