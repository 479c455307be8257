/**
 * Posting one mediation record to the mediation service (spec 6.2), authenticated with our TLS client
 * certificate (spec 5.12: the QTSP's technical account). A refused duplicate reference_id means the service
 * already holds the record (an earlier attempt got through, its answer was lost): that is delivered.
 */
import type { OutboxEntry } from '../store/types.ts';
import { httpRequest, jsonBody, type HttpAgent as Agent } from '../util/http-client.ts';
import type { Logger } from '../util/logger.ts';
import { PermanentDeliveryError, type Deliver } from '../delivery/worker.ts';

export interface MediationTarget {
  /** records endpoint */
  readonly url: string;
  /** presents our TLS client certificate */
  readonly agent: Agent;
  readonly timeoutMs: number;
  readonly logger: Logger;
}

/** 4xx that a retry cannot change: the record itself was refused */
const PERMANENT = new Set([400, 413, 415, 422]);

export function mediationDeliverer(target: MediationTarget): Deliver {
  return async (entry: OutboxEntry) => {
    const res = await httpRequest(target.url, {
      method: 'POST',
      agent: target.agent,
      timeoutMs: target.timeoutMs,
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(entry.payload),
    });
    if (res.status === 200 || res.status === 201) return;
    const body = jsonBody(res) as { error?: unknown; error_description?: unknown } | undefined;
    if (res.status === 409 && body?.error === 'duplicate_reference_id') {
      target.logger.info(
        { event: 'mediation.duplicate', id: entry.id },
        'the mediation service already holds this record; counted as delivered',
      );
      return;
    }
    const error = typeof body?.error === 'string' ? ` ${body.error}` : '';
    const description = typeof body?.error_description === 'string' ? `: ${body.error_description}` : '';
    const why = `the mediation service answered HTTP ${res.status}${error}${description}`;
    throw PERMANENT.has(res.status) ? new PermanentDeliveryError(why) : new Error(why);
  };
}
