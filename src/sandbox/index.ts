/**
 * The sandbox ecosystem (DESIGN.md "Parties in the sandbox"): a bank AS (metadata, PAR, authorize, token,
 * introspection, JWKS) and the platform (IDP directory, SP directory, service configuration), each its own
 * HTTPS server on loopback. The QTSP reaches it only over HTTPS, as it would reach real banks.
 *
 * On start it creates what is missing under <dataDir>/sandbox/ (TLS CA, server certificates for AS,
 * platform and QTSP, the AS signing key, the default RP's self-signed client certificate, the key archive
 * with its operating party's OpenPGP key) and writes endpoints.json for the RP command line.
 */
import { writeFileSync } from 'node:fs';
import { ensurePrivateDir } from '../util/private-files.ts';
import { resolve } from 'node:path';
import { asApp } from './as/app.ts';
import type { AsContext } from './as/context.ts';
import { signJwt } from './as/jwt.ts';
import { AsKeyStore } from './as/keys.ts';
import { createStore } from './as/store.ts';
import { ClientFileError } from './client-file.ts';
import { ClientRegistry, DEFAULT_RP_CLIENT_ID } from './clients.ts';
import { createControls } from './controls.ts';
import { startEventParties, type EventParties } from './mediation/index.ts';
import { keyArchivePaths, SandboxKeyArchive } from './key-archive/repository.ts';
import { platformApp } from './platform/app.ts';
import { PlatformDirectory } from './platform/directory.ts';
import { buildQtspRecord } from './platform/sp-record.ts';
import { sandboxPaths, type SandboxPaths } from './paths.ts';
import { ensureSandboxTls, TlsServer, urlHost } from './tls.ts';
import type { RpRegistration, Sandbox, SandboxOptions } from './types.ts';

export type {
  ClientState,
  ExternalClient,
  IntrospectionMode,
  MintOptions,
  PlatformClient,
  RpRegistration,
  Sandbox,
  SandboxControls,
  SandboxOptions,
} from './types.ts';
export { ClientFileError, externalClients, parseClientOption, readClientFile } from './client-file.ts';
export { sandboxPaths } from './paths.ts';
export { PLATFORM_CLAIMS_BASE, ACR_ONLINE_BANKING_SCA, DOCUMENTS_CONSENTED_CLAIM } from './platform/constants.ts';
export { DEFAULT_SIGNING_DOCUMENTS } from './platform/sp-record.ts';
export { TEST_USERS, DEFAULT_USER_SUB } from './users.ts';

const DEFAULT_AS_PORT = 8441;
const DEFAULT_PLATFORM_PORT = 8442;

/** The host that goes into URLs: a wildcard listen address is reached on loopback. */
function publicHost(host: string): string {
  return host === '0.0.0.0' || host === '::' ? '127.0.0.1' : urlHost(host);
}

function writeEndpoints(
  paths: SandboxPaths,
  s: Pick<Sandbox, 'issuer' | 'serviceConfigurationUrl' | 'idpDirectoryUrl' | 'spDirectoryUrl' | 'tlsCaFile'>,
  rp: RpRegistration,
  clients: ClientRegistry,
  qtspId: string,
): void {
  const endpoints = {
    issuer: s.issuer,
    serviceConfigurationUrl: s.serviceConfigurationUrl,
    idpDirectoryUrl: s.idpDirectoryUrl,
    spDirectoryUrl: s.spDirectoryUrl,
    tlsCaFile: s.tlsCaFile,
    qtspId,
    rp: { clientId: rp.clientId, certFile: rp.certFile, keyFile: rp.keyFile, redirectUri: rp.redirectUri },
    // what the platform knows of every RP (spec 2.14), for an operator checking a registration
    clients: clients.all().map((c) => ({
      client_id: c.registration.clientId,
      client_state: c.registration.state,
      redirect_uris: c.registration.redirectUris,
      'x5t#S256': c.fingerprint,
    })),
  };
  writeFileSync(paths.endpoints, `${JSON.stringify(endpoints, null, 2)}\n`);
}

async function listenBoth(
  host: string,
  as: TlsServer,
  asPort: number,
  platform: TlsServer,
  platformPort: number,
): Promise<[number, number]> {
  try {
    return [await as.listen(host, asPort), await platform.listen(host, platformPort)];
  } catch (err) {
    await Promise.all([as.close(), platform.close()]);
    throw err;
  }
}

