/**
 * Composition root of the QTSP: builds the trust sources, the introspection client and the signDoc
 * dependencies from the frozen configuration, and starts the HTTPS server.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { Config } from './config/schema.ts';
import { ConfigError } from './config/load.ts';
import { createApp } from './http/app.ts';
import { listenPublication } from './http/publication.ts';
import { listen, type RunningServer } from './http/tls-listener.ts';
import { pkiRouter } from './http/pki-routes.ts';
import {
  createMetrics,
  operationalGauges,
  pkiCalendarGauges,
  settingGauges,
  type JournalSnapshot,
  type OperationalSnapshot,
} from './http/metrics.ts';
import { listenOps } from './http/ops.ts';
import { watchReadiness, type Readiness } from './readiness.ts';
import { startDeliveries } from './deliveries.ts';
import { startRetention, type RetentionJob } from './retention/purge.ts';
import { startSealing, type SealFailurePart, type SealingJob, type SealingSchedule } from './journal/seal.ts';
import { anchorRepoPaths, startAnchorPublisher } from './journal/anchor-repo.ts';
import { journalRouter } from './http/journal-routes.ts';
import { crlJournal, journaledIssuance } from './journal/ca-events.ts';
import { startRenewalCheck, type RenewalJob } from './journal/renewal.ts';
import { startSelfAudit, type SelfAudit } from './journal/self-audit.ts';
import type { Delivery, TopicStatus } from './delivery/delivery.ts';
import { adminRouter } from './notification/admin.ts';
import {
  assertRootResponderInCustody,
  longLivedMaterial,
  pkiExists,
  pkiPaths,
  trustServicesExist,
} from './ca/material.ts';
import { keyArchiveAnchors, pkiCalendar, type CalendarEntry } from './ca/calendar.ts';
import { watchCalendar, type CalendarWatch } from './ca/calendar-watch.ts';
import { watchRenewals } from './ca/renewal-watch.ts';
import { renewMail } from './notification/mail-certificate.ts';
import {
  createTrustServices,
  firstCertificate,
  journalTrust,
  type TrustServices,
  type TrustStore as TrustServicesStore,
} from './trust-services.ts';
import { openKeyCustody } from './custody/registry.ts';
import { describeCustody, type KeyCustody } from './custody/types.ts';
import { signerProfile } from './ca/signer-certificate.ts';
import type { SignDocDeps } from './signing/sign-doc.ts';
import { openStore, watchStore, type StoreHealth } from './store/open.ts';
import type { Store } from './store/types.ts';
import { createOutgoingAgents, type OutgoingAgents } from './trust/agents.ts';
import { AuthorizationServers } from './trust/authorization-servers.ts';
import { IdpDirectory } from './trust/idp-directory.ts';
import { startKeyArchive, type KeyArchive } from './trust/key-archive.ts';
import type { HttpAgent } from './util/http-client.ts';
import { logger as defaultLogger, type Logger } from './util/logger.ts';
import { openToOthers } from './util/private-files.ts';
import type { Metrics } from './util/metrics.ts';
import { runStopSteps } from './util/lifecycle.ts';
import { DataDirInUseError, lockDataDir, type InstanceLock } from './util/instance-lock.ts';

export interface QtspService extends RunningServer {
  readonly deps: SignDocDeps;
  /** the trust sources (tests pull the archive or the IDP list on demand) */
  readonly trust: {
    readonly idps: IdpDirectory;
    readonly servers: AuthorizationServers;
    readonly keyArchive: KeyArchive;
  };
  /** the plain-HTTP publication server (OCSP, CRLs, CA certificates, TSA) */
  readonly publicationUrl: string;
  /** the operations listener: /health/live, /health/ready, /metrics (plain HTTP, loopback by default) */
  readonly opsUrl: string;
  /** runs the readiness checks now instead of at their next interval (tests) */
  readonly refreshReadiness: () => Promise<void>;
  /** seals the journal now instead of at its next interval (the bench: each row pays for sealing its entries) */
  readonly sealJournal: () => Promise<void>;
  /** outbox relay and (delivery.inProcessWorker) the workers of mediation records and notifications */
  readonly delivery: Delivery;
  /** the ends of the long-lived material (ca/calendar.ts) */
  readonly calendar: CalendarWatch;
}

