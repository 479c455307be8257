/**
 * The journal is sealed at shutdown also when the TSA key is in a token (keys.provider pkcs11 on SoftHSM2):
 * `qtsp serve` signs, stops on SIGTERM, and starts again; then `qtsp evidence audit` finds the journal clean,
 * and every entry written before the restart lies in a batch time-stamped before it: none was left for the next
 * start to seal.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { callSignDoc } from '../../src/rp/flow.ts';
import { openStore } from '../../src/store/open.ts';
import { sha256b64 } from '../helpers/delivery.ts';
import { startServeFleet, type ServeFleet } from '../helpers/instances.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';
import { authorize, signaturesOf, signDocBody } from '../helpers/signing.ts';
import { createTestToken, SOFTHSM2_MODULE, type TestToken } from '../helpers/softhsm.ts';

/** What `qtsp evidence audit --json` reports, as far as this test reads it. */
interface AuditJson {
  readonly batches: number;
  readonly entries: number;
  readonly findings: readonly unknown[];
  readonly clean: boolean;
}

describe('qtsp serve with its keys in a SoftHSM2 token, stopped by SIGTERM', () => {
  let fleet: ServeFleet;
  let token: TestToken;
  before(async () => {
    token = createTestToken('qtsp-stop-seal');
    fleet = await startServeFleet();
  });
  after(async () => {
    await fleet?.close();
    token?.close();
  });

  it('seals the journal before it closes the token: nothing is left for the next start', async () => {
    const env = fleet.instanceEnv('hsm', {
      extra: {
        QTSP_KEYS_PROVIDER: 'pkcs11',
        QTSP_KEYS_PKCS11_MODULE: SOFTHSM2_MODULE,
        QTSP_KEYS_TOKEN_LABEL: token.label,
        QTSP_KEYS_PIN_FILE: token.pinFile,
        SOFTHSM2_CONF: token.conf,
        QTSP_JOURNAL_SEAL_INTERVAL_SECONDS: '0', // sealed at shutdown only
        QTSP_LOG_LEVEL: 'info', // the seal's outcome is in the log
      },
    });
    // the key ceremony in the token, under the root of the shared material
    const ceremony = await qtsp(
      ['pki', 'init', '--pkcs11', '--ceremony-dir', join(fleet.shared.root, 'shared', 'ceremony')],
      env,
    );
    assert.equal(ceremony.code, 0, ceremony.output);

    const first = await fleet.spawn(env);
    const auth = await authorize(fleet.shared.endpoints, [{ hash: sha256b64('sealed at stop'), label: 'sealed' }]);
    signaturesOf(
      await callSignDoc(first.signDocUrl, fleet.shared.endpoints, signDocBody(auth.accessToken, auth.hashes)),
    );
    first.child.kill('SIGTERM');
    assert.deepEqual(await first.exited, { code: 0, signal: null }, first.output().slice(-3000));
    assert.doesNotMatch(first.output(), /journal\.seal_failed/, first.output().slice(-3000));
    assert.match(first.output(), /journal\.sealed/);

    const restartedAt = new Date();
    await fleet.spawn(env);
    const audit = await qtsp(['evidence', 'audit', '--json', '--data-dir', env.QTSP_DATA_DIR!], env);
    const report = JSON.parse(audit.stdout) as AuditJson;
    assert.equal(audit.code, 0, audit.output);
    assert.deepEqual(report.findings, []);
    assert.ok(report.batches >= 1 && report.entries >= 2, audit.output);

    const store = await openStore({ dataDir: env.QTSP_DATA_DIR!, store: { driver: 'sqlite', pingIntervalMs: 5000 } });
    try {
      const horizon = await store.journal.horizon();
      const before = (await store.journal.entries(0, horizon)).filter((e) => e.recordedAt < restartedAt);
      assert.ok(
        before.some((e) => e.kind === 'signing.returned'),
        'the signing is journaled before the restart',
      );
      for (const entry of before) {
        const batch = await store.journal.batchOf(entry.seq);
        assert.ok(batch, `entry ${entry.seq} (${entry.kind}) was not sealed at shutdown`);
        assert.ok(batch.sealedAt < restartedAt, `entry ${entry.seq} sealed at ${batch.sealedAt.toISOString()}`);
      }
    } finally {
      await store.close();
    }
  });
});
