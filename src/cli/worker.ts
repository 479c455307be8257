/**
 * `qtsp worker`: the delivery process on its own: relays the outbox to the queues and runs the workers that
 * post mediation records (spec 6.2) and send end-user notifications (6.3). Configured like `qtsp serve`
 * (QTSP_* variables); Redis from redis.url, REDIS_URL, or the local one of a running `qtsp dev` on the same
 * data directory. Run it beside QTSP instances started with QTSP_DELIVERY_IN_PROCESS_WORKER=false.
 */
import { loadConfig, ConfigError } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { startDeliveries } from '../deliveries.ts';
import { checkSentinels } from '../delivery/queue.ts';
import { openStore } from '../store/open.ts';
import { createOutgoingAgents, watchClientCertificate } from '../trust/agents.ts';
import { IdpDirectory } from '../trust/idp-directory.ts';
import { runStopSteps, untilStopped } from '../util/lifecycle.ts';
import { logger } from '../util/logger.ts';
import { knownRedisUrl } from '../util/redis-server.ts';

/** The configuration with redis.url resolved, or a ConfigError saying how to give one. */
export function withRedis(config: Config, env: NodeJS.ProcessEnv = process.env): Config {
  const url = knownRedisUrl(config.redis.url, env, config.dataDir);
  if (!url)
    throw new ConfigError(
      'setting redis.url (QTSP_REDIS_URL): no Redis known; set it or REDIS_URL, ' +
        'or start `qtsp dev` on this data directory first',
    );
  return { ...config, redis: { ...config.redis, url } };
}

export async function runWorker(_args: string[]): Promise<number> {
  const config = withRedis(loadConfig());
  await checkSentinels(config.redis.url!, config.redis.commandTimeoutMs);
  const store = await openStore(config);
  const agents = createOutgoingAgents(config);
  const idps = new IdpDirectory({
    url: config.trust.idpDirectoryUrl,
    agent: agents.plain,
    ttlMs: config.trust.idpCacheTtlSeconds * 1000,
    maxStaleMs: config.trust.idpMaxStaleSeconds * 1000,
    timeoutMs: config.trust.httpTimeoutMs,
  });
  const delivery = startDeliveries(config, { store, mtlsAgent: agents.mtls, idps, logger, workers: true });
  // a rotated client certificate reaches the mediation deliveries without a restart, as it does the service
  const clientWatch = watchClientCertificate(config, agents, (outcome) =>
    'error' in outcome
      ? logger.error({ event: 'tls.client_certificate_reload_failed', error: outcome.error.message }, 'not switched')
      : logger.info({ event: 'tls.client_certificate_reloaded' }, 'new TLS client certificate in use'),
  );
  const { shutdownTimeoutMs, exitWithParent } = config.lifecycle;
  const stepTimeoutMs = Math.max(1000, Math.floor(shutdownTimeoutMs / 3));
  // the handlers before the line that says we run: whoever reads it may signal us at once
  const stopped = untilStopped(
    async () => {
      await runStopSteps(
        [
          ['close the delivery queues', () => delivery.close()],
          ['stop watching the client certificate', async () => clientWatch.stop()],
          ['flush and close the store', () => store.close()],
          ['close outgoing connections', () => agents.destroy()],
        ],
        stepTimeoutMs,
        logger,
      );
    },
    { shutdownTimeoutMs, exitWithParent, logger, name: 'qtsp worker' },
  );
  process.stdout.write(
    `qtsp worker delivering: mediation records to ${config.mediation.url}, ` +
      `notifications via ${config.notification.smtpUrl}\n`,
  );
  return stopped;
}
