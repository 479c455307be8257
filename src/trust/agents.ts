/**
 * Outgoing HTTPS: one keep-alive agent trusting the configured CA bundle, and one that also presents our
 * self-signed TLS client certificate (spec 5.8, self_signed_tls_client_auth) for the AS's introspection.
 */
import { readFileSync } from 'node:fs';
import * as https from 'node:https';
import type { Config } from '../config/schema.ts';

export interface OutgoingAgents {
  /** server authentication only (directories, metadata, JWKS) */
  readonly plain: https.Agent;
  /** with our client certificate (introspection) */
  readonly mtls: https.Agent;
  destroy(): void;
}

export function createOutgoingAgents(config: Config): OutgoingAgents {
  const ca = readFileSync(config.trust.caFile);
  const common = { ca, keepAlive: true, minVersion: 'TLSv1.2' as const, maxSockets: 64 };
  const plain = new https.Agent(common);
  const mtls = new https.Agent({ ...common, cert: readFileSync(config.client.certFile), key: readFileSync(config.client.keyFile) });
  return {
    plain,
    mtls,
    destroy() {
      plain.destroy();
      mtls.destroy();
    },
  };
}
