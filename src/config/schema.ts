/**
 * The one configuration schema. Every setting is documented where it is defined, has a sandbox default
 * (so `npm start` needs no configuration) and can be set by an environment variable named after its path:
 * server.port -> QTSP_SERVER_PORT, trust.idpDirectoryUrl -> QTSP_TRUST_IDP_DIRECTORY_URL.
 */
import { z } from 'zod';
import { ISO_3166_ALPHA2, ISO_639_1 } from '../util/iso-codes.ts';
import {
  checkMasterName,
  parseSentinel,
  redisAddress,
  sentinelUrl,
  type SentinelAddress,
} from '../util/redis-address.ts';

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();
const url = z.url({ protocol: /^https?$/ });
/** true/false, also as the strings an environment variable carries */
const booleanSetting = z.union([z.boolean(), z.stringbool()]);
/** a list, also as one comma-separated environment variable */
const stringList = z.preprocess(
  (v) =>
    typeof v === 'string'
      ? v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : v,
  z.array(z.string().min(1)),
);
function validRedisUrl(url: string): boolean {
  try {
    redisAddress(url);
    return true;
  } catch {
    return false;
  }
}

/** the redis-sentinel:// URL of well-formed settings (util/redis-address.ts) */
export function sentinelUrlOf(sentinels: readonly string[], name: string): string {
  return sentinelUrl(
    sentinels.map((s) => parseSentinel(s) as SentinelAddress),
    name,
  );
}

/** redis.sentinels and redis.sentinelName come together, and not with redis.url */
function sentinelSettings(
  r: { url?: string | undefined; sentinels?: string[] | undefined; sentinelName?: string | undefined },
  ctx: z.RefinementCtx,
): void {
  const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
  if (r.sentinels !== undefined && r.sentinels.length === 0) issue('sentinels', 'at least one host:port');
  if (r.sentinels?.length && r.sentinelName === undefined) {
    issue(
      'sentinelName',
      'required with redis.sentinels (QTSP_REDIS_SENTINELS): the master name the sentinels monitor',
    );
  }
  if (r.sentinelName !== undefined && !r.sentinels?.length) {
    issue('sentinels', 'required with redis.sentinelName (QTSP_REDIS_SENTINEL_NAME): the sentinels as host:port,...');
  }
  // a cluster primary hands its workers the sentinel URL it derived, beside the same settings: agreeing is fine
  if (r.sentinels?.length && r.url !== undefined && r.url !== sentinelUrlOf(r.sentinels, r.sentinelName ?? '')) {
    issue('url', 'give either redis.url or redis.sentinels (QTSP_REDIS_SENTINELS), not both');
  }
}

/** `key=value,key=value` (an environment variable) as an object; an entry without `=` keeps an empty value */
function parseKeyValues(text: string): Record<string, string> {
  const entries = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return Object.fromEntries(
    entries.map((entry) =>
      entry.includes('=')
        ? [entry.slice(0, entry.indexOf('=')).trim(), entry.slice(entry.indexOf('=') + 1).trim()]
        : [entry, ''],
    ),
  );
}
/** a map, also as one environment variable `key=value,key=value` */
const keyValueList = (value: z.ZodType<string>) =>
  z.preprocess((v) => (typeof v === 'string' ? parseKeyValues(v) : v), z.record(z.string(), value));
/** a PDS location URL: https (EN 319 412-5 QCS-4.3.4-03), printable ASCII (PdsLocation.url is an IA5String) */
const pdsUrl = z
  .url({ protocol: /^https$/ })
  .regex(/^[\x21-\x7e]+$/, 'must be written in ASCII (percent-encode other characters)');

