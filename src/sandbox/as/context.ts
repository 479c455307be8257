/** Everything the AS routes share. */
import type { ClientRegistry } from '../clients.ts';
import type { PlatformDirectory } from '../platform/directory.ts';
import type { SandboxControls } from '../types.ts';
import type { AsKeyStore } from './keys.ts';
import type { AsStore } from './store.ts';

export interface AsContext {
  /** set once the AS listens (its port may be chosen by the OS) */
  readonly urls: { issuer: string };
  readonly clients: ClientRegistry;
  readonly directory: PlatformDirectory;
  readonly keys: AsKeyStore;
  readonly store: AsStore;
  readonly controls: SandboxControls;
  readonly tokenLifetimeSeconds: number;
}