/** `promise`, or a rejection after `ms`: a scrape never waits on a dead store or Redis for longer */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
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
  if (!pkiExists(config.dataDir))
    throw new ConfigError(`setting dataDir: no CA material in ${config.dataDir}/pki; run \`qtsp pki init\` first`);
  if (!trustServicesExist(config.dataDir))
    throw new ConfigError(
      `setting dataDir: no TSA or OCSP responder certificate in ${config.dataDir}/pki; ` +
        'run `qtsp pki init` to add them',
    );
  assertRootResponderInCustody(config.dataDir);
}

/** Metrics, labelled qtsp_instance when this is one of several instances (instance.id). */
function instanceMetrics(config: Config, defaultMetrics: boolean): ReturnType<typeof createMetrics> {
  const metrics = createMetrics({ defaultMetrics });
  if (config.instance.id !== undefined) metrics.registry.setDefaultLabels({ qtsp_instance: config.instance.id });
  return metrics;
}

/** The gauges read from what this process holds: the calendar, and the settings the alert rules compare with. */
function configuredGauges(config: Config, metrics: Metrics, calendar: CalendarWatch): void {
  pkiCalendarGauges(metrics.registry, () => calendar.entries());
  settingGauges(metrics.registry, {
    'trust.idpMaxStaleSeconds': config.trust.idpMaxStaleSeconds,
    'trust.keyArchivePullSeconds': config.trust.keyArchivePullSeconds,
    'journal.sealIntervalSeconds': config.journal.sealIntervalSeconds,
    'journal.auditIntervalSeconds': config.journal.auditIntervalSeconds,
  });
}

/** One serving process per data directory (util/instance-lock.ts); a second one is a configuration error. */
function lockDataDirOrRefuse(dataDir: string): InstanceLock {
  try {
    return lockDataDir(dataDir);
  } catch (err) {
    if (err instanceof DataDirInUseError) throw new ConfigError(err.message);
    throw err;
  }
}

/** The data directory holds keys and personal data; we do not change the mode of an existing one, we say so. */
function warnIfOpenToOthers(dataDir: string, logger: Logger): void {
  const mode = openToOthers(dataDir);
  if (!mode) return;
  logger.warn(
    { event: 'datadir.open_to_others', dir: dataDir, mode },
    `data directory ${dataDir} is accessible to group or others (mode ${mode}); ` +
      `it holds private keys and personal data: chmod 700 ${dataDir}`,
  );
}

/** TSA, OCSP responder, CRLs: the issuing CA, TSA and responder certificates are registered in the store */
async function startTrustServices(
  config: Config,
  store: TrustServicesStore & Pick<Store, 'journal'>,
  agent: HttpAgent,
  custody: KeyCustody,
  logger: Logger,
): Promise<TrustServices> {
  // the issuing CA's CRLs on record (journal/ca-events.ts)
  const crlIssued = config.journal.enabled
    ? crlJournal(store.journal, 'issuing', config.revocation.crlRefreshSeconds, logger)
    : undefined;
  const pki = createTrustServices({ config, store, agent, custody, ...(crlIssued ? { crlIssued } : {}) });
  await pki.reload(); // the retired issuing CAs of a rollover too; registers the certificates
  return pki;
}

function pkiRoutes(config: Config, pki: TrustServices, logger: Logger) {
  return pkiRouter({
    tsa: pki.tsa,
    ocsp: pki.ocsp,
    rootCrl: pki.crls.root,
    rootDer: pki.root.der,
    issuing: (publishedAs) => pki.issuingGeneration(publishedAs),
    ocspMaxAgeSeconds: Math.min(config.revocation.ocspValiditySeconds, 300),
    crlMaxAgeSeconds: config.revocation.crlRefreshSeconds,
    logger,
  });
}

export interface StartOptions {
  readonly logger?: Logger;
  readonly defaultMetrics?: boolean;
  readonly keyArchiveDir?: string;
  readonly dataDirLockHeldByPrimary?: boolean;
  /** the outbox relay runs in the cluster's primary: new outbox entries are announced with this (delivery.ts) */
  readonly relayElsewhere?: () => void;
}

/**
 * `keyArchiveDir`: where this process keeps its clone of the key archive (default <dataDir>/key-archive); the
 * processes of one cluster each keep their own (isomorphic-git does not lock a clone against other processes).
 * `dataDirLockHeldByPrimary`: a cluster worker (cli/serve-cluster.ts) does not lock the data directory: its
 * primary holds that lock for the whole cluster, which is one instance.
 */
