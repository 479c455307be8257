/**
 * A whole ecosystem for integration tests in a temp data dir: CA material, the sandbox (bank AS, platform)
 * and the QTSP, on free loopback ports with real TLS. close() stops everything and removes the files.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEcosystem, type Ecosystem } from '../../src/cli/ecosystem.ts';
import type { ConfigInput } from '../../src/config/schema.ts';
import { pkiPaths } from '../../src/pki/init.ts';

export const QTSP_ID = 'sp:sandbox.qtsp.localhost:6f1c4c52-0b0e-4c4e-9d6b-2b9b8f0d7a31';
export const PROFILE = 'http://uri.etsi.org/19432/v1.1.1#/creationprofile#';
export const SHA256_OID = '2.16.840.1.101.3.4.2.1';

export interface TestEnvironment extends Ecosystem {
  readonly dataDir: string;
  readonly rootCaFile: string;
}

export async function startEnvironment(overrides: ConfigInput = {}): Promise<TestEnvironment> {
  const dataDir = mkdtempSync(join(tmpdir(), 'qtsp-test-'));
  try {
    const eco = await startEcosystem({
      config: {
        ...overrides,
        dataDir,
        qtspId: QTSP_ID,
        server: { port: 0, publicationPort: 0, ...overrides.server },
        // RSA keys cost ~0.45 s each: tests that sign with RSA ask for a pool (signer.rsaPoolSize)
        signer: { rsaPoolSize: 0, ...overrides.signer },
        trust: { jwksCooldownSeconds: 0, ...overrides.trust },
        // test files may share one Redis (REDIS_URL): each environment keeps to its own queues
        redis: { prefix: `qtsp-test-${randomUUID().slice(0, 8)}`, ...overrides.redis },
      },
      defaultMetrics: false,
    });
    return {
      ...eco,
      dataDir,
      rootCaFile: pkiPaths(dataDir).rootCert,
      async close() {
        await eco.close();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
}
