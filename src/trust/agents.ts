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
  // PEM as strings, not Buffers: an https.Agent names every request's connection pool by its TLS options
  // (Agent#getName, on each request), and a Buffer there is decoded anew each time: 1.1 against 0.14 us and
  // some 5 KB of garbage per introspection call (allocation profile of the bench, issue 12)
  const ca = readFileSync(config.trust.caFile, 'utf8');
  const common = { ca, keepAlive: true, minVersion: 'TLSv1.2' as const, maxSockets: 64 };
  const plain = new https.Agent(common);
  const mtls = new https.Agent({ ...common, cert: readFileSync(config.client.certFile, 'utf8'), key: readFileSync(config.client.keyFile, 'utf8') });
  return {
    plain,
    mtls,
    destroy() {
      plain.destroy();
      mtls.destroy();
    },
  };
}