export const configSchema = z
  .strictObject({
    /** Directory for CA material, the sandbox's files and the embedded store. */
    dataDir: z.string().min(1).default('./data'),
    /** Our id in the SP directory (spec 2.2, 2.13): sp:<stage.><platform_domain>:<uuid_v4>. */
    qtspId: z
      .string()
      .regex(
        /^sp:[a-z0-9.-]+:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
        'must be sp:<stage.><platform_domain>:<uuid_v4>',
      )
      .default('sp:sandbox.qtsp.localhost:6f1c4c52-0b0e-4c4e-9d6b-2b9b8f0d7a31'),
    instance: z
      .strictObject({
        /**
         * Name of this instance when several `qtsp serve` share the load behind a layer-4 load balancer (the
         * metrics label qtsp_instance). Setting it declares a multi-instance deployment, which needs what
         * instances can share: store.driver postgres and a Redis given by redis.url or REDIS_URL (README:
         * Several instances). Each instance keeps its own data directory (key-archive clone, caches).
         */
        id: z
          .string()
          .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'letters, digits, ., _ and - only (at most 64)')
          .optional(),
      })
      .prefault({}),
    server: z
      .strictObject({
        /** Address the signDoc HTTPS server listens on. */
        host: z.string().min(1).default('127.0.0.1'),
        /** Port of the signDoc HTTPS server; 0 picks a free one. */
        port: port.default(8440),
        /** Path of the signDoc endpoint (spec 4.5). */
        signDocPath: z
          .string()
          .regex(/^\/[A-Za-z0-9/_.-]*$/, 'must be an absolute URL path')
          .default('/signDoc'),
        /** PEM certificate chain of the HTTPS server; default: the one the sandbox issues in dataDir. */
        tlsCertFile: z.string().optional(),
        /** PEM private key of the HTTPS server. */
        tlsKeyFile: z.string().optional(),
        /** Largest accepted request body (bytes). */
        maxBodyBytes: positiveInt.default(256 * 1024),
        /**
         * Most connections open at once on each public listener (signDoc, publication); past it new connections
         * are closed at once. Keep it well below the process's file-descriptor limit (`ulimit -n`).
         */
        maxConnections: positiveInt.default(4096),
        /**
         * Most connections open at once from one client address on each public listener; 0: no such limit. Behind
         * a load balancer that passes TCP through without the PROXY protocol every connection comes from the
         * balancer's address: set 0 there (or at least the balancer's own per-server maxconn) and limit per client
         * at the balancer.
         */
        maxConnectionsPerAddress: z.coerce.number().int().min(0).default(256),
        /**
         * Time a client has from connecting to the end of its request headers, TLS handshake included (ms). A
         * client that connects and sends nothing is closed after this.
         */
        headersTimeoutMs: positiveInt.default(10_000),
        /** Time a client has to send a whole request, body included (ms); past it: 408 and the connection is closed. */
        requestTimeoutMs: positiveInt.default(30_000),
        /**
         * Processes serving signDoc on this machine (`qtsp serve` only; node:cluster, one shared port): 1 (one
         * process), N, or 0 for one per CPU core. More than one needs store.driver postgres: the SQLite store
         * is one file with one writing process, so `qtsp serve` refuses several workers on it.
         */
        workers: z.coerce.number().int().min(0).max(256).default(1),
        /**
         * How far V8 lets the heap grow past what the last full collection kept before it marks again (percent;
         * `qtsp serve` only; 0: V8's own adaptive choice). Under signDoc load V8's own choice is small, so full
         * collections come often, and each one stalls every call in flight: that sets the tail latency
         * (docs/performance.md). At 400 the heap may grow to about five times the live heap and full collections
         * are rare, mostly when external (Buffer) memory calls for one. Lower it where memory is scarcer than
         * latency.
         */
        heapGrowthPercent: z.coerce.number().int().min(0).max(1000).default(400),
        /**
         * Port of the plain-HTTP publication server (/ocsp, /crl/..., /ca/..., /tsa): OCSP and CRLs are fetched
         * over plain HTTP by validators (RFC 6960 A.1, RFC 5280 4.2.1.13; NSS, and so pdfsig, cannot fetch
         * https OCSP URLs). Their answers are signed, so TLS adds nothing. 0 picks a free port.
         */
        publicationPort: port.default(8439),
        /**
         * Base URL at which relying parties reach /ocsp, /tsa, /crl/... and /ca/...; written into the AIA and
         * CRL distribution point extensions of every certificate we issue. Default: http://host:publicationPort.
         */
        publicBaseUrl: url.optional(),
      })
      .refine((s) => s.headersTimeoutMs <= s.requestTimeoutMs, {
        message: 'must not exceed server.requestTimeoutMs',
        path: ['headersTimeoutMs'],
      })
      .prefault({}),
    ops: z
      .strictObject({
        /**
         * Address of the operations listener: GET /health/live, /health/ready and /metrics, plain HTTP. Loopback by
         * default: it answers anyone who can connect, so bind it to a private interface (or keep it on loopback and
         * scrape through a local agent); never to the public network. The signDoc port does not serve these.
         */
        host: z.string().min(1).default('127.0.0.1'),
        /** Port of the operations listener; 0 picks a free one. */
        port: port.default(8438),
        /** How long /metrics waits for the store and Redis before reporting them down (ms). */
        metricsTimeoutMs: positiveInt.default(5000),
      })
      .prefault({}),
    client: z
      .strictObject({
        /** Our self-signed TLS client certificate towards the AS (spec 5.8); default from `qtsp pki init`. */
        certFile: z.string().optional(),
        keyFile: z.string().optional(),
      })
      .prefault({}),
    trust: z
      .strictObject({
        /** PEM bundle of the CAs trusted for outgoing HTTPS (AS, directories); default: the sandbox TLS CA. */
        caFile: z.string().optional(),
        /** IDP directory (spec 4.6). */
        idpDirectoryUrl: url.default('https://127.0.0.1:8442/idps/v1/'),
        /**
         * SP directory (spec 2.13): our record registers our TLS client certificate; `qtsp pki client-cert`
         * replaces it there (PUT <url><client_id>/jwks, authenticated with the current certificate).
         */
        spDirectoryUrl: url.default('https://127.0.0.1:8442/sps/v1/'),
        /** How long an IDP directory answer is reused (seconds). */
        idpCacheTtlSeconds: z.coerce.number().int().min(0).default(300),
        /** When the directory is down, how long its last good answer keeps serving (seconds); then fail closed. */
        idpMaxStaleSeconds: positiveInt.default(3600),
        /** Interval of the periodic pull of the whole IDP list (seconds); 0 = single lookups only. */
        idpListPullSeconds: z.coerce.number().int().min(0).default(300),
        /**
         * Long-term public key archive (spec 4.7): git repository over smart HTTP, cloned at start into
         * <dataDir>/key-archive; HEAD holds the JWK Set of each active IDP. Consulted before jwks_uri.
         */
        keyArchiveUrl: url.default('https://127.0.0.1:8442/key-archive/keys.git'),
        /** Interval of the periodic pull of the key archive (seconds). */
        keyArchivePullSeconds: positiveInt.default(300),
        /**
         * The operating party's OpenPGP public key(s), armored: every archive commit must carry a valid signature
         * by one of them. Default: the sandbox's, <dataDir>/sandbox/key-archive-signer.pub.asc.
         */
        keyArchiveSignerKeyFile: z.string().optional(),
        /** How long AS metadata is reused (seconds). */
        metadataCacheTtlSeconds: positiveInt.default(3600),
        /** Least time between two JWKS refetches caused by an unknown kid (seconds). */
        jwksCooldownSeconds: z.coerce.number().min(0).default(30),
        /** Tolerated clock difference for iat/exp checks (seconds). */
        clockSkewSeconds: z.coerce.number().int().min(0).max(300).default(5),
        /** Timeout of every outgoing HTTP call except introspection (ms). */
        httpTimeoutMs: positiveInt.default(5000),
      })
      .prefault({}),
    introspection: z
      .strictObject({
        /** Timeout of the introspection call (ms); on expiry signDoc answers 504. */
        timeoutMs: positiveInt.default(10000),
      })
      .prefault({}),
    signer: z
      .strictObject({
        /** Validity of each per-request signer certificate (seconds). */
        validitySeconds: positiveInt.max(86400).default(3600),
        /**
         * Signer algorithm when a signDoc request has no signAlgo (spec 2.12): ECDSA-P256, ECDSA-P384, RSA-3072
         * (PKCS#1 v1.5) or RSA-PSS-3072; src/ades/offer.ts has the signAlgo rules.
         */
        defaultAlgorithm: z.enum(['ECDSA-P256', 'ECDSA-P384', 'RSA-3072', 'RSA-PSS-3072']).default('ECDSA-P256'),
        /** Fresh RSA-3072 keys kept ready (generated in worker threads); 0: each RSA request generates its own. */
        rsaPoolSize: z.coerce.number().int().min(0).max(64).default(4),
        /**
         * countryName of signer certificates whose identity claims carry no (valid) address country: the country
         * of the identity scheme, where the banks that vouch for the identity verified it. EN 319 412-2
         * NAT-4.2.4-1 requires countryName in every natural-person certificate. ISO 3166-1 alpha-2, upper case;
         * default DE, the country of the sandbox's banks.
         */
        defaultCountry: z
          .string()
          .refine(
            (code) => ISO_3166_ALPHA2.has(code),
            'must be an assigned ISO 3166-1 alpha-2 country code in upper case, such as DE or AT',
          )
          .default('DE'),
        /**
         * PKI disclosure statements (EN 319 411-1 Annex A) named in the QcPDS statement of every signer certificate
         * (EN 319 412-5 4.3.4): ISO 639-1 language code (lower case) -> https URL; in the environment
         * `en=https://...,de=https://...`. Empty (default): no QcPDS statement, which EN 319 412-5 Table 2 makes
         * optional. When set, one entry must be English (Table 2, QcPDS condition a); one URL per language (b).
         */
        pdsUrls: keyValueList(pdsUrl)
          .refine(
            (map) => Object.keys(map).every((lang) => ISO_639_1.has(lang)),
            'each key must be an ISO 639-1 language code in lower case, such as en or de',
          )
          .refine(
            (map) => Object.keys(map).length === 0 || 'en' in map,
            'must include an English PDS (en=https://...): EN 319 412-5 Table 2',
          )
          .default({}),
      })
      .prefault({}),
    keys: z
      .strictObject({
        /**
         * The key custody backend: a folder under src/custody/ (registry.ts loads it; an unknown name stops the
         * start naming this setting). 'software' (node:crypto keys in this process, PKCS#8 files in
         * <dataDir>/pki: the sandbox default), 'pkcs11' (a hardware security module: issuing CA, TSA and OCSP
         * responder keys made in the token by `qtsp pki init`, every signer key generated in the token and
         * destroyed after its request), or 'softhsm' (`qtsp dev` only: pkcs11 on a SoftHSM2 token it creates
         * under <dataDir>/softhsm; the pkcs11 settings below are then filled in). Each backend's own settings
         * follow.
         */
        provider: z
          .string()
          .regex(/^[a-z0-9-]+$/, 'a key custody name: lowercase letters, digits and -')
          .default('software'),
        // pkcs11
        /** Path of the PKCS#11 module (e.g. /usr/lib/softhsm/libsofthsm2.so); required for pkcs11. */
        pkcs11Module: z.string().min(1).optional(),
        /** Label of the token holding our keys; required for pkcs11. */
        tokenLabel: z.string().min(1).max(32).optional(),
        /** File whose first line is the token's user PIN (owner-readable only); required for pkcs11. Never logged. */
        pinFile: z.string().min(1).optional(),
        /**
         * The operator declares the token a qualified signature creation device (certified, EN 419 221-5 /
         * EU list of QSCDs). Only then do signer certificates carry QcSSCD and QCP-n-qscd; otherwise QCP-n.
         */
        tokenIsQscd: booleanSetting.default(false),
        /** PKCS#11 sessions kept open: signing operations run in parallel up to this many. */
        sessions: positiveInt.max(64).default(4),
      })
      .prefault({}),
    tsa: z
      .strictObject({
        /**
         * An external RFC 3161 time-stamping authority for B-T and above (POST application/timestamp-query).
         * Unset: our own TSA signs in-process (it is also served at POST /tsa either way).
         */
        url: url.optional(),
        /** Timeout of one call to the external TSA (ms); after the last retry signDoc answers 504. */
        timeoutMs: positiveInt.default(5000),
        /** Further attempts after a failed or timed-out call to the external TSA. */
        retries: z.coerce.number().int().min(0).max(5).default(1),
        /** PEM certificates of the external TSA, its certificate first: added to B-LT and B-LTA signatures. */
        chainFile: z.string().optional(),
        /**
         * TSA policy of our own tokens (RFC 3161 2.4.2 policy). The default lies under 1.3.6.1.4.1.32473, the
         * private enterprise number IANA reserves for documentation (RFC 5612): a real TSA sets its own.
         */
        policyOid: z
          .string()
          .regex(/^[0-2](\.(0|[1-9][0-9]*))+$/, 'must be a dotted OID')
          .default('1.3.6.1.4.1.32473.3161.1'),
        /** Accuracy our tokens claim (RFC 3161 Accuracy.seconds); genTime is given to the millisecond. */
        accuracySeconds: positiveInt.max(60).default(1),
      })
      .prefault({}),
    revocation: z
      .strictObject({
        /** Validity of our OCSP responses: nextUpdate - thisUpdate (seconds). */
        ocspValiditySeconds: positiveInt.default(3600),
        /** Validity of our CRLs: nextUpdate - thisUpdate (seconds). */
        crlValiditySeconds: positiveInt.default(86400),
        /**
         * How long a CRL is served before it is issued anew (seconds); a revocation through this process refreshes
         * it at once.
         */
        crlRefreshSeconds: positiveInt.default(300),
      })
      .prefault({}),
    calendar: z
      .strictObject({
        /**
         * Days before a certificate, CRL or key usage period of the long-lived material ends at which the log
         * warns (event pki.expiry_warning), comma-separated in the environment.
         */
        warnDays: z
          .preprocess((v) => (typeof v === 'string' ? v.split(',').map((s) => s.trim()) : v), z.array(positiveInt))
          .default([90, 30, 7]),
        /** How often the service checks those thresholds (seconds). */
        checkIntervalSeconds: positiveInt.default(3600),
        /**
         * How often the service looks for a renewal a ceremony marked (<dataDir>/pki/renewed.json, seconds): it
         * then serves the renewed certificates, keys and root CRL without a restart.
         */
        reloadCheckSeconds: positiveInt.default(5),
        /**
         * Days before the issuing CA's delegated OCSP responder certificate ends at which the service certifies
         * the responder's key again with the issuing CA (checked every checkIntervalSeconds; once across the
         * instances on one store). 0 turns it off.
         */
        responderRenewDays: z.coerce.number().int().min(0).default(30),
        /**
         * Days before our S/MIME mail certificate ends at which the service certifies its key again with the
         * mail CA (checked every checkIntervalSeconds; once across the instances on one store). 0 turns it off.
         */
        mailRenewDays: z.coerce.number().int().min(0).default(30),
        /**
         * How long a TSU key is used after its certificate's notBefore (days; EN 319 421 7.6: well before the
         * certificate ends, so that its time-stamps still verify). A ceremony renews it with a fresh key.
         */
        tsuKeyUsageDays: positiveInt.default(365),
      })
      .prefault({}),
    store: z
      .strictObject({
        /**
         * Evidence and certificate store: 'sqlite' (embedded, one file <dataDir>/qtsp.sqlite) or 'postgres'
         * (several instances).
         */
        driver: z.enum(['sqlite', 'postgres']).default('sqlite'),
        /**
         * PostgreSQL connection URL (postgres://user:password@host:port/database); required when driver is
         * postgres.
         */
        url: z
          .string()
          .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
          .optional(),
        /** How often readiness re-checks that the store answers and accepts a write (ms). */
        pingIntervalMs: positiveInt.default(5000),
        /**
         * Largest size of the SQLite file (bytes; 0: as large as the disk allows). Past it every write fails as on
         * a full disk (signDoc 503, not ready): a cap that keeps the evidence store from filling a shared disk.
         */
        sqliteMaxBytes: z.coerce.number().int().min(0).default(0),
      })
      .refine((s) => s.driver !== 'postgres' || s.url !== undefined, {
        message: 'required when store.driver is postgres',
        path: ['url'],
      })
      .prefault({}),
    redis: z
      .strictObject({
        /**
         * Redis of the delivery queues (bullmq; needs noeviction and AOF). Unset: REDIS_URL, else `qtsp dev` and
         * `qtsp serve` start a local redis-server on a free loopback port with its files in <dataDir>/redis.
         */
        url: z
          .string()
          .regex(/^(rediss?|redis-sentinel):\/\//, 'must be a redis://, rediss:// or redis-sentinel:// URL')
          .refine(validRedisUrl, 'a redis-sentinel:// URL names host:port,host:port/NAME')
          .optional(),
        /**
         * Redis under Sentinel: the sentinels as host:port, comma-separated (port 26379 when left out). Every
         * connection (queues, workers, relay, `qtsp worker`, `qtsp mediation status`) then asks them for the
         * current master of redis.sentinelName and follows a failover. Exclusive with redis.url.
         */
        sentinels: stringList
          .refine((list) => list.every((s) => typeof parseSentinel(s) !== 'string'), {
            error: (issue) => {
              const bad = (issue.input as string[]).map(parseSentinel).find((p) => typeof p === 'string');
              return `${bad}: give host:port, comma-separated`;
            },
          })
          .optional(),
        /** The master's name in the sentinels' configuration (`sentinel monitor NAME ...`); needs redis.sentinels. */
        sentinelName: z
          .string()
          .refine((n) => checkMasterName(n) === undefined, "letters, digits, '.', '_' and '-' only")
          .optional(),
        /** Key prefix of the queues: instances sharing one Redis and one store use the same prefix. */
        prefix: z
          .string()
          .regex(/^[A-Za-z0-9_-]+$/, 'letters, digits, _ and - only')
          .default('qtsp'),
        /**
         * Timeout of every queue call (ms): Redis down or slow never holds anything longer (with a Redis that was
         * never reachable, bullmq's add() stays pending for ever).
         */
        commandTimeoutMs: positiveInt.default(2000),
      })
      .superRefine(sentinelSettings)
      .prefault({}),
    lifecycle: z
      .strictObject({
        /**
         * On SIGTERM or SIGINT: how long signDoc calls already in progress may take to finish (ms). New
         * connections are refused at once; calls still running after this are cut.
         */
        drainTimeoutMs: positiveInt.default(10_000),
        /**
         * Bound of the whole stop (ms): draining, closing the queues, flushing and closing the store. A step that
         * hangs (Redis or PostgreSQL already gone) does not hold the exit longer than this.
         */
        shutdownTimeoutMs: positiveInt.default(20_000),
        /**
         * Stop when the process that started this one ends, also when it was killed with SIGKILL (`npm start`
         * sets it; so do the processes qtsp starts itself). Off for a service run by systemd or a container.
         */
        exitWithParent: booleanSetting.default(false),
      })
      .prefault({}),
    delivery: z
      .strictObject({
        /**
         * Run the delivery workers (mediation records, notifications) in the QTSP process; false: `qtsp worker`
         * runs them.
         */
        inProcessWorker: booleanSetting.default(true),
        /** How often the relay moves outbox entries to the queues (ms); every signature also wakes it. */
        relayIntervalMs: positiveInt.default(1000),
        /**
         * Queued entries still not delivered after this long are handed to the queue again: the backstop for jobs
         * Redis lost without restarting (a restart is noticed by its run_id and handled at once, delivery/relay.ts).
         */
        requeueAfterMs: positiveInt.default(15 * 60_000),
        /**
         * Delivery attempts per record before it is marked failed (kept in the outbox, shown by
         * `qtsp mediation status`).
         */
        attempts: positiveInt.max(100).default(15),
        /**
         * First retry delay (ms); doubles per attempt, with jitter (15 attempts from 1 s: retries for up to about
         * 4.5 hours).
         */
        backoffMs: positiveInt.default(1000),
        /** Timeout of one delivery (HTTP post or SMTP session) (ms). */
        timeoutMs: positiveInt.default(10000),
        /** Lock of a job in progress (ms): a worker that died is detected after this, and its jobs run again. */
        lockMs: positiveInt.default(30000),
        /** Parallel deliveries per worker process. */
        concurrency: positiveInt.max(256).default(8),
      })
      .prefault({}),
    journal: z
      .strictObject({
        /**
         * The journal of evidence and operator events (docs/evidence.md). false: no entry is written, nothing is
         * sealed or renewed, and the audit and the evidence records have nothing to prove; only for measuring
         * what the journal costs.
         */
        enabled: booleanSetting.default(true),
        /**
         * How often the journal of evidence and operator events is sealed (seconds): the entries since the last
         * batch are hashed into a tree whose root, chained to the previous batch's, our TSA time-stamps
         * (docs/evidence.md). Also sealed at shutdown; 0: only then.
         */
        sealIntervalSeconds: z.coerce.number().int().min(0).default(60),
        /**
         * Readiness reports not ready when no seal has succeeded for this many seconds (docs/operations.md, When
         * something fails); signing goes on meanwhile. 0: three seal intervals.
         */
        sealStalledAfterSeconds: z.coerce.number().int().min(0).default(0),
        /**
         * Time-stamp renewal of the evidence records (RFC 4998 5.2, docs/evidence.md): renewed when the TSA
         * certificate of a chain's newest time-stamp ends within this many days.
         */
        renewMarginDays: positiveInt.default(365),
        /** How often that is checked (seconds), the first time one interval after the start; 0: never. */
        renewCheckIntervalSeconds: z.coerce.number().int().min(0).default(86400),
        /**
         * How often the service audits its own journal (seconds; 0: never): `qtsp evidence audit` over the batches
         * sealed since the previous run, the chain whole; the outcome is in the metrics (docs/operations.md).
         */
        auditIntervalSeconds: z.coerce.number().int().min(0).default(3600),
        /**
         * A second RFC 3161 TSA, of another operator, that time-stamps every batch's root besides ours
         * (docs/evidence.md): a batch is sealed only with both tokens, so while it fails the entries wait for
         * the next seal (logged). Unset: our TSA alone. Calls use tsa.timeoutMs and tsa.retries.
         */
        secondTsaUrl: url.optional(),
        /**
         * PEM certificates of that TSA's chain up to its root (required with secondTsaUrl): `qtsp evidence
         * audit` checks each second token's TSA certificate against them, and the export carries them.
         */
        secondTsaChainFile: z.string().min(1).optional(),
      })
      .refine((j) => j.secondTsaUrl === undefined || j.secondTsaChainFile !== undefined, {
        path: ['secondTsaChainFile'],
        message: 'journal.secondTsaUrl needs the chain of that TSA (QTSP_JOURNAL_SECOND_TSA_CHAIN_FILE)',
      })
      .prefault({}),
    retention: z
      .strictObject({
        /**
         * How long the evidence of a signing is kept (days): the transaction with its introspection JWT, the
         * signer certificate, the kept signatures and the document claims of its consent; 0 (default): for ever.
         * A QTSP keeps evidence for the retention period of its own policy and national law (eIDAS Art. 24(2)(h),
         * ETSI EN 319 401 clause 7.10), so nothing is deleted until the operator sets that period. Evidence whose
         * mediation record is not delivered yet stays whatever its age. Archive first: `qtsp evidence export`.
         */
        evidenceDays: z.coerce.number().int().min(0).default(0),
        /**
         * How long a delivered outbox entry (mediation record, notification) is kept after its delivery (days);
         * 0: for ever. Entries not delivered (pending, queued, failed) always stay. The default keeps a quarter
         * of a year for `qtsp mediation status` and for questions about a delivery.
         */
        outboxDeliveredDays: z.coerce.number().int().min(0).default(90),
        /** How often the purge runs (seconds); one process per instance runs it (the one that owns the relay). */
        purgeIntervalSeconds: positiveInt.default(3600),
        /** Rows one purge write deletes at most: signDoc's writes never wait long behind a purge. */
        purgeBatchSize: positiveInt.max(10_000).default(200),
      })
      .prefault({}),
    mediation: z
      .strictObject({
        /**
         * Records endpoint of the mediation service (spec 6.2); we authenticate with our TLS client certificate
         * (5.12).
         */
        url: url.default('https://127.0.0.1:8443/mediation/v1/records'),
        /** owner_id in our records: the owner_id of our SP directory record (spec 2.13, 6.2). */
        ownerId: z.string().min(1).default('owner-qtsp-sandbox'),
      })
      .prefault({}),
    notification: z
      .strictObject({
        /** SMTP server for end-user notifications (spec 6.3): smtp://host:port, STARTTLS required (TLS 1.2+). */
        smtpUrl: z
          .string()
          .regex(/^smtps?:\/\/[^/]+$/, 'must be smtp://host:port or smtps://host:port')
          .default('smtp://127.0.0.1:2525'),
        /** Sender address; also the rfc822Name of our S/MIME mail certificate. */
        from: z.email().default('notifications@qtsp.sandbox.localhost'),
        /**
         * Directory of IDP encryption certificates: <encodeURIComponent(iss)>.pem. When the IDP of a notification
         * has one, the signed mail is also encrypted to it (spec 6.3). Default: <dataDir>/notification-recipients.
         */
        recipientCertDir: z.string().optional(),
        /**
         * x5t#S256 fingerprints of the TLS client certificates allowed to call POST /admin/v1/notifications,
         * comma-separated in the environment. Empty: the admin endpoint is off.
         */
        adminClientFingerprints: stringList.default([]),
      })
      .prefault({}),
  })
  .superRefine((c, ctx) => {
    // SQLite is one file on one machine; instances on several machines can only share PostgreSQL
    if (c.instance.id !== undefined && c.store.driver === 'sqlite') {
      ctx.addIssue({
        code: 'custom',
        path: ['store', 'driver'],
        message:
          `sqlite serves one instance on one machine, but instance.id (QTSP_INSTANCE_ID=${c.instance.id}) ` +
          'declares one of several instances: set QTSP_STORE_DRIVER=postgres and QTSP_STORE_URL, ' +
          'shared by all instances',
      });
    }
  });

export type ConfigInput = z.input<typeof configSchema>;
type Parsed = z.output<typeof configSchema>;

/** The configuration after defaults derived from dataDir are filled in. */
export type Config = Readonly<
  Omit<Parsed, 'server' | 'client' | 'trust'> & {
    server: Readonly<Parsed['server'] & { tlsCertFile: string; tlsKeyFile: string }>;
    client: Readonly<{ certFile: string; keyFile: string }>;
    trust: Readonly<Parsed['trust'] & { caFile: string; keyArchiveSignerKeyFile: string }>;
    introspection: Readonly<Parsed['introspection']>;
    signer: Readonly<Parsed['signer']>;
  }
>;
