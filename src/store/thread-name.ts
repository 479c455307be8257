/**
 * Names the current thread for `top -H`, `ps -L` and the benchmark's CPU split (Linux; 15 characters at most).
 */
import { writeFileSync } from 'node:fs';

export function nameThread(name: string): void {
  try {
    writeFileSync('/proc/thread-self/comm', name);
  } catch {
    // not Linux, or /proc not mounted: only the name is missing
  }
}
