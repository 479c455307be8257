/**
 * A bare sandbox for tests that talk to the banks and the platform without a QTSP: a fresh data directory with
 * our PKI (pkiInit), every sandbox server on a free loopback port, and the QTSP's record in the SP directory
 * (spec 2.13) naming its client certificate and a signDoc URL nobody serves.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pkiInit } from '../../src/ca/init.ts';
import { pkiPaths } from '../../src/ca/material.ts';
import { type Sandbox, type SandboxOptions, startSandbox } from '../../src/sandbox/index.ts';

/** The signDoc URL in the QTSP's SP directory record: no QTSP listens there in a bare sandbox. */
export const UNSERVED_SIGN_DOC_URL = 'https://127.0.0.1:8440/signDoc';

export interface TestSandbox {
  /** the temp directory holding the PKI (pkiPaths) and the sandbox's files (<dataDir>/sandbox/) */
  readonly dataDir: string;
  readonly sandbox: Sandbox;
  /** stops the sandbox and removes dataDir */
  close(): Promise<void>;
}

/**
 * Starts a bare sandbox in a new temp directory named with prefix, for the QTSP qtspId; extra adds or overrides
 * sandbox options (registered clients, token lifetime). Removes the directory again when the start fails.
 */
export async function startTestSandbox(
  prefix: string,
  qtspId: string,
  extra: Partial<SandboxOptions> = {},
): Promise<TestSandbox> {
  const dataDir = mkdtempSync(join(tmpdir(), prefix));
  const remove = () => rmSync(dataDir, { recursive: true, force: true });
  try {
    pkiInit({ dataDir, qtspId });
    const sandbox = await startSandbox({
      dataDir,
      asPort: 0,
      platformPort: 0,
      mediationPort: 0,
      smtpPort: 0,
      qtsp: { id: qtspId, clientCertFile: pkiPaths(dataDir).clientCert, signDocUrl: UNSERVED_SIGN_DOC_URL },
      ...extra,
    });
    return {
      dataDir,
      sandbox,
      close: async () => {
        try {
          await sandbox.close();
        } finally {
          remove();
        }
      },
    };
  } catch (err) {
    remove();
    throw err;
  }
}
