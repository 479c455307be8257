/**
 * Outgoing HTTPS: one keep-alive agent trusting the configured CA bundle, and one that also presents our
 * self-signed TLS client certificate (spec 5.8, self_signed_tls_client_auth) for the AS's introspection.
 */
import { readFileSync } from 'node:fs';
import type { Config } from '../config/schema.ts';
import { tlsAgent, type HttpAgent } from '../util/http-client.ts';

export interface OutgoingAgents {
  /** server authentication only (directories, metadata, JWKS) */
  readonly plain: HttpAgent;
  /** with our client certificate (introspection) */
  readonly mtls: HttpAgent;
  destroy(): Promise<void>;
}

export function createOutgoingAgents(config: Config): OutgoingAgents {
  const ca = readFileSync(config.trust.caFile, 'utf8');
  const plain = tlsAgent({ ca });
  const mtls = tlsAgent({
    ca,
    cert: readFileSync(config.client.certFile, 'utf8'),
    key: readFileSync(config.client.keyFile, 'utf8'),
  });
  return {
    plain,
    mtls,
    async destroy() {
      await Promise.all([plain.destroy(), mtls.destroy()]);
    },
  };
}