export async function startQtsp(config: Config, options: StartOptions = {}): Promise<QtspService> {
  requireFiles(config);
  const lock = options.dataDirLockHeldByPrimary ? { release: () => undefined } : lockDataDirOrRefuse(config.dataDir);
  try {
    const qtsp = await startLocked(config, options);
    return {
      ...qtsp,
      close: async () => {
        try {
          await qtsp.close();
        } finally {
          lock.release();
        }
      },
    };
  } catch (err) {
    lock.release();
    throw err;
  }
}

async function startLocked(config: Config, options: StartOptions = {}): Promise<QtspService> {
  const logger = options.logger ?? defaultLogger;
  // first: a missing module, token or wrong PIN stops the start naming the setting; the RSA key pool starts filling
  const keys = await openKeyCustody(config, { material: longLivedMaterial(config.dataDir), logger });
  try {
    return await startWithCustody(config, options, keys, logger);
  } catch (err) {
    await keys.close(); // idempotent: a failure after the listeners closed it already
    throw err;
  }
}

/** The trust sources signDoc checks callers with: the IDP directory, the key archive, the AS metadata and keys. */
interface TrustSources {
  readonly idps: IdpDirectory;
  readonly keyArchive: KeyArchive;
  readonly servers: AuthorizationServers;
}

/** What a started QTSP holds besides its listeners: each is stopped at close(), in the order of stopSteps. */
interface Running {
  readonly config: Config;
  readonly logger: Logger;
  readonly agents: OutgoingAgents;
  readonly trust: TrustSources;
  readonly store: Store;
  readonly storeHealth: StoreHealth;
  readonly keys: KeyCustody;
  readonly pki: TrustServices;
  readonly delivery: Delivery;
  readonly readiness: Readiness;
  readonly calendar: CalendarWatch;
  /** the watch for renewals a ceremony marked */
  readonly renewals: { stop(): void };
  /** the purge of what is past its retention period (retention/purge.ts) */
  readonly retention: RetentionJob;
  /** sealing the journal into time-stamped batches (journal/seal.ts) */
  readonly sealing: SealingJob;
  /** the scheduled check for a due time-stamp renewal of the evidence records (journal/renewal.ts) */
  readonly renewal: RenewalJob;
  /** the scheduled audit of the newest batches (journal/self-audit.ts) */
  readonly audit: SelfAudit;
  /** time-stamp renewals due at the last check; undefined before one */
  renewalsDue(): number | undefined;
}

interface Listeners {
  readonly server: RunningServer;
  readonly publication: Listener;
  readonly ops: Listener;
}

