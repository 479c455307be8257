/** The independent oracle: OpenSSL's own CMS verification (with -cades: ESS signing-certificate-v2 checked). */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ToolResult {
  readonly ok: boolean;
  readonly output: string;
}

export function run(cmd: string, args: readonly string[]): Promise<ToolResult> {
  return new Promise((resolve) => {
    execFile(cmd, args, { encoding: 'utf8' }, (err, stdout, stderr) =>
      resolve({ ok: !err, output: `${stdout}${stderr}` }),
    );
  });
}

/** openssl cms -verify -cades over a detached signature; content and signature given as bytes. */
export async function opensslCmsVerify(
  signature: Uint8Array,
  content: Uint8Array,
  caFile: string,
): Promise<ToolResult> {
  const dir = mkdtempSync(join(tmpdir(), 'qtsp-oracle-'));
  try {
    const sig = join(dir, 'sig.p7s');
    const doc = join(dir, 'doc.bin');
    writeFileSync(sig, signature);
    writeFileSync(doc, content);
    return await run('openssl', [
      'cms',
      '-verify',
      '-cades',
      '-binary',
      '-inform',
      'DER',
      '-in',
      sig,
      '-content',
      doc,
      '-CAfile',
      caFile,
      '-out',
      '/dev/null',
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
