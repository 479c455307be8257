/**
 * The sandbox ecosystem: a bank AS (metadata, PAR, authorize, token, introspection, JWKS) and the platform
 * (IDP directory, SP directory, service configuration), each its own HTTPS server on loopback, with the
 * mediation service and the banks' SMTP sink beside them. The QTSP reaches it only over HTTPS, as it would
 * reach real banks.
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
import { keyArchivePaths, SandboxKeyArchive, type SandboxKeyArchivePaths } from './key-archive/repository.ts';
import { platformApp } from './platform/app.ts';
import { PlatformDirectory } from './platform/directory.ts';
import { buildQtspRecord } from './platform/sp-record.ts';
import { sandboxPaths, type SandboxPaths } from './paths.ts';
import { ensureSandboxTls, type SandboxTls, TlsServer, urlHost } from './tls.ts';
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

/** What the parties share: the AS key, the platform's directory, the registered RPs and the controls. */
interface SandboxState {
  readonly paths: SandboxPaths;
  readonly archivePaths: SandboxKeyArchivePaths;
  readonly tls: SandboxTls;
  readonly ctx: AsContext;
  /** the default RP, played by `qtsp sign` with the sandbox's key */
  readonly rp: RpRegistration;
  /** set once the AS listens: the archive names its files by the issuer URL */
  readonly archive: { current?: SandboxKeyArchive };
}

/** The AS and the platform, listening. */
interface HttpsParties {
  readonly platformUrl: string;
  close(): Promise<void>;
}

/** The default RP and the ones registered from outside (spec 2.14). */
function registerClients(paths: SandboxPaths, external: SandboxOptions['clients']) {
  const clients = new ClientRegistry(paths.clientsDir);
  const rp = clients.register({ clientId: DEFAULT_RP_CLIENT_ID, state: 'active' });
  for (const c of external ?? []) {
    // `qtsp sign` plays the default RP with the sandbox's key: a registration must not take its place
    if (c.clientId === DEFAULT_RP_CLIENT_ID)
      throw new ClientFileError(`client_id ${DEFAULT_RP_CLIENT_ID} is the sandbox's own RP; choose another`);
    clients.registerExternal(c);
  }
  return { clients, rp };
}

/** Files under <dataDir>/sandbox/ (created where missing) and the state the parties share. */
async function prepare(o: SandboxOptions, host: string): Promise<SandboxState> {
  const paths = sandboxPaths(resolve(o.dataDir));
  ensurePrivateDir(paths.dir); // also the data directory, when the sandbox is the first to create it
  const tls = ensureSandboxTls(paths, host);
  const keys = await AsKeyStore.open(paths.asSigningKey);
  const urls = { issuer: '' };
  const directory = new PlatformDirectory([buildQtspRecord(o.qtsp)], () => urls.issuer);
  const { clients, rp } = registerClients(paths, o.clients);
  const archive: SandboxState['archive'] = {};
  const controls = createControls(keys, directory, () => archive.current);
  const tokenLifetimeSeconds = o.tokenLifetimeSeconds ?? 300;
  const ctx: AsContext = { urls, clients, directory, keys, store: createStore(), controls, tokenLifetimeSeconds };
  return { paths, archivePaths: keyArchivePaths(paths.dir), tls, ctx, rp, archive };
}

/** The AS and the platform on their ports; the issuer URL is known from here on. */
async function startHttpsParties(state: SandboxState, host: string, o: SandboxOptions): Promise<HttpsParties> {
  const { ctx, tls } = state;
  const asServer = new TlsServer(tls.as, asApp(ctx), true);
  const platform = platformApp(ctx.directory, { controls: ctx.controls, keyArchiveRoot: state.archivePaths.root });
  const platformServer = new TlsServer(tls.platform, platform, false);
  const [asPort, platformPort] = await listenBoth(
    host,
    asServer,
    o.asPort ?? DEFAULT_AS_PORT,
    platformServer,
    o.platformPort ?? DEFAULT_PLATFORM_PORT,
  );
  ctx.urls.issuer = `https://${publicHost(host)}:${asPort}`;
  return {
    platformUrl: `https://${publicHost(host)}:${platformPort}`,
    close: async () => {
      await Promise.all([asServer.close(), platformServer.close()]);
    },
  };
}

