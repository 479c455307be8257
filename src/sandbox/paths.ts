/** File layout of the sandbox under <dataDir>/sandbox/. */
import { join } from 'node:path';

export interface SandboxPaths {
  readonly dir: string;
  readonly tlsCaCert: string;
  readonly tlsCaKey: string;
  readonly asCert: string;
  readonly asKey: string;
  readonly platformCert: string;
  readonly platformKey: string;
  readonly qtspCert: string;
  readonly qtspKey: string;
  /** the AS's RS256 signing key (PKCS#8 PEM) */
  readonly asSigningKey: string;
  /** bank 2's AS: its TLS server certificate and key, and its own RS256 signing key */
  readonly secondAsCert: string;
  readonly secondAsKey: string;
  readonly secondAsSigningKey: string;
  /** self-signed client certificates of RPs: <clientsDir>/<clientId>.pem / .key.pem */
  readonly clientsDir: string;
  readonly endpoints: string;
  /** the registration credential of our QTSP's SP record, which the platform gives its operator out of band */
  readonly spRegistrationCredential: string;
}

export function sandboxPaths(dataDir: string): SandboxPaths {
  const dir = join(dataDir, 'sandbox');
  return {
    dir,
    tlsCaCert: join(dir, 'tls-ca.pem'),
    tlsCaKey: join(dir, 'tls-ca.key.pem'),
    asCert: join(dir, 'as-server.pem'),
    asKey: join(dir, 'as-server.key.pem'),
    platformCert: join(dir, 'platform-server.pem'),
    platformKey: join(dir, 'platform-server.key.pem'),
    qtspCert: join(dir, 'qtsp-server.pem'),
    qtspKey: join(dir, 'qtsp-server.key.pem'),
    asSigningKey: join(dir, 'as-signing.key.pem'),
    secondAsCert: join(dir, 'as2-server.pem'),
    secondAsKey: join(dir, 'as2-server.key.pem'),
    secondAsSigningKey: join(dir, 'as2-signing.key.pem'),
    clientsDir: join(dir, 'clients'),
    endpoints: join(dir, 'endpoints.json'),
    spRegistrationCredential: join(dir, 'sp-registration.credential'),
  };
}

/** A client id as a file name: anything outside [A-Za-z0-9._-] becomes '_'. */
export function clientFileBase(clientsDir: string, clientId: string): { certFile: string; keyFile: string } {
  const safe = clientId.replace(/[^A-Za-z0-9._-]/g, '_');
  return { certFile: join(clientsDir, `${safe}.pem`), keyFile: join(clientsDir, `${safe}.key.pem`) };
}
