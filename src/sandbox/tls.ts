/**
 * TLS for the sandbox: its own TLS CA and the server certificates it issues (AS, platform, QTSP), HTTPS
 * servers with TLS >= 1.2 (spec 1.7, 8), and client certificate fingerprints (x5t#S256, RFC 8705) compared
 * in constant time. Servers that need client certificates request them but do not chain-check them: the
 * ecosystem uses self-signed client certificates, matched by fingerprint against the registration (spec 5.1, 5.8).
 */
import { createHash, timingSafeEqual, X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import * as https from 'node:https';
import { isIP, type AddressInfo, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { RequestListener } from 'node:http';
import { createRootCa, createTlsCertificate, loadKeyed, saveKeyed, type KeyedCertificate } from '../ca/authority.ts';
import { OID } from '../ca/x509.ts';
import { fromPem } from '../util/base64.ts';
import type { SandboxPaths } from './paths.ts';

export interface ServerIdentity {
  readonly certFile: string;
  readonly keyFile: string;
}

function loadOrCreateCa(paths: SandboxPaths): { ca: KeyedCertificate; created: boolean } {
  if (existsSync(paths.tlsCaCert) && existsSync(paths.tlsCaKey)) {
    return { ca: loadKeyed(paths.tlsCaCert, paths.tlsCaKey), created: false };
  }
  const ca = createRootCa(
    [
      { type: OID.countryName, value: 'DE' },
      { type: OID.organizationName, value: 'qtsp sandbox ecosystem' },
      { type: OID.commonName, value: 'Sandbox TLS CA' },
    ],
    'P-256',
  );
  saveKeyed(ca, paths.tlsCaCert, paths.tlsCaKey);
  return { ca, created: true };
}

/** SAN of every sandbox server: localhost and 127.0.0.1, plus the configured host (any port: SANs name no port). */
function subjectAltNames(host: string): { dnsNames: string[]; ips: string[] } {
  const dnsNames = ['localhost'];
  const ips = ['127.0.0.1'];
  if (isIP(host) && !ips.includes(host)) ips.push(host);
  if (!isIP(host) && !dnsNames.includes(host)) dnsNames.push(host);
  return { dnsNames, ips };
}

/** A server certificate is reissued this many days before its end (the sandbox is a test ecosystem). */
export const SERVER_CERT_RENEW_DAYS = 30;

/** Whether the certificate in `certFile` ends within SERVER_CERT_RENEW_DAYS of `now`. */
export function nearEnd(certFile: string, now: Date): boolean {
  const notAfter = new Date(new X509Certificate(readFileSync(certFile)).validTo).getTime();
  return notAfter - now.getTime() <= SERVER_CERT_RENEW_DAYS * 24 * 3600 * 1000;
}

/** Issues the pair when missing, when `renew`, or when it nears its end; true when it did. */
function ensureServerCert(
  ca: KeyedCertificate,
  renew: boolean,
  certFile: string,
  keyFile: string,
  commonName: string,
  host: string,
): boolean {
  if (!renew && existsSync(certFile) && existsSync(keyFile) && !nearEnd(certFile, new Date())) return false;
  const cert = createTlsCertificate(ca, { commonName, usage: 'server', ...subjectAltNames(host) });
  // the QTSP's listener polls both files and switches once they match
  saveKeyed(cert, certFile, keyFile);
  return true;
}

const SERVERS = [
  ['as', 'asCert', 'asKey', 'Sandbox Bank AS'],
  ['secondAs', 'secondAsCert', 'secondAsKey', 'Second Sandbox Bank AS'],
  ['platform', 'platformCert', 'platformKey', 'Sandbox Platform'],
  ['qtsp', 'qtspCert', 'qtspKey', 'Sandbox QTSP'],
] as const;

export interface SandboxTls {
  readonly as: ServerIdentity;
  /** bank 2's AS, on its own port */
  readonly secondAs: ServerIdentity;
  readonly platform: ServerIdentity;
  readonly qtsp: ServerIdentity;
}

/**
 * Creates what is missing: the TLS CA and the server certificates (all renewed when the CA is new, each one
 * reissued when it nears its end).
 */
export function ensureSandboxTls(paths: SandboxPaths, host: string): SandboxTls {
  const { ca, created } = loadOrCreateCa(paths);
  for (const [, cert, key, name] of SERVERS) ensureServerCert(ca, created, paths[cert], paths[key], name, host);
  return identities(paths);
}

function identities(paths: SandboxPaths): SandboxTls {
  const identity = (cert: (typeof SERVERS)[number][1], key: (typeof SERVERS)[number][2]) => ({
    certFile: paths[cert],
    keyFile: paths[key],
  });
  return {
    as: identity('asCert', 'asKey'),
    secondAs: identity('secondAsCert', 'secondAsKey'),
    platform: identity('platformCert', 'platformKey'),
    qtsp: identity('qtspCert', 'qtspKey'),
  };
}

/**
 * Reissues from the sandbox's TLS CA every server certificate within SERVER_CERT_RENEW_DAYS of its end (the
 * QTSP's too: its listener reloads the file); returns the names of those reissued.
 */
export function renewSandboxTls(paths: SandboxPaths, host: string, now = new Date()): (keyof SandboxTls)[] {
  const due = SERVERS.filter(([, cert]) => nearEnd(paths[cert], now));
  if (due.length === 0) return [];
  const { ca } = loadOrCreateCa(paths);
  for (const [, cert, key, name] of due) ensureServerCert(ca, true, paths[cert], paths[key], name, host);
  return due.map(([name]) => name);
}

/** x5t#S256: base64url of the SHA-256 of the certificate's DER (RFC 8705 section 3.1). */
export function certFingerprint(der: Uint8Array): string {
  return createHash('sha256').update(der).digest('base64url');
}

/** Fingerprint of the first certificate of a PEM file. */
export function pemFingerprint(file: string): string {
  const der = fromPem(readFileSync(file, 'utf8'))[0];
  if (!der) throw new Error(`no certificate in ${file}`);
  return certFingerprint(der);
}

/** Fingerprint of the client certificate presented on this TLS connection, if any. */
export function peerFingerprint(socket: unknown): string | undefined {
  const tls = socket as Partial<TLSSocket>;
  if (typeof tls.getPeerCertificate !== 'function') return undefined;
  const cert = tls.getPeerCertificate();
  return cert?.raw ? certFingerprint(cert.raw) : undefined;
}

/**
 * Whether the client certificate presented on this connection is within its validity period at `now`: the
 * certificate must be one valid for the client (spec 5, item 8), and self-signed ones are not verified by the
 * TLS layer here (rejectUnauthorized off), so its dates are checked by hand.
 */
export function peerCertificateCurrent(socket: unknown, now = new Date()): boolean {
  const tls = socket as Partial<TLSSocket>;
  if (typeof tls.getPeerCertificate !== 'function') return false;
  const cert = tls.getPeerCertificate();
  if (!cert?.raw) return false;
  const from = Date.parse(cert.valid_from);
  const to = Date.parse(cert.valid_to);
  return Number.isFinite(from) && Number.isFinite(to) && from <= now.getTime() && now.getTime() <= to;
}

/** Constant-time comparison of two fingerprints. */
export function fingerprintsEqual(presented: string | undefined, registered: string): boolean {
  if (!presented) return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(registered);
  return a.length === b.length && timingSafeEqual(a, b);
}

function secureContextOf(identity: ServerIdentity): { cert: Buffer; key: Buffer; minVersion: 'TLSv1.2' } {
  return { cert: readFileSync(identity.certFile), key: readFileSync(identity.keyFile), minVersion: 'TLSv1.2' };
}

/** An HTTPS server that remembers its sockets so close() ends even with stalled requests. */
export class TlsServer {
  private readonly sockets = new Set<Socket>();
  readonly server: https.Server;

  constructor(
    private readonly identity: ServerIdentity,
    app: RequestListener,
    clientCerts: boolean,
  ) {
    this.server = https.createServer(
      {
        ...secureContextOf(identity),
        // self-signed client certificates are accepted here and checked by fingerprint in the routes
        requestCert: clientCerts,
        rejectUnauthorized: false,
      },
      app,
    );
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  /** Serves the pair now in the identity's files from the next handshake (after renewSandboxTls). */
  reload(): void {
    this.server.setSecureContext(secureContextOf(this.identity));
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as AddressInfo).port);
      });
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (!this.server.listening) {
        resolve();
        return;
      }
      this.server.close(() => resolve());
      for (const socket of this.sockets) socket.destroy();
      this.server.closeAllConnections();
    });
  }
}
