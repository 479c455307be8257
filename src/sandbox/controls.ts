/**
 * The misbehaviour switches (see SandboxControls): a plain mutable object the AS reads on every request.
 */
import type { AsKeyStore } from './as/keys.ts';
import type { SandboxKeyArchive } from './key-archive/repository.ts';
import type { PlatformDirectory } from './platform/directory.ts';
import type { SandboxControls } from './types.ts';

/** A sync that runs in the background (setters are synchronous); the queue keeps commits in order. */
function syncInBackground(archive: () => SandboxKeyArchive | undefined): void {
  archive()
    ?.sync()
    .catch((err: unknown) => process.stderr.write(`sandbox key archive: commit failed: ${(err as Error).message}\n`));
}

/** `archive` is read lazily: the archive opens once the AS listens (its issuer URL names the files). */
export function createControls(
  keys: AsKeyStore,
  directory: PlatformDirectory,
  archive: () => SandboxKeyArchive | undefined = () => undefined,
): SandboxControls {
  const controls: SandboxControls = {
    introspection: { mode: 'normal', signingKey: 'as' },
    jwks: { mode: 'normal' },
    idpDirectory: { mode: 'normal' },
    mediation: { mode: 'normal', failNext: 0 },
    smtp: { mode: 'normal' },
    rotateAsKey: async (options) => {
      const kid = await keys.rotate(options?.keepOld ?? true);
      await archive()?.sync();
      return kid;
    },
    setIdpStatus: (status) => {
      directory.idpStatus = status;
      syncInBackground(archive);
    },
    keyArchive: {
      commit: async ({ signedBy, addForeignKey }) => {
        const repo = archive();
        if (!repo) throw new Error('the key archive is not open');
        const foreign = addForeignKey ? await keys.foreignKey() : undefined;
        const commit = await repo.commitKeys({ signedBy, ...(foreign ? { extraKeys: [foreign.publicJwk] } : {}) });
        return { commit, ...(foreign ? { foreignKid: foreign.kid } : {}) };
      },
      head: async () => archive()?.head(),
    },
    reset: async () => {
      controls.introspection.mode = 'normal';
      controls.introspection.signingKey = 'as';
      delete controls.introspection.mutate;
      delete controls.introspection.hold;
      controls.jwks.mode = 'normal';
      controls.idpDirectory.mode = 'normal';
      controls.mediation.mode = 'normal';
      controls.mediation.failNext = 0;
      controls.smtp.mode = 'normal';
      directory.idpStatus = 'active';
      keys.reset();
      await archive()?.restore();
    },
  };
  return controls;
}
