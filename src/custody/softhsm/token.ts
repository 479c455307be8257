/**
 * A SoftHSM2 token made for us: the test HSM (tests) and the `keys.provider = softhsm` sandbox switch of
 * `qtsp dev`. A private softhsm2.conf whose token directory lives in `dir`, a token initialised with
 * `softhsm2-util --init-token --free`, and its user PIN in a file readable by the owner only. The machine's
 * default SoftHSM2 configuration and tokens are never touched: SOFTHSM2_CONF must point at `conf` when the
 * module is initialised.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Debian's softhsm2 package */
export const SOFTHSM2_MODULE = '/usr/lib/softhsm/libsofthsm2.so';

export interface SoftHsmToken {
  readonly module: string;
  readonly label: string;
  /** the softhsm2.conf to export as SOFTHSM2_CONF */
  readonly conf: string;
  readonly pin: string;
  readonly pinFile: string;
}

/** Creates the token in `dir` unless it exists there already (then returns it as it is). */
export function createSoftHsmToken(dir: string, label: string): SoftHsmToken {
  const tokens = join(dir, 'tokens');
  const conf = join(dir, 'softhsm2.conf');
  const pinFile = join(dir, 'user.pin');
  if (existsSync(conf) && existsSync(pinFile)) {
    return { module: SOFTHSM2_MODULE, label, conf, pin: readFileSync(pinFile, 'utf8').trim(), pinFile };
  }
  mkdirSync(tokens, { recursive: true, mode: 0o700 });
  writeFileSync(
    conf,
    `directories.tokendir = ${tokens}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n`,
    { mode: 0o600 },
  );
  const pin = randomBytes(8).toString('hex');
  const soPin = randomBytes(8).toString('hex');
  execFileSync('softhsm2-util', ['--init-token', '--free', '--label', label, '--pin', pin, '--so-pin', soPin], {
    env: { ...process.env, SOFTHSM2_CONF: conf },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  writeFileSync(pinFile, `${pin}\n`, { mode: 0o600 });
  return { module: SOFTHSM2_MODULE, label, conf, pin, pinFile };
}