interface Listener {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Sealing the journal, and publishing each batch into the anchor repository after it (journal/anchor-repo.ts)
 * where `publishHere`: in the process that owns the data directory (a cluster's primary publishes for its
 * workers).
 */
function anchoredSealing(
  config: Config,
  { store, pki, logger }: { store: Store; pki: TrustServices; logger: Logger },
  schedule: SealingSchedule,
  publishHere: boolean,
  failed: (part: SealFailurePart) => void,
): SealingJob {
  const tsas = { tsa: pki.tsa, second: pki.journalSecondTsa };
  const sealing = startSealing(store, tsas, schedule, logger, Date.now, failed);
  if (!publishHere) return sealing;
  const anchor = startAnchorPublisher(store, config.dataDir, schedule.intervalSeconds, logger);
  return {
    async sealNow() {
      await sealing.sealNow();
      await anchor.publish();
    },
    async close() {
      await sealing.close();
      await anchor.close();
    },
    readiness: () => sealing.readiness(),
  };
}

const SEALING_OFF = { ready: true, reasons: [] };

/** The purge and the journal's sealing, renewal check and audit, each on its own timer. */
function startBackgroundJobs(
  config: Config,
  { store, pki, logger, metrics }: { store: Store; pki: TrustServices; logger: Logger; metrics: Metrics },
  options: StartOptions,
): Pick<Running, 'retention' | 'sealing' | 'renewal' | 'audit' | 'renewalsDue'> {
  const idle = {
    close: async () => undefined,
    sealNow: async () => undefined,
    readiness: () => SEALING_OFF,
    last: () => undefined,
  };
  const { journal } = config;
  const schedule = {
    intervalSeconds: journal.sealIntervalSeconds,
    stalledAfterSeconds: journal.sealStalledAfterSeconds,
  };
  let due: number | undefined;
  const checked = (n: number) => {
    due = n;
  };
  return {
    // the purge runs where the outbox relay runs: here, unless a cluster's primary relays (cli/serve-cluster.ts)
    retention: options.relayElsewhere ? idle : startRetention(config, store, logger),
    // every process may seal: batches are numbered once in the store, so racing sealers leave one chain
    sealing: journal.enabled
      ? anchoredSealing(config, { store, pki, logger }, schedule, !options.relayElsewhere, (tsa) =>
          metrics.sealFailures.inc({ tsa }),
        )
      : idle,
    // renewals are numbered once in the store too: a process that loses a race logs it and checks again later
    renewal: journal.enabled ? startRenewalCheck(store, pki.tsa, journal, logger, checked) : idle,
    audit: journal.enabled
      ? startSelfAudit(
          store,
          {
            intervalSeconds: journal.auditIntervalSeconds,
            trust: () => journalTrust(config, firstCertificate(pkiPaths(config.dataDir).rootCert)),
          },
          logger,
        )
      : idle,
    renewalsDue: () => due,
  };
}

async function startWithCustody(
  config: Config,
  options: StartOptions,
  keys: KeyCustody,
  logger: Logger,
): Promise<QtspService> {
  warnIfOpenToOthers(config.dataDir, logger);
  const agents = createOutgoingAgents(config);
  const trust = await startTrustSources(config, agents.plain, logger, options.keyArchiveDir);
  const { store, storeHealth } = await openWatchedStore(config, logger);
  const pki = await startTrustServices(config, store, agents.plain, keys, logger);
  if (config.journal.enabled) await journalStart(config, store, keys);
  // never waits for Redis: records wait in the outbox until it answers (spec 6.2)
  const delivery = startDeliveries(config, {
    store,
    mtlsAgent: agents.mtls,
    idps: trust.idps,
    logger,
    workers: config.delivery.inProcessWorker,
    ...(options.relayElsewhere ? { relayElsewhere: options.relayElsewhere } : {}),
  });
  const calendar = watchMaterialCalendar(config, await keyArchiveAnchors(config.trust.keyArchiveSignerKeyFile), logger);
  const deps = signDocDeps(config, { trust, agents, pki, keys, store, delivery, logger, calendar }, options);
  configuredGauges(config, deps.metrics, calendar);
  const jobs = startBackgroundJobs(config, { store, pki, logger, metrics: deps.metrics }, options);
  const readiness = watchServiceReadiness(config, { store, storeHealth, trust, keys, pki, calendar, jobs, logger });
  await readiness.refresh(); // the first report at start reflects real probes
  const renewals = startRenewalWatch(config, { pki, calendar, readiness, store, agents, logger });
  const running: Running = {
    config,
    logger,
    agents,
    trust,
    store,
    storeHealth,
    keys,
    pki,
    delivery,
    readiness,
    calendar,
    renewals,
    ...jobs,
  };
  const listeners = await listenOrStop(running, deps);
  logger.info(
    {
      event: 'qtsp.started',
      url: listeners.server.signDocUrl,
      publication: listeners.publication.url,
      ops: listeners.ops.url,
      qtsp_id: config.qtspId,
    },
    'qtsp listening',
  );
  return serviceOf(running, listeners, deps);
}

/** Readiness (readiness.ts) over the parts a signDoc needs, and the journal's sealing. */
function watchServiceReadiness(
  config: Config,
  parts: Pick<Running, 'store' | 'storeHealth' | 'trust' | 'keys' | 'pki' | 'calendar' | 'logger'> & {
    readonly jobs: Pick<Running, 'sealing'>;
  },
): Readiness {
  const { pki } = parts;
  return watchReadiness({
    store: { driver: parts.store.driver, health: parts.storeHealth },
    ...parts.trust,
    keys: parts.keys,
    get issuingKey() {
      return pki.issuing.key; // the current CA's, also after a rollover
    },
    calendar: parts.calendar,
    sealing: parts.jobs.sealing,
    intervalMs: config.store.pingIntervalMs,
    logger: parts.logger,
  });
}

/** The IDP directory (first list pull), the key archive (clone or pull, spec 4.7) and the AS sources. */
async function startTrustSources(
  config: Config,
  agent: HttpAgent,
  logger: Logger,
  keyArchiveDir: string | undefined,
): Promise<TrustSources> {
  const timeoutMs = config.trust.httpTimeoutMs;
  const idps = new IdpDirectory({
    url: config.trust.idpDirectoryUrl,
    agent,
    ttlMs: config.trust.idpCacheTtlSeconds * 1000,
    maxStaleMs: config.trust.idpMaxStaleSeconds * 1000,
    listIntervalMs: config.trust.idpListPullSeconds * 1000,
    timeoutMs,
    logger,
  });
  await idps.start(); // a failing directory is logged and reported in readiness
  const keyArchive = await startKeyArchive(config, agent, logger, keyArchiveDir);
  const servers = new AuthorizationServers({
    agent,
    metadataTtlMs: config.trust.metadataCacheTtlSeconds * 1000,
    jwksCooldownMs: config.trust.jwksCooldownSeconds * 1000,
    timeoutMs,
    archive: keyArchive,
    logger,
  });
  return { idps, keyArchive, servers };
}

/** The evidence store (fails the start when unreachable or its schema is newer) and the watch of its health. */
async function openWatchedStore(config: Config, logger: Logger): Promise<{ store: Store; storeHealth: StoreHealth }> {
  const store = await openStore(config);
  const storeHealth = watchStore(store, config.store.pingIntervalMs, (healthy, reason) => {
    if (healthy) logger.info({ event: 'store.available', driver: store.driver }, 'evidence store answers again');
    else
      logger.error(
        { event: 'store.unavailable', driver: store.driver, error: reason },
        'evidence store does not answer; not ready',
      );
  });
  return { store, storeHealth };
}

/**
 * The start is journaled (EN 319 411-1 asks for configuration changes on record): a digest of the configuration
 * (keys sorted; a digest, so no secret of it is written) and where the keys are kept.
 */
async function journalStart(config: Config, store: Store, keys: KeyCustody): Promise<void> {
  const sorted = (_key: string, value: unknown) =>
    value && typeof value === 'object' && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))
      : value;
  const configSha256 = createHash('sha256').update(JSON.stringify(config, sorted)).digest('hex');
  await store.journal.append({
    kind: 'service.started',
    ref: null,
    at: new Date(),
    data: { qtspId: config.qtspId, configSha256, custody: describeCustody(keys) },
  });
}

