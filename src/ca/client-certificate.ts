/**
 * Rotation of our self-signed TLS client certificate toward the banks (spec 5.8 self_signed_tls_client_auth;
 * the banks accept the certificates our SP directory record registers, spec 2.13 jwks). Two steps, so the
 * banks accept both certificates while the instances switch:
 *   rotate: a new key and certificate (kept beside the current pair until installed), published in our record
 *           together with the current one, then installed as client.certFile / client.keyFile, which every
 *           instance watches and switches to without a restart (trust/agents.ts);
 *   retire: once every instance has switched, the record keeps the current certificate alone.
 * Both updates authenticate at the directory with the certificate in use at that moment. Once that one has
 * expired it authenticates nothing: `register` publishes a new certificate alone with the registration
 * credential the platform gave our operator out of band, then installs it.
 */
import { createHash, type KeyObject, X509Certificate } from 'node:crypto';
import { CompactSign } from 'jose';
import { existsSync, readFileSync, renameSync } from 'node:fs';
import { createTlsCertificate, loadKeyed, saveKeyed, type SoftwareKeyedCertificate } from './authority.ts';
import { toPem } from '../util/base64.ts';
import { httpRequest, tlsAgent } from '../util/http-client.ts';

export interface ClientCertificateFiles {
  readonly qtspId: string;
  readonly certFile: string;
  readonly keyFile: string;
  /** PEM bundle trusted for the directory's TLS server certificate */
  readonly caFile: string;
  /** the SP directory, e.g. https://<platform>/sps/v1/ */
  readonly spDirectoryUrl: string;
  readonly timeoutMs: number;
}

export interface RotationResult {
  /** x5t#S256 of the certificate that was in use, and of the one that is now */
  readonly previous: string;
  readonly current: string;
  readonly notAfter: Date;
}

const nextFile = (file: string) => `${file}.next`;
/** x5t#S256, as the banks match it (RFC 8705 section 3.1) */
const fingerprint = (der: Buffer) => createHash('sha256').update(der).digest('base64url');

/** The JWK of a certificate's key with the certificate as x5c (RFC 7517 section 4.7), as spec 2.13 jwks holds it. */
function certificateJwk(der: Buffer): Record<string, unknown> {
  return { ...new X509Certificate(der).publicKey.export({ format: 'jwk' }), x5c: [der.toString('base64')] };
}

/** How an update authenticates: with a certificate our record registers, or our registration credential. */
type DirectoryAuth = { readonly certificate: SoftwareKeyedCertificate } | { readonly credential: string };

/** The JWS algorithm of a key: ECDSA with the hash of its curve's size, RS256 for RSA, EdDSA. */
function jwsAlgorithm(key: KeyObject): string {
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (key.asymmetricKeyType === 'ec')
    return curve === 'secp384r1' ? 'ES384' : curve === 'secp521r1' ? 'ES512' : 'ES256';
  return key.asymmetricKeyType === 'rsa' ? 'RS256' : 'EdDSA';
}

/**
 * Proof that we hold the key of a certificate we add to our record: a JWS made with it over our client_id and
 * the time, naming the certificate (the directory's rule; src/sandbox/platform/sp-key-proof.ts plays it).
 */
function keyProof(files: ClientCertificateFiles, pair: SoftwareKeyedCertificate): Promise<string> {
  const payload = { client_id: files.qtspId, iat: Math.floor(Date.now() / 1000) };
  return new CompactSign(new TextEncoder().encode(JSON.stringify(payload)))
    .setProtectedHeader({
      alg: jwsAlgorithm(pair.privateKey),
      typ: 'sp-key-proof+jwt',
      'x5t#S256': fingerprint(pair.der),
    })
    .sign(pair.privateKey);
}

/**
 * Replaces the certificates our record registers, authenticating with `auth`; `added` are the pairs new to the
 * record, whose keys we prove to hold. The directory's refusal is thrown.
 */
