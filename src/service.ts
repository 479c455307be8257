/**
 * Composition root of the QTSP: builds the trust sources, the introspection client and the signDoc
 * dependencies from the frozen configuration, and starts the HTTPS server.
 */
import { existsSync } from 'node:fs';
import type { Config } from './config/schema.ts';
import { ConfigError } from './config/load.ts';
import { createApp, listen, listenPublication, type RunningServer } from './http/server.ts';
import { pkiRouter } from './http/pki-routes.ts';
import { createMetrics } from './http/metrics.ts';
import { startDelivery, type Delivery } from './mediation/delivery.ts';
import { adminRouter } from './notification/admin.ts';
import { pkiExists, trustServicesExist } from './pki/init.ts';
import { createTrustServices, registerServiceCertificates, type TrustServices } from './pki/trust-services.ts';
import { createSignerKeys } from './pki/key-pool.ts';
import type { SignDocDeps } from './signing/sign-doc.ts';
import { openStore, watchStore } from './store/open.ts';
import { createOutgoingAgents } from './trust/agents.ts';
import { AuthorizationServers } from './trust/authorization-servers.ts';
import { IdpDirectory } from './trust/idp-directory.ts';
import { startKeyArchive, type KeyArchive } from './trust/key-archive.ts';
import { logger as defaultLogger, type Logger } from './util/logger.ts';

export interface QtspService extends RunningServer {
  readonly deps: SignDocDeps;
  /** the trust sources (tests pull the archive or the IDP list on demand) */
  readonly trust: { readonly idps: IdpDirectory; readonly servers: AuthorizationServers; readonly keyArchive: KeyArchive };
  /** the plain-HTTP publication server (OCSP, CRLs, CA certificates, TSA) */
  readonly publicationUrl: string;
  /** outbox relay and (delivery.inProcessWorker) the workers of mediation records and notifications */
  readonly delivery: Delivery;
}

function requireFiles(config: Config): void {
  const files: [string, string][] = [
    ['server.tlsCertFile', config.server.tlsCertFile],
    ['server.tlsKeyFile', config.server.tlsKeyFile],
    ['client.certFile', config.client.certFile],
    ['client.keyFile', config.client.keyFile],
    ['trust.caFile', config.trust.caFile],
    ['trust.keyArchiveSignerKeyFile', config.trust.keyArchiveSignerKeyFile],
  ];
  for (const [setting, file] of files) {
    if (!existsSync(file)) throw new ConfigError(`setting ${setting}: file ${file} does not exist`);
  }
  if (!pkiExists(config.dataDir)) throw new ConfigError(`setting dataDir: no CA material in ${config.dataDir}/pki; run \`qtsp pki init\` first`);
  if (!trustServicesExist(config.dataDir)) throw new ConfigError(`setting dataDir: no TSA or OCSP responder certificate in ${config.dataDir}/pki; run \`qtsp pki init\` to add them`);
}

/** TSA, OCSP responder, CRLs: the issuing CA, TSA and responder certificates are registered in the store */
async function startTrustServices(config: Config, store: Parameters<typeof registerServiceCertificates>[0], agent: import('node:https').Agent): Promise<TrustServices> {
  const pki = createTrustServices({ config, store, agent });
  await registerServiceCertificates(store, pki);
  return pki;
}

function pkiRoutes(config: Config, pki: TrustServices, logger: Logger) {
  return pkiRouter({
    tsa: pki.tsa,
    ocsp: pki.ocsp,
    crls: pki.crls,
    rootDer: pki.root.der,
    issuingDer: pki.issuing.der,
    ocspMaxAgeSeconds: Math.min(config.revocation.ocspValiditySeconds, 300),
    crlMaxAgeSeconds: config.revocation.crlRefreshSeconds,
    logger,
  });
}