/** The calendar of the material in <dataDir>/pki and the key archive's anchors, watched against calendar.warnDays. */
function watchMaterialCalendar(config: Config, anchors: readonly CalendarEntry[], logger: Logger): CalendarWatch {
  const sources = {
    dataDir: config.dataDir,
    clientCertFile: config.client.certFile,
    serverCertFile: config.server.tlsCertFile,
    signerValiditySeconds: config.signer.validitySeconds,
    tsuKeyUsageDays: config.calendar.tsuKeyUsageDays,
  };
  return watchCalendar({
    read: () => [...pkiCalendar(sources), ...anchors],
    warnDays: config.calendar.warnDays,
    intervalMs: config.calendar.checkIntervalSeconds * 1000,
    logger,
  });
}

/** The watch for renewals (ca/renewal-watch.ts), given what it needs from the layers above the CA. */
function startRenewalWatch(
  config: Config,
  parts: Pick<Running, 'pki' | 'calendar' | 'readiness' | 'store' | 'agents' | 'logger'>,
): { stop(): void } {
  const { store, calendar, logger } = parts;
  return watchRenewals(config, {
    pki: parts.pki,
    calendar,
    agents: parts.agents,
    // the instance that issues the renewed certificate journals it (journal/ca-events.ts)
    records: config.journal.enabled ? journaledIssuance(store, 'ocsp-responder', logger) : store,
    refreshReadiness: () => parts.readiness.refresh(),
    renewMail: () => renewMail(config.dataDir, store, config.calendar.mailRenewDays, () => calendar.reload(), logger),
    logger,
  });
}

