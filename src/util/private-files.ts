/**
 * The data directory holds the evidence store (names, birthdates, the banks' signed introspection answers)
 * and private keys: it is created 0700, store and key files 0600, whatever the umask. A data directory that
 * others can read (created by hand, or by an older version) is not changed behind the operator's back; the
 * start logs a warning naming it.
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync, writeFileSync } from 'node:fs';

export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/** mkdir -p with 0700 for every directory it creates (existing ones keep their mode). */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
}

/** Writes a file only its owner can read, also when it already existed with a wider mode. */
export function writePrivateFile(file: string, data: string | Uint8Array): void {
  writeFileSync(file, data, { mode: PRIVATE_FILE_MODE });
  chmodSync(file, PRIVATE_FILE_MODE);
}

/**
 * Creates `file` empty with 0600 when missing, and narrows it (and its companions that exist) to 0600.
 * SQLite creates its -wal and -shm files with the mode of the database file (os_unix.c findCreateFileMode),
 * so a database file made 0600 before the first open keeps its journal files private too.
 */
export function ensurePrivateFile(file: string, companions: readonly string[] = []): void {
  if (!existsSync(file)) closeSync(openSync(file, 'a', PRIVATE_FILE_MODE));
  for (const f of [file, ...companions]) if (existsSync(f)) chmodSync(f, PRIVATE_FILE_MODE);
}

/** The octal mode of a directory when group or others have any access to it, else undefined. */
export function openToOthers(dir: string): string | undefined {
  const mode = statSync(dir).mode & 0o777;
  return mode & 0o077 ? mode.toString(8).padStart(4, '0') : undefined;
}
