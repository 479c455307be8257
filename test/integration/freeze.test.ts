/**
 * A `qtsp serve` process frozen (SIGSTOP, as a paused container, a live migration or a CPU-starved host freeze
 * it) while an outgoing call is under way, for longer than that call's deadline, while the peer answers: on
 * SIGCONT its own timer settles the call first and the answer waiting in the socket comes late. The call fails
 * as a timeout (504 to the relying party); the process stays up and signs the next request.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { callSignDoc } from '../../src/rp/flow.ts';
import { sha256b64 } from '../helpers/delivery.ts';
import { startServeFleet, type ServeFleet } from '../helpers/instances.ts';
import { authorize, signaturesOf, signDocBody } from '../helpers/signing.ts';

const INTROSPECTION_TIMEOUT_MS = 2000;
/** well past the introspection deadline */
const FREEZE_MS = 4 * INTROSPECTION_TIMEOUT_MS;

describe('qtsp serve frozen across the deadline of an outgoing call', () => {
  let fleet: ServeFleet;
  before(async () => {
    fleet = await startServeFleet();
  });
  after(async () => {
    await fleet?.close();
  });

  it('answers that call 504, stays up after SIGCONT and answers the next signDoc 200', async () => {
    const env = fleet.instanceEnv('frozen', {
      extra: { QTSP_INTROSPECTION_TIMEOUT_MS: String(INTROSPECTION_TIMEOUT_MS) },
    });
    const serve = await fleet.spawn(env);
    const { endpoints, sandbox } = fleet.shared;
    const first = await authorize(endpoints, [{ hash: sha256b64('frozen 1'), label: 'frozen 1' }]);

    // the introspection request has reached the bank: freeze the QTSP, then let the bank answer into its socket
    let resumed!: Promise<void>;
    sandbox.controls.introspection.hold = async () => {
      delete sandbox.controls.introspection.hold;
      process.kill(serve.pid, 'SIGSTOP');
      await delay(FREEZE_MS);
      resumed = delay(500).then(() => void process.kill(serve.pid, 'SIGCONT'));
    };
    let res: Awaited<ReturnType<typeof callSignDoc>>;
    try {
      res = await callSignDoc(serve.signDocUrl, endpoints, signDocBody(first.accessToken, first.hashes));
    } finally {
      delete sandbox.controls.introspection.hold;
      process.kill(serve.pid, 'SIGCONT');
    }
    await resumed;
    assert.equal(res.status, 504, JSON.stringify(res.body));
    assert.equal((res.body as { error?: string }).error, 'gateway_timeout');

    // the late answer has been read and dropped by now; the process is still there and signs
    await delay(1000);
    assert.deepEqual([serve.child.exitCode, serve.child.signalCode], [null, null], serve.output().slice(-3000));
    const next = await authorize(endpoints, [{ hash: sha256b64('frozen 2'), label: 'frozen 2' }]);
    const signed = await callSignDoc(serve.signDocUrl, endpoints, signDocBody(next.accessToken, next.hashes));
    assert.equal(signaturesOf(signed).length, 1);
    assert.deepEqual([serve.child.exitCode, serve.child.signalCode], [null, null], serve.output().slice(-3000));
  });
});