/** What the signDoc pipeline needs, from the configuration and the started parts. */
function signDocDeps(
  config: Config,
  parts: Pick<Running, 'trust' | 'agents' | 'pki' | 'keys' | 'store' | 'delivery' | 'logger' | 'calendar'>,
  options: StartOptions,
): SignDocDeps {
  const { trust, agents, pki, delivery } = parts;
  const clockSkewSeconds = config.trust.clockSkewSeconds;
  return {
    qtspId: config.qtspId,
    sad: { idps: trust.idps, servers: trust.servers, clockSkewSeconds },
    introspection: {
      qtspId: config.qtspId,
      servers: trust.servers,
      agent: agents.mtls,
      timeoutMs: config.introspection.timeoutMs,
      clockSkewSeconds,
    },
    // with the AIA and CRL DP extensions of signer certificates; the new CA's from a rollover on
    get issuingCa() {
      return pki.issuing;
    },
    ades: { timestamps: pki.timestamps, revocation: pki.revocation },
    signerValiditySeconds: config.signer.validitySeconds,
    signerProfile: signerProfile({ defaultCountry: config.signer.defaultCountry, pdsUrls: config.signer.pdsUrls }),
    keys: parts.keys,
    defaultAlgorithm: config.signer.defaultAlgorithm,
    store: parts.store,
    mediation: { ownerId: config.mediation.ownerId, recorded: (entries) => delivery.wake(entries) },
    calendar: parts.calendar,
    logger: parts.logger,
    metrics: instanceMetrics(config, options.defaultMetrics ?? true),
  };
}

/** The state the operational gauges show, read once per scrape; each source bounded by ops.metricsTimeoutMs. */
async function operationalSnapshot(running: Running): Promise<OperationalSnapshot> {
  const { config, store, delivery, trust } = running;
  const status = await withTimeout(delivery.status(), config.ops.metricsTimeoutMs).catch(() => undefined);
  const topics: Record<string, TopicSnapshot> = {};
  for (const [topic, t] of Object.entries(status ?? {})) topics[topic] = await topicSnapshot(store, topic, t);
  // the store did not answer: Redis unknown, reported down rather than up
  const redisUp = status !== undefined && Object.values(status).every((t) => t.queue !== undefined);
  return {
    topics,
    storeUp: running.storeHealth.healthy,
    redisUp,
    ready: running.readiness.report().ready,
    idpListAgeSeconds: trust.idps.listAgeSeconds(),
    keyArchiveHeadAgeSeconds: trust.keyArchive.headAgeSeconds(),
    keyArchiveLastPullAgeSeconds: trust.keyArchive.lastPullAgeSeconds(),
    ...(config.journal.enabled ? { journal: await journalSnapshot(running) } : {}),
  };
}

/** The journal's sealing, audit and renewals; the store's part left out when it does not answer. */
async function journalSnapshot(running: Running): Promise<JournalSnapshot> {
  const { config, store } = running;
  const seal = await withTimeout(store.journal.sealState(), config.ops.metricsTimeoutMs).catch(() => undefined);
  const audit = running.audit.last();
  const due = running.renewalsDue();
  return {
    ...(seal ? { seal } : {}),
    secondTsa: running.pki.journalSecondTsa !== undefined,
    ...(audit ? { audit } : {}),
    ...(due !== undefined ? { renewalsDue: due } : {}),
  };
}

type TopicSnapshot = OperationalSnapshot['topics'][string];

/** One delivery topic: its outbox counts, its oldest undelivered entry, and its queue when Redis answered. */
async function topicSnapshot(store: Store, topic: string, t: TopicStatus): Promise<TopicSnapshot> {
  const oldest = await store.outboxPending(topic, 1, new Date()).catch(() => undefined);
  const queue = t.queue && {
    waiting: t.queue.waiting,
    active: t.queue.active,
    delayed: t.queue.delayed,
    failed: t.queue.failed,
  };
  return {
    outbox: t.outbox,
    ...(oldest ? { oldestUndelivered: oldest[0]?.createdAt ?? null } : {}),
    ...(queue ? { queue } : {}),
  };
}

