/**
 * A whole ecosystem for integration tests in a temp data dir: CA material, the sandbox (bank AS, platform)
 * and the QTSP, on free loopback ports with real TLS. close() stops everything and removes the files.
 */
import { randomUUID } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEcosystem, type Ecosystem, type EcosystemOptions } from '../../src/cli/ecosystem.ts';
import { loadConfig } from '../../src/config/load.ts';
import type { ConfigInput } from '../../src/config/schema.ts';
import { pkiPaths } from '../../src/ca/material.ts';
import type { SignatureScheme, SignHash } from '../../src/crypto/signature.ts';
import { startQtsp, type QtspService } from '../../src/service.ts';
import type { Logger } from '../../src/util/logger.ts';

export const QTSP_ID = 'sp:sandbox.qtsp.localhost:6f1c4c52-0b0e-4c4e-9d6b-2b9b8f0d7a31';
export const PROFILE = 'http://uri.etsi.org/19432/v1.1.1#/creationprofile#';
export const SHA256_OID = '2.16.840.1.101.3.4.2.1';

export interface TestEnvironment extends Ecosystem {
  readonly dataDir: string;
  readonly rootCaFile: string;
}

/**
 * The key custody integration tests run with: software (default), or `softhsm` when TEST_KEY_CUSTODY=softhsm
 * (the test/integration/softhsm-*.test.ts files set it and run a matrix file again): keys.provider softhsm,
 * a SoftHSM2 token under the environment's temp data dir (never the machine's default tokens).
 */
export const TEST_KEY_CUSTODY: 'software' | 'softhsm' =
  process.env['TEST_KEY_CUSTODY'] === 'softhsm' ? 'softhsm' : 'software';

/** Whether the environment's custody signs this scheme with this hash (SoftHSM2 2.6: no RSASSA-PSS with SHA-3). */
export function custodySigns(env: Ecosystem, scheme: SignatureScheme, hash: string): boolean {
  return env.qtsp.deps.keys.supports(scheme, hash as SignHash);
}

/**
 * `options`: further ecosystem options (e.g. clients registered at the sandbox platform). A data directory given
 * in `overrides` is the caller's and stays after close(); otherwise a temp one is made and removed.
 */
export async function startEnvironment(
  overrides: ConfigInput = {},
  options: Pick<EcosystemOptions, 'clients' | 'logger' | 'demoRpPort'> = {},
): Promise<TestEnvironment> {
  const dataDir = overrides.dataDir ?? mkdtempSync(join(tmpdir(), 'qtsp-test-'));
  const removeDataDir = () => {
    if (overrides.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    const eco = await startEcosystem({
      config: {
        ...overrides,
        dataDir,
        qtspId: QTSP_ID,
        keys: { provider: TEST_KEY_CUSTODY, ...overrides.keys },
        server: { port: 0, publicationPort: 0, ...overrides.server },
        ops: { port: 0, ...overrides.ops },
        // no RSA key pool by default: an RSA key is slow to make; tests that sign with RSA ask for one
        // (signer.rsaPoolSize)
        signer: { rsaPoolSize: 0, ...overrides.signer },
        trust: { jwksCooldownSeconds: 0, ...overrides.trust },
        // test files may share one Redis (REDIS_URL): each environment keeps to its own queues
        redis: { prefix: `qtsp-test-${randomUUID().slice(0, 8)}`, ...overrides.redis },
      },
      defaultMetrics: false,
      ...options,
    });
    return {
      ...eco,
      dataDir,
      rootCaFile: pkiPaths(dataDir).rootCert,
      async close() {
        await eco.close();
        // the service's stop bounds each step, so the key custody may still be closing (a key generation under
        // way): its token is closed before its files go and before a later environment of this process opens
        // one (a PKCS#11 module is initialised once per process, with the SOFTHSM2_CONF of that moment)
        await eco.qtsp.deps.keys.close();
        removeDataDir();
      },
    };
  } catch (err) {
    removeDataDir();
    throw err;
  }
}

/**
 * A further QTSP on the sandbox, Redis and CA material of `env`, with its own data directory (store, key
 * archive clone) and free ports; `overrides` change its settings (a dead trust source, other limits).
 * close() also removes its data directory.
 */
export async function startExtraQtsp(
  env: TestEnvironment,
  overrides: { server?: ConfigInput['server']; trust?: ConfigInput['trust']; tsa?: ConfigInput['tsa'] } = {},
  options: { logger?: Logger } = {},
): Promise<QtspService> {
  const dataDir = mkdtempSync(join(tmpdir(), 'qtsp-extra-'));
  cpSync(pkiPaths(env.dataDir).dir, pkiPaths(dataDir).dir, { recursive: true });
  const c = env.config;
  try {
    const config = loadConfig(
      {
        dataDir,
        qtspId: c.qtspId,
        server: {
          port: 0,
          publicationPort: 0,
          tlsCertFile: c.server.tlsCertFile,
          tlsKeyFile: c.server.tlsKeyFile,
          publicBaseUrl: c.server.publicBaseUrl,
          ...overrides.server,
        },
        ops: { port: 0 },
        client: { certFile: c.client.certFile, keyFile: c.client.keyFile },
        trust: {
          caFile: c.trust.caFile,
          idpDirectoryUrl: c.trust.idpDirectoryUrl,
          keyArchiveUrl: c.trust.keyArchiveUrl,
          keyArchiveSignerKeyFile: c.trust.keyArchiveSignerKeyFile,
          jwksCooldownSeconds: 0,
          ...overrides.trust,
        },
        ...(overrides.tsa ? { tsa: overrides.tsa } : {}),
        signer: { rsaPoolSize: 0 },
        redis: { url: c.redis.url, prefix: `qtsp-extra-${randomUUID().slice(0, 8)}` },
        mediation: { url: c.mediation.url },
        notification: { smtpUrl: c.notification.smtpUrl },
      },
      {},
    );
    const qtsp = await startQtsp(config, {
      defaultMetrics: false,
      ...(options.logger ? { logger: options.logger } : {}),
    });
    return {
      ...qtsp,
      async close() {
        await qtsp.close();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
}
