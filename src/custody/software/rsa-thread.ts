/**
 * A worker thread of the software custody's RSA key pool (rsa-threads.ts): one message in, one RSA key pair (or
 * an error text) out. The key pair crosses to the main thread as KeyObjects, never serialised.
 */
import { generateKeyPairSync } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';

const { modulusLength } = workerData as { modulusLength: number };

parentPort!.on('message', () => {
  try {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength });
    parentPort!.postMessage({ privateKey, publicKey });
  } catch (err) {
    parentPort!.postMessage({ error: err instanceof Error ? err.message : String(err) });
  }
});
