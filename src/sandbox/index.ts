/**
 * The sandbox ecosystem: two banks, each its own AS (metadata, PAR, authorize, token, introspection, JWKS) with
 * its own issuer, signing key and store, and the platform (IDP directory, SP directory, service configuration,
 * account chooser, key archive), each its own HTTPS server on loopback, with the mediation service and the
 * banks' SMTP sink beside them. The QTSP reaches it only over HTTPS, as it would reach real banks.
 *
 * On start it creates what is missing under <dataDir>/sandbox/ (TLS CA, server certificates for the ASes,
 * platform and QTSP, the AS signing keys, the default RP's self-signed client certificate, the key archive
 * with its operating party's OpenPGP key) and writes endpoints.json for the RP command line.
 */
import { writeFileSync } from 'node:fs';
import { ensurePrivateDir } from '../util/private-files.ts';
import { resolve } from 'node:path';
import { asApp } from './as/app.ts';
import type { AsContext } from './as/context.ts';
import { signJwt } from './as/jwt.ts';
import { AsKeyStore } from './as/keys.ts';
import { CONSENT_TTL_SECONDS, createStore } from './as/store.ts';
import { ClientFileError } from './client-file.ts';
import { ClientRegistry, DEFAULT_RP_CLIENT_ID, defaultAccountChooserRedirectUri } from './clients.ts';
import { createControls, quietBankControls } from './controls.ts';
import { startEventParties, type EventParties } from './mediation/index.ts';
import { keyArchivePaths, SandboxKeyArchive, type SandboxKeyArchivePaths } from './key-archive/repository.ts';
import { platformApp } from './platform/app.ts';
import { type BankProfile, SANDBOX_BANKS } from './platform/constants.ts';
import { type DirectoryBank, PlatformDirectory } from './platform/directory.ts';
import { buildQtspRecord } from './platform/sp-record.ts';
import { spRegistrationCredential } from './platform/sp-keys.ts';
import { sandboxPaths, type SandboxPaths } from './paths.ts';
import { publicHost } from '../util/listen.ts';
import { ensureSandboxTls, renewSandboxTls, type SandboxTls, type ServerIdentity, TlsServer } from './tls.ts';

import type { RpRegistration, Sandbox, SandboxBank, SandboxControls, SandboxOptions } from './types.ts';

/** How often the sandbox looks for server certificates near their end (a few small files). */
const TLS_RENEW_CHECK_MS = 10_000;

