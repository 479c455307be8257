/**
 * The software custody's signer key pairs (step 7): EC keys generated inline, as they are cheap; RSA-3072 keys
 * from a pool of fresh, never-used pairs made in worker threads (rsa-threads.ts).
 */
import { generateKeyPair, type KeyAlgorithm, type KeyPair } from '../../crypto/keys.ts';
import type { Logger } from '../../util/logger.ts';
import { KeyPool } from '../key-pool.ts';
import { RsaThreads } from './rsa-threads.ts';

export interface SignerKeysOptions {
  /** RSA keys kept ready; 0: every RSA request generates its key on demand (still off the event loop) */
  readonly rsaPoolSize: number;
  /** worker threads making RSA keys (default: rsa-threads.ts) */
  readonly threads?: number;
  readonly logger?: Logger;
}

export interface SignerKeys {
  readonly rsa: KeyPool<KeyPair>;
  /** the worker threads that make the RSA keys */
  readonly threads: RsaThreads;
  /** a fresh key pair, never handed out before */
  take(algorithm: KeyAlgorithm): Promise<KeyPair>;
  /** stops the worker threads; RSA keys nobody took are dropped */
  close(): Promise<void>;
}

export function createSignerKeys(options: SignerKeysOptions): SignerKeys {
  const threads = new RsaThreads(options.threads);
  const rsa = new KeyPool<KeyPair>({
    maker: threads,
    size: options.rsaPoolSize,
    concurrency: threads.threads,
    what: 'RSA-3072',
    ...(options.logger ? { logger: options.logger } : {}),
  });
  rsa.fill();
  return {
    rsa,
    threads,
    take: (algorithm) => (algorithm === 'RSA-3072' ? rsa.take() : Promise.resolve(generateKeyPair(algorithm))),
    close: () => rsa.close(),
  };
}