export async function startSandbox(o: SandboxOptions): Promise<Sandbox> {
  const host = o.host ?? '127.0.0.1';
  const paths = sandboxPaths(resolve(o.dataDir));
  ensurePrivateDir(paths.dir); // also the data directory, when the sandbox is the first to create it
  const tls = ensureSandboxTls(paths, host);
  const keys = await AsKeyStore.open(paths.asSigningKey);
  const urls = { issuer: '' };
  const directory = new PlatformDirectory([buildQtspRecord(o.qtsp)], () => urls.issuer);
  const clients = new ClientRegistry(paths.clientsDir);
  const rp = clients.register({ clientId: DEFAULT_RP_CLIENT_ID, state: 'active' });
  for (const c of o.clients ?? []) {
    // `qtsp sign` plays the default RP with the sandbox's key: a registration must not take its place
    if (c.clientId === DEFAULT_RP_CLIENT_ID)
      throw new ClientFileError(`client_id ${DEFAULT_RP_CLIENT_ID} is the sandbox's own RP; choose another`);
    clients.registerExternal(c);
  }
  let keyArchive: SandboxKeyArchive | undefined;
  const controls = createControls(keys, directory, () => keyArchive);
  const archivePaths = keyArchivePaths(paths.dir);
  const ctx: AsContext = {
    urls,
    clients,
    directory,
    keys,
    store: createStore(),
    controls,
    tokenLifetimeSeconds: o.tokenLifetimeSeconds ?? 300,
  };

  const asServer = new TlsServer(tls.as, asApp(ctx), true);
  const platformServer = new TlsServer(
    tls.platform,
    platformApp(directory, { controls, keyArchiveRoot: archivePaths.root }),
    false,
  );
  const [asPort, platformPort] = await listenBoth(
    host,
    asServer,
    o.asPort ?? DEFAULT_AS_PORT,
    platformServer,
    o.platformPort ?? DEFAULT_PLATFORM_PORT,
  );
  urls.issuer = `https://${publicHost(host)}:${asPort}`;
  const platformUrl = `https://${publicHost(host)}:${platformPort}`;
  try {
    // the collection service of spec 4.7: HEAD holds the JWK Set of each active IDP, every commit signed
    keyArchive = await SandboxKeyArchive.open(
      paths.dir,
      () => new Map(directory.idpStatus === 'active' ? [[urls.issuer, keys.jwks()]] : []),
    );
  } catch (err) {
    await Promise.all([asServer.close(), platformServer.close()]);
    throw err;
  }
  let events: EventParties;
  try {
    // the mediation service (spec 6.2) and the SMTP sink behind the banks' notification addresses (6.3)
    events = await startEventParties({
      host,
      publicHost: publicHost(host),
      mediationPort: o.mediationPort,
      smtpPort: o.smtpPort,
      identity: tls.platform,
      directory,
      controls,
      dir: paths.dir,
    });
  } catch (err) {
    await keyArchive.close();
    await Promise.all([asServer.close(), platformServer.close()]);
    throw err;
  }

  const sandbox: Sandbox = {
    issuer: urls.issuer,
    asUrl: urls.issuer,
    platformUrl,
    idpDirectoryUrl: `${platformUrl}/idps/v1/`,
    serviceConfigurationUrl: `${platformUrl}/service-configuration/v1/`,
    spDirectoryUrl: `${platformUrl}/sps/v1/`,
    keyArchiveUrl: `${platformUrl}/key-archive/${archivePaths.repoName}`,
    keyArchiveSignerKeyFile: archivePaths.signerPublicKey,
    mediationUrl: events.mediationUrl,
    mediation: events.mediation,
    smtp: events.smtp,
    tlsCaFile: paths.tlsCaCert,
    qtspServerCertFile: tls.qtsp.certFile,
    qtspServerKeyFile: tls.qtsp.keyFile,
    rp,
    registerClient: async (c) => {
      const registration = clients.register(c);
      writeEndpoints(paths, sandbox, rp, clients, o.qtsp.id);
      return registration;
    },
    clients: () => clients.all().map((c) => ({ ...c.registration })),
    controls,
    mintAccessToken: (claims, opts) => signJwt(keys, claims, { ...opts, typ: 'JWT' }),
    close: async () => {
      await keyArchive?.close();
      await Promise.all([asServer.close(), platformServer.close(), events.close()]);
    },
  };
  writeEndpoints(paths, sandbox, rp, clients, o.qtsp.id);
  return sandbox;
}