export type {
  ClientState,
  ExternalClient,
  IntrospectionMode,
  MintOptions,
  PlatformClient,
  RpRegistration,
  Sandbox,
  SandboxBank,
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
const DEFAULT_SECOND_AS_PORT = 8445;

/** Each bank's AS port: bank 2 takes a free port too when bank 1 does (tests ask for free ports). */
function bankPorts(o: SandboxOptions): number[] {
  const first = o.asPort ?? DEFAULT_AS_PORT;
  return [first, o.secondAsPort ?? (first === 0 ? 0 : DEFAULT_SECOND_AS_PORT)];
}

type EndpointsView = Pick<
  Sandbox,
  | 'issuer'
  | 'banks'
  | 'serviceConfigurationUrl'
  | 'idpDirectoryUrl'
  | 'spDirectoryUrl'
  | 'accountChooserUrl'
  | 'tlsCaFile'
>;

function writeEndpoints(
  paths: SandboxPaths,
  s: EndpointsView,
  rp: RpRegistration,
  clients: ClientRegistry,
  qtspId: string,
): void {
  const endpoints = {
    issuer: s.issuer,
    banks: s.banks,
    serviceConfigurationUrl: s.serviceConfigurationUrl,
    idpDirectoryUrl: s.idpDirectoryUrl,
    spDirectoryUrl: s.spDirectoryUrl,
    // what the platform gave our QTSP's operator out of band: `qtsp pki client-cert --register` reads it
    spRegistrationCredentialFile: paths.spRegistrationCredential,
    accountChooserUrl: s.accountChooserUrl,
    tlsCaFile: s.tlsCaFile,
    qtspId,
    rp: {
      clientId: rp.clientId,
      certFile: rp.certFile,
      keyFile: rp.keyFile,
      redirectUri: rp.redirectUri,
      accountChooserRedirectUris: rp.accountChooserRedirectUris,
    },
    // what the platform knows of every RP (spec 2.14), for an operator checking a registration
    clients: clients.all().map((c) => ({
      client_id: c.registration.clientId,
      client_state: c.registration.state,
      redirect_uris: c.registration.redirectUris,
      account_chooser_redirect_uris: c.registration.accountChooserRedirectUris,
      'x5t#S256': c.fingerprint,
    })),
  };
  writeFileSync(paths.endpoints, `${JSON.stringify(endpoints, null, 2)}\n`);
}

/** Listens one server after the other; when one fails, every one closes. */
async function listenAll(host: string, servers: readonly { server: TlsServer; port: number }[]): Promise<number[]> {
  const ports: number[] = [];
  try {
    for (const { server, port } of servers) ports.push(await server.listen(host, port));
    return ports;
  } catch (err) {
    await Promise.all(servers.map(({ server }) => server.close()));
    throw err;
  }
}

/** One bank: its AS context (issuer, keys, store) and the server identity and port it listens with. */
interface BankState {
  readonly ctx: AsContext;
  readonly identity: ServerIdentity;
  readonly port: number;
}

/** What the parties share: the banks, the platform's directory, the registered RPs and the controls. */
interface SandboxState {
  readonly paths: SandboxPaths;
  readonly archivePaths: SandboxKeyArchivePaths;
  readonly tls: SandboxTls;
  /** bank 1 first */
  readonly banks: readonly BankState[];
  readonly clients: ClientRegistry;
  readonly directory: PlatformDirectory;
  readonly controls: SandboxControls;
  /** the default RP, played by `qtsp sign` with the sandbox's key */
  readonly rp: RpRegistration;
  /** set once the banks listen: the archive names its files by the issuer URLs */
  readonly archive: { current?: SandboxKeyArchive };
}

/** The banks and the platform, listening. */
interface HttpsParties {
  readonly platformUrl: string;
  close(): Promise<void>;
}

/** The default RP and the ones registered from outside (spec 2.14). */
function registerClients(paths: SandboxPaths, external: SandboxOptions['clients']) {
  const clients = new ClientRegistry(paths.clientsDir);
  const rp = clients.register({
    clientId: DEFAULT_RP_CLIENT_ID,
    state: 'active',
    accountChooserRedirectUris: [defaultAccountChooserRedirectUri(DEFAULT_RP_CLIENT_ID)],
  });
  for (const c of external ?? []) {
    // `qtsp sign` plays the default RP with the sandbox's key: a registration must not take its place
    if (c.clientId === DEFAULT_RP_CLIENT_ID)
      throw new ClientFileError(`client_id ${DEFAULT_RP_CLIENT_ID} is the sandbox's own RP; choose another`);
    clients.registerExternal(c);
  }
  clients.renewNearEnd(); // a sandbox started again near its RP certificate's end
  return { clients, rp };
}

/** Each bank's files: bank 1 keeps today's names, bank 2 has its own. */
function bankFiles(paths: SandboxPaths, tls: SandboxTls): { identity: ServerIdentity; signingKey: string }[] {
  return [
    { identity: tls.as, signingKey: paths.asSigningKey },
    { identity: tls.secondAs, signingKey: paths.secondAsSigningKey },
  ];
}

/** Files under <dataDir>/sandbox/ (created where missing) and the state the parties share. */
async function prepare(o: SandboxOptions, host: string): Promise<SandboxState> {
  const paths = sandboxPaths(resolve(o.dataDir));
  ensurePrivateDir(paths.dir); // also the data directory, when the sandbox is the first to create it
  const tls = ensureSandboxTls(paths, host);
  const files = bankFiles(paths, tls);
  const keys = await Promise.all(files.map((f) => AsKeyStore.open(f.signingKey)));
  const urls = SANDBOX_BANKS.map(() => ({ issuer: '' }));
  const listed: DirectoryBank[] = SANDBOX_BANKS.map((profile, i) => ({
    profile,
    issuer: () => urls[i]!.issuer,
    status: 'active',
  }));
  const directory = new PlatformDirectory([buildQtspRecord(o.qtsp)], listed);
  const { clients, rp } = registerClients(paths, o.clients);
  const archive: SandboxState['archive'] = {};
  const controlled = SANDBOX_BANKS.map((b, i) => ({ bic: b.bic, keys: keys[i]! }));
  const controls = createControls(controlled, directory, () => archive.current);
  const ports = bankPorts(o);
  const banks = SANDBOX_BANKS.map((bank: BankProfile, i): BankState => {
    const ctx: AsContext = {
      urls: urls[i]!,
      bank,
      clients,
      directory,
      keys: keys[i]!,
      store: createStore({ maxPendingConsents: o.maxPendingConsents }),
      controls: i === 0 ? controls : quietBankControls(controls),
      tokenLifetimeSeconds: o.tokenLifetimeSeconds ?? 300,
      consentLifetimeSeconds: o.consentLifetimeSeconds ?? CONSENT_TTL_SECONDS,
    };
    return { ctx, identity: files[i]!.identity, port: ports[i]! };
  });
  const archivePaths = keyArchivePaths(paths.dir);
  return { paths, archivePaths, tls, banks, clients, directory, controls, rp, archive };
}

/** The banks and the platform on their ports; the issuer URLs are known from here on. */
async function startHttpsParties(state: SandboxState, host: string, o: SandboxOptions): Promise<HttpsParties> {
  const { tls, banks } = state;
  const bankServers = banks.map((b) => ({ server: new TlsServer(b.identity, asApp(b.ctx), true), port: b.port }));
  const platform = platformApp(state.directory, {
    controls: state.controls,
    keyArchiveRoot: state.archivePaths.root,
    clients: state.clients,
    spRegistrationCredential: spRegistrationCredential(state.paths.spRegistrationCredential),
  });
  const platformServer = {
    server: new TlsServer(tls.platform, platform, true), // the SP record update authenticates by certificate
    port: o.platformPort ?? DEFAULT_PLATFORM_PORT,
  };
  const servers = [...bankServers, platformServer];
  const ports = await listenAll(host, servers);
  banks.forEach((b, i) => {
    b.ctx.urls.issuer = `https://${publicHost(host)}:${ports[i]}`;
  });
  // server certificates near their end are reissued and served without a restart (the QTSP's file too), and
  // so are the client certificates of the sandbox's own RPs
  const renewal = setInterval(() => {
    try {
      if (renewSandboxTls(state.paths, host).length > 0) for (const { server } of servers) server.reload();
      state.clients.renewNearEnd(); // the sandbox's own RPs' client certificates
    } catch (err) {
      // a file half written or unreadable: the servers keep their pair; the next check tries again
      process.emitWarning(`sandbox TLS renewal: ${(err as Error).message}`);
    }
  }, TLS_RENEW_CHECK_MS);
  renewal.unref();
  return {
    platformUrl: `https://${publicHost(host)}:${ports[banks.length]}`,
    close: async () => {
      clearInterval(renewal);
      await Promise.all(servers.map(({ server }) => server.close()));
    },
  };
}

/** The collection service of spec 4.7: HEAD holds the JWK Set of each active IDP, every commit signed. */
async function openKeyArchive(state: SandboxState, https: HttpsParties): Promise<SandboxKeyArchive> {
  const { banks, directory } = state;
  const active = () => banks.filter((b) => directory.idpByBic(b.ctx.bank.bic)?.status === 'active');
  try {
    state.archive.current = await SandboxKeyArchive.open(
      state.paths.dir,
      () => new Map(active().map((b) => [b.ctx.urls.issuer, b.ctx.keys.jwks()])),
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
      directory: state.directory,
      controls: state.controls,
      dir: state.paths.dir,
    });
  } catch (err) {
    await started.keyArchive.close();
    await started.https.close();
    throw err;
  }
}

