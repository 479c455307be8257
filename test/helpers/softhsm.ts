/**
 * A throw-away SoftHSM2 token for tests: a private softhsm2.conf whose token directory
 * is a temp dir, pointed to by SOFTHSM2_CONF, never the machine's default configuration or tokens. The
 * PKCS#11 module reads SOFTHSM2_CONF when it is initialised, so the variable is set in this process too (one
 * token per test process at a time), and restored by close().
 *
 * pkcs11-tool (OpenSC) is the independent look at the token: listObjects() and readObject(). visibleObjects()
 * is the custodian's own look, through its sessions: session objects are invisible to other processes.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pkcs11js, type Handle, type Pkcs11Token } from '../../src/custody/pkcs11/token.ts';
import { createSoftHsmToken, SOFTHSM2_MODULE, type SoftHsmToken } from '../../src/custody/softhsm/token.ts';

export { SOFTHSM2_MODULE };

export interface TestToken extends SoftHsmToken {
  /** `pkcs11-tool --list-objects --login`: its text output */
  listObjects(): string;
  /** `pkcs11-tool --read-object` of a private key by label into a file: its output, and the file if one was written */
  readPrivateKey(label: string): { output: string; file?: Buffer };
  /** `pkcs11-tool --read-object` of the public key labelled `label`: its SubjectPublicKeyInfo (DER) */
  readPublicKey(label: string): Buffer;
  /** `pkcs11-tool --delete-object` of both halves of the key pair labelled `label` */
  deleteKeyPair(label: string): void;
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
    readPublicKey(keyLabel: string) {
      const out = join(dir, 'public-key.der');
      execFileSync(
        'pkcs11-tool',
        tool('--read-object', '--type', 'pubkey', '--label', keyLabel, '--output-file', out),
        {
          env,
          stdio: 'pipe',
        },
      );
      try {
        return readFileSync(out);
      } finally {
        rmSync(out, { force: true });
      }
    },
    deleteKeyPair(keyLabel: string) {
      for (const type of ['privkey', 'pubkey'])
        execFileSync('pkcs11-tool', tool('--delete-object', '--type', type, '--label', keyLabel), {
          env,
          stdio: 'pipe',
        });
    },
    close() {
      if (previous === undefined) delete process.env['SOFTHSM2_CONF'];
      else process.env['SOFTHSM2_CONF'] = previous;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Every key object this application sees in the token, token and session objects alike (a session object is
 * invisible to other processes, pkcs11-tool included): what tests check is left after signing.
 */
export async function visibleObjects(
  token: Pkcs11Token,
): Promise<{ label: string; token: boolean; objectClass: number }[]> {
  return token.withSession((session) => {
    const p = token.pkcs11;
    p.C_FindObjectsInit(session, []);
    const handles: Handle[] = [];
    try {
      for (let batch = p.C_FindObjects(session, 100); batch.length; batch = p.C_FindObjects(session, 100))
        handles.push(...batch);
    } finally {
      p.C_FindObjectsFinal(session);
    }
    return handles.map((handle) => {
      const [label, onToken, objectClass] = p.C_GetAttributeValue(session, handle, [
        { type: pkcs11js.CKA_LABEL },
        { type: pkcs11js.CKA_TOKEN },
        { type: pkcs11js.CKA_CLASS },
      ]);
      return {
        label: label!.value.toString('utf8'),
        token: onToken!.value[0] === 1,
        objectClass: objectClass!.value.readUInt32LE(0),
      };
    });
  });
}
