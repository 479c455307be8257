/**
 * Certificate authorities in software: create, save and load a CA (certificate + private key) and issue the
 * long-lived certificates around it (sub-CAs, TLS certificates). Per-request signer certificates are in
 * signer-certificate.ts. A certificate whose key lives elsewhere (a PKCS#11 token: custody/) is a
 * KeyedCertificate too (certifiedKey), without a private key object.
 */
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { ensurePrivateDir, writePrivateFile } from '../util/private-files.ts';
import { dirname } from 'node:path';
import * as pkijs from 'pkijs';
import { SoftwareSigningKey, type SigningKey } from '../crypto/signature.ts';
import { defaultHashFor, generateKeyPair, type KeyAlgorithm, type KeyPair } from '../crypto/keys.ts';
import {
  basicConstraintsExtension,
  buildName,
  extKeyUsageExtension,
  issueCertificate,
  keyIdentifier,
  keyUsageExtension,
  OID,
  spkiOf,
  subjectAltNameExtension,
  type Issuer,
  type NameAttribute,
} from './x509.ts';
import { fromPem, toPem } from '../util/base64.ts';

/** A certificate with the key that signs for it, wherever that key lives: a CA, a TSA, an OCSP responder. */
export interface KeyedCertificate {
  readonly der: Buffer;
  readonly certificate: pkijs.Certificate;
  readonly key: SigningKey;
  /** the certificate as an issuer of others */
  readonly issuer: Issuer;
}

/** A certificate with its private key in this process: a TLS identity, a sandbox or software-custody CA. */
export interface SoftwareKeyedCertificate extends KeyedCertificate {
  readonly privateKey: KeyObject;
}

const YEAR_MS = 365 * 24 * 3600 * 1000;

/** A certificate and the key of its subject public key (the caller made sure they belong together). */
export function certifiedKey(
  der: Buffer,
  key: SigningKey,
  certificate = pkijs.Certificate.fromBER(new Uint8Array(der)),
): KeyedCertificate {
  const issuer: Issuer = {
    name: certificate.subject,
    keyId: keyIdentifier(certificate.subjectPublicKeyInfo),
    key,
    hash: defaultHashFor(key.algorithm),
  };
  return { der, certificate, key, issuer };
}

function keyed(der: Buffer, certificate: pkijs.Certificate, privateKey: KeyObject): SoftwareKeyedCertificate {
  return { ...certifiedKey(der, new SoftwareSigningKey(privateKey), certificate), privateKey };
}

function validity(years: number): { notBefore: Date; notAfter: Date } {
  const now = Date.now();
  return { notBefore: new Date(now - 3600_000), notAfter: new Date(now + years * YEAR_MS) };
}

export function createRootCa(
  subject: readonly NameAttribute[],
  algorithm: KeyAlgorithm,
  years = 20,
): SoftwareKeyedCertificate {
  const keys = generateKeyPair(algorithm);
  const { der, certificate } = issueCertificate({
    subject: buildName(subject),
    publicKey: spkiOf(keys.publicKey),
    selfSignKey: keys.privateKey,
    hash: defaultHashFor(algorithm),
    ...validity(years),
    extensions: [basicConstraintsExtension(true), keyUsageExtension(['keyCertSign', 'cRLSign'])],
    keyIdentifiers: true,
  });
  return keyed(der, certificate, keys.privateKey);
}

export function createSubCa(
  parent: KeyedCertificate,
  subject: readonly NameAttribute[],
  algorithm: KeyAlgorithm,
  years = 10,
): SoftwareKeyedCertificate {
  const keys = generateKeyPair(algorithm);
  const { der, certificate } = issueCertificate({
    subject: buildName(subject),
    publicKey: spkiOf(keys.publicKey),
    issuer: parent.issuer,
    ...validity(years),
    extensions: [basicConstraintsExtension(true, 0), keyUsageExtension(['keyCertSign', 'cRLSign'])],
    keyIdentifiers: true,
  });
  return keyed(der, certificate, keys.privateKey);
}

export interface TlsCertificateOptions {
  readonly commonName: string;
  readonly dnsNames?: readonly string[];
  readonly ips?: readonly string[];
  readonly usage: 'server' | 'client';
  readonly years?: number;
}

/** A TLS certificate issued by `ca`, or self-signed when `ca` is undefined (spec 5.8: self_signed_tls_client_auth). */
export function createTlsCertificate(
  ca: KeyedCertificate | undefined,
  options: TlsCertificateOptions,
): SoftwareKeyedCertificate {
  const keys: KeyPair = generateKeyPair('P-256');
  const extensions = [
    basicConstraintsExtension(false),
    keyUsageExtension(['digitalSignature']),
    extKeyUsageExtension([options.usage === 'server' ? OID.serverAuth : OID.clientAuth]),
  ];
  if (options.dnsNames?.length || options.ips?.length) {
    extensions.push(subjectAltNameExtension(options.dnsNames ?? [], options.ips ?? []));
  }
  const { der, certificate } = issueCertificate({
    subject: buildName([{ type: OID.commonName, value: options.commonName }]),
    publicKey: spkiOf(keys.publicKey),
    ...(ca ? { issuer: ca.issuer } : { selfSignKey: keys.privateKey }),
    ...validity(options.years ?? 2),
    extensions,
    keyIdentifiers: true,
  });
  return keyed(der, certificate, keys.privateKey);
}

export function saveKeyed(
  kc: SoftwareKeyedCertificate,
  certFile: string,
  keyFile: string,
  chain: readonly Buffer[] = [],
): void {
  ensurePrivateDir(dirname(certFile));
  ensurePrivateDir(dirname(keyFile));
  writeFileSync(certFile, [kc.der, ...chain].map((d) => toPem(d, 'CERTIFICATE')).join(''));
  writePrivateFile(keyFile, kc.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string);
}

/** Loads a PEM certificate (the first one of the file) and its PEM private key. */
export function loadKeyed(certFile: string, keyFile: string): SoftwareKeyedCertificate {
  const der = fromPem(readFileSync(certFile, 'utf8'))[0];
  if (!der) throw new Error(`no certificate in ${certFile}`);
  const privateKey = createPrivateKey(readFileSync(keyFile, 'utf8'));
  return keyed(der, pkijs.Certificate.fromBER(new Uint8Array(der)), privateKey);
}
