/**
 * `qtsp worker`: the delivery process on its own (DESIGN step 10): relays the outbox to the queues and runs
 * the workers that post mediation records (spec 6.2) and send end-user notifications (6.3). Configured like
 * `qtsp serve` (QTSP_* variables); Redis from redis.url, REDIS_URL, or the local one of a running `qtsp dev`
 * on the same data directory. Run it beside QTSP instances started with QTSP_DELIVERY_IN_PROCESS_WORKER=false.
 */
import { loadConfig, ConfigError } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { startDelivery } from '../mediation/delivery.ts';
import { openStore } from '../store/open.ts';
import { createOutgoingAgents } from '../trust/agents.ts';
import { IdpDirectory } from '../trust/idp-directory.ts';
import { logger } from '../util/logger.ts';
import { knownRedisUrl } from '../util/redis-server.ts';

/** The configuration with redis.url resolved, or a ConfigError saying how to give one. */
export function withRedis(config: Config, env: NodeJS.ProcessEnv = process.env): Config {
  const url = knownRedisUrl(config.redis.url, env, config.dataDir);
  if (!url) throw new ConfigError('setting redis.url (QTSP_REDIS_URL): no Redis known; set it or REDIS_URL, or start `qtsp dev` on this data directory first');
  return { ...config, redis: { ...config.redis, url } };
}

function untilSignal(stop: () => Promise<void>): Promise<number> {
  return new Promise((resolve) => {
    const handler = (signal: string) => {
      process.stdout.write(`${signal}: stopping\n`);
      stop().then(() => resolve(0), () => resolve(1));
    };
    process.once('SIGINT', handler);
    process.once('SIGTERM', handler);
  });
}

export async function runWorker(_args: string[]): Promise<number> {
  const config = withRedis(loadConfig());
  const store = await openStore(config);
  const agents = createOutgoingAgents(config);
  const idps = new IdpDirectory({
    url: config.trust.idpDirectoryUrl,
    agent: agents.plain,
    ttlMs: config.trust.idpCacheTtlSeconds * 1000,
    maxStaleMs: config.trust.idpMaxStaleSeconds * 1000,
    timeoutMs: config.trust.httpTimeoutMs,
  });
  const delivery = startDelivery(config, { store, mtlsAgent: agents.mtls, idps, logger, workers: true });
  process.stdout.write(`qtsp worker delivering: mediation records to ${config.mediation.url}, notifications via ${config.notification.smtpUrl}\n`);
  return untilSignal(async () => {
    await delivery.close();
    await store.close();
    agents.destroy();
  });
}
