/**
 * The misbehaviour switches (see SandboxControls): a plain mutable object the AS reads on every request.
 * Introspection and JWKS switches act on bank 1; key rotation and IDP status take an optional BIC.
 */
import type { AsKeyStore } from './as/keys.ts';
import type { SandboxKeyArchive } from './key-archive/repository.ts';
import type { PlatformDirectory } from './platform/directory.ts';
import type { SandboxControls } from './types.ts';

/** A bank as the switches reach it: its BIC and its AS keys. */
export interface ControlledBank {
  readonly bic: string;
  readonly keys: AsKeyStore;
}

/** A sync that runs in the background (setters are synchronous); the queue keeps commits in order. */
function syncInBackground(archive: () => SandboxKeyArchive | undefined): void {
  archive()
    ?.sync()
    .catch((err: unknown) => process.stderr.write(`sandbox key archive: commit failed: ${(err as Error).message}\n`));
}

/** The bank with this BIC (default: bank 1); an unknown BIC is a mistake in the test that names it. */
function bankOf(banks: readonly ControlledBank[], bic: string | undefined): ControlledBank {
  const bank = bic === undefined ? banks[0] : banks.find((b) => b.bic === bic.toUpperCase());
  if (!bank) throw new TypeError(`no sandbox bank with BIC ${String(bic)}`);
  return bank;
}

/** Introspection, JWKS and the other request-time switches, all normal. */
function requestSwitches(): Pick<SandboxControls, 'introspection' | 'jwks' | 'idpDirectory' | 'mediation' | 'smtp'> {
  return {
    introspection: { mode: 'normal', signingKey: 'as' },
    jwks: { mode: 'normal' },
    idpDirectory: { mode: 'normal' },
    mediation: { mode: 'normal', failNext: 0 },
    smtp: { mode: 'normal' },
  };
}

function resetRequestSwitches(controls: SandboxControls): void {
  controls.introspection.mode = 'normal';
  controls.introspection.signingKey = 'as';
  delete controls.introspection.mutate;
  delete controls.introspection.hold;
  controls.jwks.mode = 'normal';
  controls.idpDirectory.mode = 'normal';
  controls.mediation.mode = 'normal';
  controls.mediation.failNext = 0;
  controls.smtp.mode = 'normal';
}

function keyArchiveControls(
  bank1: ControlledBank,
  archive: () => SandboxKeyArchive | undefined,
): SandboxControls['keyArchive'] {
  return {
    commit: async ({ signedBy, addForeignKey }) => {
      const repo = archive();
      if (!repo) throw new Error('the key archive is not open');
      const foreign = addForeignKey ? await bank1.keys.foreignKey() : undefined;
      const commit = await repo.commitKeys({ signedBy, ...(foreign ? { extraKeys: [foreign.publicJwk] } : {}) });
      return { commit, ...(foreign ? { foreignKid: foreign.kid } : {}) };
    },
    head: async () => archive()?.head(),
  };
}

/**
 * `banks`: bank 1 first. `archive` is read lazily: the archive opens once the banks listen (their issuer URLs
 * name its files).
 */
export function createControls(
  banks: readonly ControlledBank[],
  directory: PlatformDirectory,
  archive: () => SandboxKeyArchive | undefined = () => undefined,
): SandboxControls {
  const controls: SandboxControls = {
    ...requestSwitches(),
    rotateAsKey: async (options) => {
      const kid = await bankOf(banks, options?.bic).keys.rotate(options?.keepOld ?? true);
      await archive()?.sync();
      return kid;
    },
    setIdpStatus: (status, bic) => {
      directory.setStatus(bankOf(banks, bic).bic, status);
      syncInBackground(archive);
    },
    keyArchive: keyArchiveControls(bankOf(banks, undefined), archive),
    reset: async () => {
      resetRequestSwitches(controls);
      for (const bank of banks) {
        directory.setStatus(bank.bic, 'active');
        bank.keys.reset();
      }
      await archive()?.restore();
    },
  };
  return controls;
}

/**
 * The switches a further bank's AS reads: its own introspection and JWKS switches, never flipped (they act on
 * bank 1); everything else is the sandbox's.
 */
export function quietBankControls(controls: SandboxControls): SandboxControls {
  const own = requestSwitches();
  return { ...controls, introspection: own.introspection, jwks: own.jwks };
}