/** The collection service of spec 4.7: HEAD holds the JWK Set of each active IDP, every commit signed. */
async function openKeyArchive(state: SandboxState, https: HttpsParties): Promise<SandboxKeyArchive> {
  const { urls, directory, keys } = state.ctx;
  try {
    state.archive.current = await SandboxKeyArchive.open(
      state.paths.dir,
      () => new Map(directory.idpStatus === 'active' ? [[urls.issuer, keys.jwks()]] : []),
    );
    return state.archive.current;
  } catch (err) {
    await https.close();
    throw err;
  }
}

/** The mediation service (spec 6.2) and the SMTP sink behind the banks' notification addresses (6.3). */
async function startEvents(
  state: SandboxState,
  host: string,
  o: SandboxOptions,
  started: { https: HttpsParties; keyArchive: SandboxKeyArchive },
): Promise<EventParties> {
  try {
    return await startEventParties({
      host,
      publicHost: publicHost(host),
      mediationPort: o.mediationPort,
      smtpPort: o.smtpPort,
      identity: state.tls.platform,
      directory: state.ctx.directory,
      controls: state.ctx.controls,
      dir: state.paths.dir,
    });
  } catch (err) {
    await started.keyArchive.close();
    await started.https.close();
    throw err;
  }
}

/** The running sandbox as its users see it; endpoints.json is written again whenever an RP registers. */
function sandboxOf(
  state: SandboxState,
  qtspId: string,
  running: { https: HttpsParties; keyArchive: SandboxKeyArchive; events: EventParties },
): Sandbox {
  const { paths, archivePaths, ctx, rp } = state;
  const { platformUrl } = running.https;
  const sandbox: Sandbox = {
    issuer: ctx.urls.issuer,
    asUrl: ctx.urls.issuer,
    platformUrl,
    idpDirectoryUrl: `${platformUrl}/idps/v1/`,
    serviceConfigurationUrl: `${platformUrl}/service-configuration/v1/`,
    spDirectoryUrl: `${platformUrl}/sps/v1/`,
    keyArchiveUrl: `${platformUrl}/key-archive/${archivePaths.repoName}`,
    keyArchiveSignerKeyFile: archivePaths.signerPublicKey,
    mediationUrl: running.events.mediationUrl,
    mediation: running.events.mediation,
    smtp: running.events.smtp,
    tlsCaFile: paths.tlsCaCert,
    qtspServerCertFile: state.tls.qtsp.certFile,
    qtspServerKeyFile: state.tls.qtsp.keyFile,
    rp,
    registerClient: async (c) => {
      const registration = ctx.clients.register(c);
      writeEndpoints(paths, sandbox, rp, ctx.clients, qtspId);
      return registration;
    },
    clients: () => ctx.clients.all().map((c) => ({ ...c.registration })),
    controls: ctx.controls,
    mintAccessToken: (claims, opts) => signJwt(ctx.keys, claims, { ...opts, typ: 'JWT' }),
    close: async () => {
      await running.keyArchive.close();
      await Promise.all([running.https.close(), running.events.close()]);
    },
  };
  return sandbox;
}

export async function startSandbox(o: SandboxOptions): Promise<Sandbox> {
  const host = o.host ?? '127.0.0.1';
  const state = await prepare(o, host);
  const https = await startHttpsParties(state, host, o);
  const keyArchive = await openKeyArchive(state, https);
  const events = await startEvents(state, host, o, { https, keyArchive });
  const sandbox = sandboxOf(state, o.qtsp.id, { https, keyArchive, events });
  writeEndpoints(state.paths, sandbox, state.rp, state.ctx.clients, o.qtsp.id);
  return sandbox;
}
