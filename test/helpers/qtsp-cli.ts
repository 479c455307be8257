/** The `qtsp` command of this checkout (bin/qtsp.js) as a user runs it: a child process of this Node. */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const QTSP_BIN = fileURLToPath(new URL('../../bin/qtsp.js', import.meta.url));

export interface QtspRun {
  /** the exit code (1 when it ended by a signal) */
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout, then stderr */
  readonly output: string;
}

/** Runs `qtsp <args>` to its end; `env` adds to this process's environment (or replaces its variables). */
export function qtsp(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<QtspRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [QTSP_BIN, ...args],
      { encoding: 'utf8', env: { ...process.env, ...env } },
      (err, stdout, stderr) => {
        const code = err ? ((err as { code?: unknown }).code ?? 1) : 0;
        resolve({ code: typeof code === 'number' ? code : 1, stdout, stderr, output: stdout + stderr });
      },
    );
  });
}
