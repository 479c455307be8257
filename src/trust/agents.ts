/**
 * Outgoing HTTPS: one keep-alive agent trusting the configured CA bundle, and one that also presents our
 * self-signed TLS client certificate (spec 5.8, self_signed_tls_client_auth) for the AS's introspection.
 * The client certificate can be replaced while running (a rotation, ca/client-certificate.ts): new
 * connections present the new one, requests already under way finish on the old agent, which then closes.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import { Dispatcher } from 'undici';
import type { Config } from '../config/schema.ts';
import { tlsAgent, type HttpAgent } from '../util/http-client.ts';

export interface OutgoingAgents {
  /** server authentication only (directories, metadata, JWKS) */
  readonly plain: HttpAgent;
  /** with our client certificate (introspection) */
  readonly mtls: HttpAgent;
  /**
   * Reads client.certFile and client.keyFile again; true when they hold another certificate, which new
   * connections present from now on. Throws, keeping the current one, when the key does not match it.
   */
  reloadClientCertificate(): boolean;
  destroy(): Promise<void>;
}

interface ClientPair {
  readonly cert: string;
  readonly key: string;
}

/** Our certificate and key from their files; refused when the key is not the certificate's. */
function readClientPair(config: Config): ClientPair {
  const cert = readFileSync(config.client.certFile, 'utf8');
  const key = readFileSync(config.client.keyFile, 'utf8');
  const publicKey = new X509Certificate(cert).publicKey.export({ format: 'jwk' });
  const fromKey = createPrivateKey(key).export({ format: 'jwk' });
  if (publicKey.x !== fromKey.x || publicKey.y !== fromKey.y || publicKey.n !== fromKey.n)
    throw new Error(`${config.client.keyFile} is not the key of the certificate in ${config.client.certFile}`);
  return { cert, key };
}

/** A dispatcher that hands each request to the current agent; switch() replaces it and closes the old one. */
class SwitchableAgent extends Dispatcher {
  #current: HttpAgent;
  constructor(first: HttpAgent) {
    super();
    this.#current = first;
  }

  switch(next: HttpAgent): void {
    const old = this.#current;
    this.#current = next;
    void old.close().catch(() => undefined); // after the requests under way have finished
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    return this.#current.dispatch(options, handler);
  }

  override close(): Promise<void>;
  override close(callback: () => void): void;
  override close(callback?: () => void): Promise<void> | void {
    const done = this.#current.close();
    if (!callback) return done;
    void done.then(callback, callback);
  }

  override destroy(): Promise<void>;
  override destroy(err: Error | null): Promise<void>;
  override destroy(callback: () => void): void;
  override destroy(err: Error | null, callback: () => void): void;
  override destroy(...args: unknown[]): Promise<void> | void {
    const callback = args.find((a): a is () => void => typeof a === 'function');
    const done = this.#current.destroy();
    if (!callback) return done;
    void done.then(callback, callback);
  }
}

export function createOutgoingAgents(config: Config): OutgoingAgents {
  const ca = readFileSync(config.trust.caFile, 'utf8');
  const plain = tlsAgent({ ca });
  let pair = readClientPair(config);
  const mtls = new SwitchableAgent(tlsAgent({ ca, ...pair }));
  return {
    plain,
    mtls,
    reloadClientCertificate() {
      const next = readClientPair(config);
      if (next.cert === pair.cert && next.key === pair.key) return false;
      mtls.switch(tlsAgent({ ca, ...next }));
      pair = next;
      return true;
    },
    async destroy() {
      await Promise.all([plain.destroy(), mtls.destroy()]);
    },
  };
}

/**
 * Polls client.certFile (fs.watchFile, every calendar.reloadCheckSeconds) and switches to the certificate and
 * key found there when it changes: a rotation needs no restart. `report` hears each switch or refusal.
 */
export function watchClientCertificate(
  config: Config,
  agents: Pick<OutgoingAgents, 'reloadClientCertificate'>,
  report: (outcome: { switched: true } | { error: Error }) => void,
): { stop(): void } {
  const file = config.client.certFile;
  const changed = (now: Stats, before: Stats) => {
    if (now.mtimeMs === before.mtimeMs && now.ino === before.ino) return;
    try {
      if (agents.reloadClientCertificate()) report({ switched: true });
    } catch (err) {
      report({ error: err as Error });
    }
  };
  watchFile(file, { interval: config.calendar.reloadCheckSeconds * 1000, persistent: false }, changed);
  return { stop: () => unwatchFile(file, changed) };
}
