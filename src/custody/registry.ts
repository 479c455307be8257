/**
 * The key custody backends, found by convention: keys.provider names a folder under custody/ whose module
 * backend.ts (backend.js once compiled: this module's own extension) exports `backend`, a CustodyBackend. A new
 * backend is its folder and its settings in the keys section of config/schema.ts; nothing else names it.
 * Nothing imports a backend's folder either: it is loaded here, when the configuration asks for it.
 */
import { existsSync, readdirSync } from 'node:fs';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '../config/load.ts';
import type { Config, ConfigInput } from '../config/schema.ts';
import type { Logger } from '../util/logger.ts';
import type { CustodyName, KeyCustody, LongLivedKeyMaker, LongLivedKeyName } from './types.ts';

/** What `qtsp pki init` left for the custodian in the data directory (ca/material.ts finds it). */
export interface LongLivedMaterial {
  /** the directory holding it, for messages */
  readonly dir: string;
  /** PKCS#8 files of the long-lived keys, for a backend that keeps them as files */
  readonly keyFiles: Readonly<Record<LongLivedKeyName, string>>;
  /** the backend `qtsp pki init` made the long-lived keys in; undefined when they are the key files */
  readonly heldBy: CustodyName | undefined;
}

export interface CustodyContext {
  readonly material: LongLivedMaterial;
  readonly logger?: Logger;
}

/** The keys section of the configuration, as a backend that stands in for another one returns it. */
export type KeysSettings = NonNullable<ConfigInput['keys']>;

export interface CustodyBackend {
  /**
   * Opens the custodian at start, once the long-lived keys are where it keeps them (requireKeyFiles,
   * requireKeysIn). A missing token or module, or a wrong credential, is a ConfigError naming the setting.
   */
  open(config: Config, context: CustodyContext): Promise<KeyCustody>;
  /**
   * Only a backend that keeps the long-lived keys itself: the custodian `qtsp pki init` makes them in (they
   * need not exist yet). Without it, the long-lived keys are the PKCS#8 files `qtsp pki init` writes.
   */
  openForInit?(config: Config, context: CustodyContext): Promise<KeyCustody & LongLivedKeyMaker>;
  /**
   * Only a backend that stands in for another one in the sandbox of `qtsp dev`: prepares what that one needs
   * under the data directory and returns the keys settings it then runs with.
   */
  sandbox?(config: Config): KeysSettings;
}

const NAME = /^[a-z0-9-]+$/;
/** '.ts' while run through tsx, '.js' in a compiled tree: backends are modules of the same tree */
const OWN_EXTENSION = extname(fileURLToPath(import.meta.url));

function backendModule(name: CustodyName): URL {
  return new URL(`./${name}/backend${OWN_EXTENSION}`, import.meta.url);
}

function isBackend(name: string): boolean {
  return NAME.test(name) && existsSync(fileURLToPath(backendModule(name)));
}

/** The backends present: the folders under custody/ with a backend module. */
export function custodyNames(): CustodyName[] {
  const folders = readdirSync(new URL('./', import.meta.url), { withFileTypes: true }).filter((e) => e.isDirectory());
  return folders
    .map((e) => e.name)
    .filter(isBackend)
    .sort();
}

/** The backend `name` (keys.provider) names; an unknown one is a ConfigError naming the setting. */
export async function loadCustodyBackend(name: CustodyName): Promise<CustodyBackend> {
  if (!isBackend(name))
    throw new ConfigError(
      `setting keys.provider: no key custody named ${JSON.stringify(name)} (there are: ${custodyNames().join(', ')})`,
    );
  const loaded = (await import(backendModule(name).href)) as { backend?: CustodyBackend };
  if (!loaded.backend) throw new TypeError(`custody/${name}/backend${OWN_EXTENSION} exports no backend`);
  return loaded.backend;
}

/** Opens the custodian keys.provider names (at start: the long-lived keys must exist). */
export async function openKeyCustody(config: Config, context: CustodyContext): Promise<KeyCustody> {
  const backend = await loadCustodyBackend(config.keys.provider);
  return backend.open(config, context);
}

/**
 * `qtsp dev`: when keys.provider names a backend that stands in for another one in the sandbox, the keys
 * settings to run with instead; otherwise undefined.
 */
export async function sandboxKeys(config: Config): Promise<KeysSettings | undefined> {
  const backend = await loadCustodyBackend(config.keys.provider);
  return backend.sandbox?.(config);
}

/** For a backend that reads the long-lived keys from key files: refuses a data directory whose keys are elsewhere. */
export function requireKeyFiles(material: LongLivedMaterial, name: CustodyName): void {
  if (material.heldBy === undefined) return;
  throw new ConfigError(
    `setting keys.provider: the CA keys of ${material.dir} are in the key custody ${material.heldBy}; ` +
      `set keys.provider to ${material.heldBy}, or run \`qtsp pki init --force\` to make key files for ${name}`,
  );
}

/** For a backend that keeps the long-lived keys itself: refuses a data directory whose keys are elsewhere. */
export function requireKeysIn(material: LongLivedMaterial, name: CustodyName): void {
  if (material.heldBy === name) return;
  const where = material.heldBy === undefined ? 'key files' : `the key custody ${material.heldBy}`;
  throw new ConfigError(
    `setting keys.provider: ${material.dir} holds the CA keys in ${where}; ` +
      `run \`qtsp pki init --force\` to make them in the key custody ${name}`,
  );
}