/** The keys of the bank with this BIC (default bank 1): what mintAccessToken signs with. */
function bankKeys(state: SandboxState, bic: string | undefined): AsKeyStore {
  const bank = bic === undefined ? state.banks[0] : state.banks.find((b) => b.ctx.bank.bic === bic.toUpperCase());
  if (!bank) throw new TypeError(`no sandbox bank with BIC ${String(bic)}`);
  return bank.ctx.keys;
}

/** The platform's URLs, derived from where it listens. */
function platformUrls(platformUrl: string, archivePaths: SandboxKeyArchivePaths) {
  return {
    platformUrl,
    idpDirectoryUrl: `${platformUrl}/idps/v1/`,
    serviceConfigurationUrl: `${platformUrl}/service-configuration/v1/`,
    spDirectoryUrl: `${platformUrl}/sps/v1/`,
    accountChooserUrl: `${platformUrl}/account-chooser/`,
    keyArchiveUrl: `${platformUrl}/key-archive/${archivePaths.repoName}`,
    keyArchiveSignerKeyFile: archivePaths.signerPublicKey,
  };
}

/** The running sandbox as its users see it; endpoints.json is written again whenever an RP registers. */
function sandboxOf(
  state: SandboxState,
  qtspId: string,
  running: { https: HttpsParties; keyArchive: SandboxKeyArchive; events: EventParties },
): Sandbox {
  const { paths, archivePaths, clients, rp } = state;
  const banks: SandboxBank[] = state.banks.map((b) => ({
    issuer: b.ctx.urls.issuer,
    bic: b.ctx.bank.bic,
    name: b.ctx.bank.name,
  }));
  const sandbox: Sandbox = {
    issuer: banks[0]!.issuer,
    asUrl: banks[0]!.issuer,
    banks,
    ...platformUrls(running.https.platformUrl, archivePaths),
    mediationUrl: running.events.mediationUrl,
    mediation: running.events.mediation,
    smtp: running.events.smtp,
    tlsCaFile: paths.tlsCaCert,
    qtspServerCertFile: state.tls.qtsp.certFile,
    qtspServerKeyFile: state.tls.qtsp.keyFile,
    rp,
    registerClient: async (c) => {
      const registration = clients.register(c);
      writeEndpoints(paths, sandbox, rp, clients, qtspId);
      return registration;
    },
    clients: () => clients.all().map((c) => ({ ...c.registration })),
    controls: state.controls,
    mintAccessToken: (claims, opts) => {
      const { bic, ...sign } = opts ?? {};
      return signJwt(bankKeys(state, bic), claims, { ...sign, typ: 'JWT' });
    },
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
  writeEndpoints(state.paths, sandbox, state.rp, state.clients, o.qtsp.id);
  return sandbox;
}
