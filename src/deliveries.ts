/**
 * What the QTSP delivers after a signature, plugged into delivery/ by outbox topic: mediation records to the
 * mediation service (spec 6.2, mediation/) and end-user notifications by mail (spec 6.3, notification/).
 * The one place that knows both topics; used by `qtsp serve`/`qtsp dev` (service.ts), `qtsp worker` and
 * `qtsp mediation status`.
 */
import { readFileSync } from 'node:fs';
import type { HttpAgent as Agent } from './util/http-client.ts';
import type { Config } from './config/schema.ts';
import { startDelivery, type Delivery } from './delivery/delivery.ts';
import type { Deliver } from './delivery/worker.ts';
import { mediationDeliverer } from './mediation/deliver.ts';
import { MEDIATION_TOPIC } from './mediation/record.ts';
import { notificationDeliverer, recipientCertDir } from './notification/deliver.ts';
import { mailCertificateChain, mailSigner } from './notification/mail-certificate.ts';
import { NOTIFICATION_TOPIC } from './notification/request.ts';
import type { Store } from './store/types.ts';
import type { IdpDirectory } from './trust/idp-directory.ts';
import type { Logger } from './util/logger.ts';

export const DELIVERY_TOPICS: readonly string[] = [MEDIATION_TOPIC, NOTIFICATION_TOPIC];

export interface DeliveriesDeps {
  readonly store: Store;
  /** presents our TLS client certificate (mediation service, spec 5.12) */
  readonly mtlsAgent: Agent;
  readonly idps: Pick<IdpDirectory, 'record'>;
  readonly logger: Logger;
  /** run the workers in this process */
  readonly workers: boolean;
  /** the outbox relay runs in another process, woken with this (delivery.ts) */
  readonly relayElsewhere?: () => void;
}

function handlers(config: Config, deps: DeliveriesDeps): Record<string, Deliver> {
  return {
    [MEDIATION_TOPIC]: mediationDeliverer({
      url: config.mediation.url,
      agent: deps.mtlsAgent,
      timeoutMs: config.delivery.timeoutMs,
      logger: deps.logger,
    }),
    [NOTIFICATION_TOPIC]: notificationDeliverer({
      smtpUrl: config.notification.smtpUrl,
      from: config.notification.from,
      spId: config.qtspId,
      ca: readFileSync(config.trust.caFile),
      timeoutMs: config.delivery.timeoutMs,
      signer: mailSigner(config.dataDir, config.notification.from),
      chain: mailCertificateChain(config.dataDir),
      recipientCertDir: recipientCertDir(config),
      idps: deps.idps,
    }),
  };
}

export function startDeliveries(config: Config, deps: DeliveriesDeps): Delivery {
  return startDelivery(config, {
    store: deps.store,
    logger: deps.logger,
    workers: deps.workers,
    topics: DELIVERY_TOPICS,
    handlers: () => handlers(config, deps),
    ...(deps.relayElsewhere ? { relayElsewhere: deps.relayElsewhere } : {}),
  });
}

/**
 * Only the outbox relay of both topics, no workers: a cluster's primary, which its workers wake
 * (cli/serve-cluster.ts).
 */
export function startOutboxRelay(config: Config, store: Store, logger: Logger): Delivery {
  return startDelivery(config, { store, logger, workers: false, topics: DELIVERY_TOPICS, handlers: () => ({}) });
}