async function publish(
  files: ClientCertificateFiles,
  auth: DirectoryAuth,
  ders: Buffer[],
  added: SoftwareKeyedCertificate[] = [],
): Promise<void> {
  const as = 'certificate' in auth ? auth.certificate : undefined;
  const agent = tlsAgent({
    ca: readFileSync(files.caFile, 'utf8'),
    ...(as
      ? { cert: toPem(as.der, 'CERTIFICATE'), key: as.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string }
      : {}),
    connections: 1,
  });
  const url = new URL(`${encodeURIComponent(files.qtspId)}/jwks`, files.spDirectoryUrl).toString();
  const bearer: Record<string, string> = 'credential' in auth ? { authorization: `Bearer ${auth.credential}` } : {};
  try {
    const res = await httpRequest(url, {
      method: 'PUT',
      agent,
      timeoutMs: files.timeoutMs,
      headers: { 'content-type': 'application/json', ...bearer },
      body: JSON.stringify({
        keys: ders.map(certificateJwk),
        proofs: await Promise.all(added.map((pair) => keyProof(files, pair))),
      }),
      maxResponseBytes: 64 * 1024,
    });
    if (res.status !== 200) {
      const body = res.body.toString('utf8');
      const detail = (() => {
        try {
          return (JSON.parse(body) as { error_description?: string }).error_description ?? body;
        } catch {
          return body;
        }
      })();
      throw new Error(`the SP directory refused the update (HTTP ${res.status}): ${detail}`);
    }
  } finally {
    await agent.close();
  }
}

/** The staged pair of an earlier rotation that did not finish, else a new one, kept beside the current pair. */
function stagedPair(files: ClientCertificateFiles): SoftwareKeyedCertificate {
  const cert = nextFile(files.certFile);
  const key = nextFile(files.keyFile);
  if (existsSync(cert) && existsSync(key)) return loadKeyed(cert, key);
  const made = createTlsCertificate(undefined, { commonName: files.qtspId, usage: 'client' });
  saveKeyed(made, cert, key);
  return made;
}

/** The staged pair becomes client.certFile / client.keyFile: the key first, the certificate (watched) last. */
function install(files: ClientCertificateFiles): void {
  renameSync(nextFile(files.keyFile), files.keyFile);
  renameSync(nextFile(files.certFile), files.certFile);
}

/** Step 1: new pair, both certificates in our record, the new pair installed for the instances to switch to. */
export async function rotateClientCertificate(files: ClientCertificateFiles): Promise<RotationResult> {
  const current = loadKeyed(files.certFile, files.keyFile);
  const staged = stagedPair(files);
  await publish(files, { certificate: current }, [current.der, staged.der], [staged]);
  install(files);
  return {
    previous: fingerprint(current.der),
    current: fingerprint(staged.der),
    notAfter: new Date(new X509Certificate(staged.der).validTo),
  };
}

/** Step 2: our record registers the certificate in client.certFile alone. */
export async function retireOldClientCertificates(files: ClientCertificateFiles): Promise<string> {
  const current = loadKeyed(files.certFile, files.keyFile);
  if (existsSync(nextFile(files.certFile)))
    throw new Error(`a rotation has not finished (${nextFile(files.certFile)} exists): run --rotate again first`);
  await publish(files, { certificate: current }, [current.der]);
  return fingerprint(current.der);
}

/**
 * The way back once our certificate has expired (the directory refuses it, and so would every bank): a new pair
 * registered alone in our record with the platform's registration credential, then installed for the instances
 * to switch to. Needs no --retire: the record holds the new certificate alone.
 */
export async function registerClientCertificate(
  files: ClientCertificateFiles,
  credential: string,
): Promise<RotationResult> {
  const previous = fingerprint(new X509Certificate(readFileSync(files.certFile)).raw);
  const staged = stagedPair(files);
  await publish(files, { credential }, [staged.der], [staged]);
  install(files);
  return { previous, current: fingerprint(staged.der), notAfter: new Date(new X509Certificate(staged.der).validTo) };
}