export async function startQtsp(config: Config, options: { logger?: Logger; defaultMetrics?: boolean } = {}): Promise<QtspService> {
  const logger = options.logger ?? defaultLogger;
  requireFiles(config);
  const agents = createOutgoingAgents(config);
  const timeoutMs = config.trust.httpTimeoutMs;
  const idps = new IdpDirectory({
    url: config.trust.idpDirectoryUrl,
    agent: agents.plain,
    ttlMs: config.trust.idpCacheTtlSeconds * 1000,
    maxStaleMs: config.trust.idpMaxStaleSeconds * 1000,
    listIntervalMs: config.trust.idpListPullSeconds * 1000,
    timeoutMs,
    logger,
  });
  await idps.start(); // first list pull; a failing directory is logged and reported in readiness
  const keyArchive = await startKeyArchive(config, agents.plain, logger); // clone or pull at start (spec 4.7)
  const servers = new AuthorizationServers({
    agent: agents.plain,
    metadataTtlMs: config.trust.metadataCacheTtlSeconds * 1000,
    jwksCooldownMs: config.trust.jwksCooldownSeconds * 1000,
    timeoutMs,
    archive: keyArchive,
    logger,
  });
  const clockSkewSeconds = config.trust.clockSkewSeconds;
  const store = await openStore(config); // fails the start when the database is unreachable or its schema is newer
  const storeHealth = watchStore(store, config.store.pingIntervalMs, (healthy, reason) => {
    if (healthy) logger.info({ event: 'store.available', driver: store.driver }, 'evidence store answers again');
    else logger.error({ event: 'store.unavailable', driver: store.driver, error: reason }, 'evidence store does not answer; not ready');
  });
  const pki = await startTrustServices(config, store, agents.plain);
  const keys = createSignerKeys({ rsaPoolSize: config.signer.rsaPoolSize, logger }); // starts filling the RSA key pool
  // never waits for Redis: records wait in the outbox until it answers (spec 6.2)
  const delivery = startDelivery(config, { store, mtlsAgent: agents.mtls, idps, logger, workers: config.delivery.inProcessWorker });
  const deps: SignDocDeps = {
    qtspId: config.qtspId,
    sad: { idps, servers, clockSkewSeconds },
    introspection: { qtspId: config.qtspId, servers, agent: agents.mtls, timeoutMs: config.introspection.timeoutMs, clockSkewSeconds },
    issuingCa: pki.issuing, // with the AIA and CRL DP extensions of signer certificates
    ades: { timestamps: pki.timestamps, revocation: pki.revocation },
    signerValiditySeconds: config.signer.validitySeconds,
    keys,
    defaultAlgorithm: config.signer.defaultAlgorithm,
    store,
    mediation: { ownerId: config.mediation.ownerId, recorded: () => delivery.wake() },
    logger,
    metrics: createMetrics({ defaultMetrics: options.defaultMetrics ?? true }),
  };
  const readiness = () => {
    const trust = [keyArchive.readiness(), idps.readiness()];
    const reasons = storeHealth.healthy ? [] : [`evidence store (${store.driver}) does not answer: ${storeHealth.reason}`];
    reasons.push(...trust.flatMap((r) => r.reasons));
    return { ready: storeHealth.healthy && trust.every((r) => r.ready), reasons };
  };
  const admin = adminRouter({ store, allowedFingerprints: config.notification.adminClientFingerprints, queued: () => delivery.wake() });
  const publicationRoutes = pkiRoutes(config, pki, logger);
  const app = createApp(config, deps, readiness, [publicationRoutes, admin]);
  let server: RunningServer;
  let publication: { url: string; close(): Promise<void> } | undefined;
  try {
    publication = await listenPublication(config, [publicationRoutes]);
    server = await listen(config, app);
  } catch (err) {
    await publication?.close();
    idps.stop();
    await keyArchive.stop();
    await delivery.close();
    storeHealth.stop();
    await store.close();
    await keys.close();
    throw err;
  }
  logger.info({ event: 'qtsp.started', url: server.signDocUrl, publication: publication.url, qtsp_id: config.qtspId }, 'qtsp listening');
  return {
    ...server,
    publicationUrl: publication.url,
    deps,
    trust: { idps, servers, keyArchive },
    delivery,
    close: async () => {
      await server.close();
      await publication.close();
      await delivery.close(); // before the store: running deliveries still mark their outcome
      idps.stop();
      await keyArchive.stop();
      await keys.close(); // stops the key generation workers; keys nobody took are dropped
      storeHealth.stop();
      await store.close();
      agents.destroy();
    },
  };
}
