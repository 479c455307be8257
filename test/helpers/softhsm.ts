/**
 * A throw-away SoftHSM2 token for tests: a private softhsm2.conf whose token directory
 * is a temp dir, pointed to by SOFTHSM2_CONF, never the machine's default configuration or tokens. The
 * PKCS#11 module reads SOFTHSM2_CONF when it is initialised, so the variable is set in this process too (one
 * token per test process at a time), and restored by close().
 *
 * pkcs11-tool (OpenSC) is the independent look at the token: listObjects() and readObject().
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSoftHsmToken, SOFTHSM2_MODULE, type SoftHsmToken } from '../../src/custody/pkcs11/softhsm.ts';

export { SOFTHSM2_MODULE };

export interface TestToken extends SoftHsmToken {
  /** `pkcs11-tool --list-objects --login`: its text output */
  listObjects(): string;
  /** `pkcs11-tool --read-object` of a private key by label into a file: its output, and the file if one was written */
  readPrivateKey(label: string): { output: string; file?: Buffer };
  close(): void;
}

export function createTestToken(label = 'qtsp-test'): TestToken {
  const dir = mkdtempSync(join(tmpdir(), 'qtsp-softhsm-'));
  const previous = process.env['SOFTHSM2_CONF'];
  const token = createSoftHsmToken(dir, label);
  process.env['SOFTHSM2_CONF'] = token.conf;
  const env = { ...process.env, SOFTHSM2_CONF: token.conf };
  const tool = (...args: string[]) => [
    '--module',
    SOFTHSM2_MODULE,
    '--token-label',
    label,
    '--login',
    '--pin',
    token.pin,
    ...args,
  ];
  return {
    ...token,
    listObjects: () =>
      execFileSync('pkcs11-tool', tool('--list-objects'), { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }),
    readPrivateKey(keyLabel: string) {
      const out = join(dir, 'read-object.der');
      const r = spawnSync(
        'pkcs11-tool',
        tool('--read-object', '--type', 'privkey', '--label', keyLabel, '--output-file', out),
        { env, encoding: 'utf8' },
      );
      const file = existsSync(out) ? readFileSync(out) : undefined;
      rmSync(out, { force: true });
      return { output: `${r.stdout}${r.stderr}`, ...(file ? { file } : {}) };
    },
    close() {
      if (previous === undefined) delete process.env['SOFTHSM2_CONF'];
      else process.env['SOFTHSM2_CONF'] = previous;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
