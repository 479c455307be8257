/** Everything the AS routes share; each sandbox bank has its own context (issuer, keys, store). */
import type { ClientRegistry } from '../clients.ts';
import type { BankProfile } from '../platform/constants.ts';
import type { PlatformDirectory } from '../platform/directory.ts';
import type { SandboxControls } from '../types.ts';
import type { AsKeyStore } from './keys.ts';
import type { AsStore } from './store.ts';

export interface AsContext {
  /** set once the AS listens (its port may be chosen by the OS) */
  readonly urls: { issuer: string };
  /** which bank this AS is: BIC, name, notification address (spec 4.6) */
  readonly bank: BankProfile;
  /** shared by every bank: the platform's registered RPs and its directories */
  readonly clients: ClientRegistry;
  readonly directory: PlatformDirectory;
  readonly keys: AsKeyStore;
  readonly store: AsStore;
  /** the AS reads introspection and jwks of these; bank 1's are the sandbox's controls, bank 2's stay normal */
  readonly controls: SandboxControls;
  readonly tokenLifetimeSeconds: number;
  /** life of the consent page: a post after it sends the user back to the RP with access_denied */
  readonly consentLifetimeSeconds: number;
}
