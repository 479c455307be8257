/**
 * The misbehaviour switches (see SandboxControls): a plain mutable object the AS reads on every request.
 */
import type { AsKeyStore } from './as/keys.ts';
import type { PlatformDirectory } from './platform/directory.ts';
import type { SandboxControls } from './types.ts';

export function createControls(keys: AsKeyStore, directory: PlatformDirectory): SandboxControls {
  const controls: SandboxControls = {
    introspection: { mode: 'normal', signingKey: 'as' },
    jwks: { mode: 'normal' },
    rotateAsKey: (options) => keys.rotate(options?.keepOld ?? true),
    setIdpStatus: (status) => {
      directory.idpStatus = status;
    },
    reset: () => {
      controls.introspection.mode = 'normal';
      controls.introspection.signingKey = 'as';
      delete controls.introspection.mutate;
      controls.jwks.mode = 'normal';
      directory.idpStatus = 'active';
      keys.reset();
    },
  };
  return controls;
}