/** The operations, publication and signDoc listeners; when one fails to listen, everything started is stopped. */
async function listenOrStop(running: Running, deps: SignDocDeps): Promise<Listeners> {
  const { config, logger } = running;
  const gauges = operationalGauges(deps.metrics.registry, () =>
    withTimeout(operationalSnapshot(running), config.ops.metricsTimeoutMs),
  );
  const admin = adminRouter({
    store: running.store,
    allowedFingerprints: config.notification.adminClientFingerprints,
    queued: () => running.delivery.wake(),
  });
  const publicationRoutes = pkiRoutes(config, running.pki, logger);
  const app = createApp(config, deps, [publicationRoutes, admin]);
  let publication: Listener | undefined;
  let ops: Listener | undefined;
  try {
    ops = await listenOps(config, {
      readiness: () => running.readiness.report(),
      metrics: deps.metrics,
      beforeScrape: () => gauges.update(),
      logger,
    });
    const journalRoutes = journalRouter(running.store, anchorRepoPaths(config.dataDir));
    publication = await listenPublication(config, [publicationRoutes, journalRoutes], logger);
    // a renewed server certificate: the calendar reads its new end, readiness follows
    const certificateSwitched = () => {
      running.calendar.reload();
      running.readiness.refresh().catch(() => undefined);
    };
    return { server: await listen(config, app, logger, certificateSwitched), publication, ops };
  } catch (err) {
    await publication?.close();
    await ops?.close();
    await stopAfterFailedStart(running);
    throw err;
  }
}

/** A start that failed after everything but the listeners was up. */
async function stopAfterFailedStart(running: Running): Promise<void> {
  running.readiness.stop();
  running.calendar.stop();
  running.renewals.stop();
  running.trust.idps.stop();
  await running.trust.keyArchive.stop();
  await running.delivery.close();
  await running.retention.close();
  await running.audit.close();
  running.storeHealth.stop();
  await running.store.close();
  await running.keys.close();
}

function serviceOf(running: Running, listeners: Listeners, deps: SignDocDeps): QtspService {
  const { trust } = running;
  return {
    ...listeners.server,
    publicationUrl: listeners.publication.url,
    opsUrl: listeners.ops.url,
    refreshReadiness: () => running.readiness.refresh(),
    sealJournal: () => running.sealing.sealNow(),
    deps,
    trust: { idps: trust.idps, servers: trust.servers, keyArchive: trust.keyArchive },
    delivery: running.delivery,
    calendar: running.calendar,
    close: () => stop(running, listeners),
  };
}

/** Stops the QTSP: each step bounded, each runs even when an earlier one failed or hung (Redis or PostgreSQL gone). */
async function stop(running: Running, listeners: Listeners): Promise<void> {
  const { drainTimeoutMs, shutdownTimeoutMs } = running.config.lifecycle;
  const steps = stopSteps(running, listeners);
  // the drain has its own bound; the other steps share what remains
  const stepTimeoutMs = Math.max(1000, Math.floor((shutdownTimeoutMs - drainTimeoutMs) / (steps.length - 1)));
  await runStopSteps(steps, stepTimeoutMs, running.logger);
}

function stopSteps(running: Running, listeners: Listeners): Parameters<typeof runStopSteps>[0] {
  const { server, publication, ops } = listeners;
  const { trust, store } = running;
  return [
    // refuses new connections at once; signDoc calls in progress finish (their evidence is written)
    // the operations listener closes too: a probe that cannot connect takes this instance out of the pool
    [
      'drain signDoc calls',
      () => Promise.all([server.close(), publication.close(), ops.close()]).then(() => undefined),
      running.config.lifecycle.drainTimeoutMs + 1000,
    ],
    // before the store: running deliveries still mark their outcome
    ['close the delivery queues', () => running.delivery.close()],
    [
      'stop the trust sources',
      async () => {
        running.readiness.stop();
        running.calendar.stop();
        running.renewals.stop();
        trust.idps.stop();
        await trust.keyArchive.stop();
      },
    ],
    // the last seal while the custody is open: its time-stamp is signed with the TSA key, which may be in a token
    [
      'seal the journal',
      async () => {
        await running.retention.close(); // a purge under way finishes its batch first
        await running.renewal.close(); // a renewal under way finishes
        await running.audit.close(); // an audit under way finishes
        await running.sealing.close().catch(() => undefined); // seals what the drained calls wrote
      },
    ],
    // pooled keys nobody took are dropped (PKCS#11: destroyed, sessions closed)
    ['close the key custody', () => running.keys.close()],
    [
      'flush and close the store',
      async () => {
        running.storeHealth.stop();
        await store.close();
      },
    ],
    ['close outgoing connections', () => running.agents.destroy()],
  ];
}
