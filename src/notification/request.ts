/**
 * Queuing an end-user notification (spec 6.3): for a txn we signed under, the iss and sub kept from its
 * introspection (step 1) and the IDP's message go into the outbox (topic notification); the relay and a
 * worker deliver it. Used by `qtsp notify` and by POST /admin/v1/notifications.
 */
import { randomUUID } from 'node:crypto';
import type { Store } from '../store/types.ts';
import type { NotificationPayload } from './compose.ts';

export const NOTIFICATION_TOPIC = 'notification';
export const MAX_MESSAGE_CHARS = 10_000;

export class NotificationRequestError extends Error {
  override name = 'NotificationRequestError';
  constructor(
    readonly status: number,
    readonly error: string,
    readonly description: string,
  ) {
    super(`${error}: ${description}`);
  }
}

const invalid = (description: string) => new NotificationRequestError(400, 'invalid_request', description);

export interface NotificationRequest {
  readonly txn: unknown;
  readonly message: unknown;
  /** needed only when two IDPs used the same txn value */
  readonly iss?: unknown;
}

function checkMessage(message: unknown): string {
  if (typeof message !== 'string' || message.trim() === '') throw invalid('message must be a non-empty string');
  if (message.length > MAX_MESSAGE_CHARS) throw invalid(`message must not exceed ${MAX_MESSAGE_CHARS} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/.test(message))
    throw invalid('message must not contain control characters other than tab and line breaks');
  return message;
}

/** iss and sub of the introspections recorded for this txn (spec 6.3 step 1). */
async function subjectOf(store: Store, txn: string, iss: unknown): Promise<{ iss: string; sub: string }> {
  const rows = await store.getTransaction(txn);
  const candidates = new Map(
    rows
      .filter((r) => iss === undefined || r.iss === iss)
      .map((r) => [`${r.iss}\n${r.sub}`, { iss: r.iss, sub: r.sub }]),
  );
  if (candidates.size === 0)
    throw new NotificationRequestError(
      404,
      'unknown_transaction',
      `no signature was created under txn ${txn}${iss === undefined ? '' : ' at this iss'}`,
    );
  if (candidates.size > 1)
    throw new NotificationRequestError(409, 'ambiguous_transaction', 'several IDPs used this txn; give iss as well');
  return [...candidates.values()][0]!;
}

/** Validates, looks up iss and sub, and writes the outbox entry; returns its id. */
export async function requestNotification(
  store: Store,
  request: NotificationRequest,
  now = new Date(),
): Promise<{ id: string }> {
  const { txn, iss } = request;
  if (typeof txn !== 'string' || txn === '' || txn.length > 500) throw invalid('txn must be a non-empty string');
  if (iss !== undefined && (typeof iss !== 'string' || iss === ''))
    throw invalid('iss, when given, must be a non-empty string');
  const message = checkMessage(request.message);
  const subject = await subjectOf(store, txn, iss);
  const payload: NotificationPayload = {
    txn,
    iss: subject.iss,
    sub: subject.sub,
    message,
    requestedAt: now.toISOString(),
  };
  const id = `ntf-${randomUUID()}`;
  await store.addOutbox([{ id, topic: NOTIFICATION_TOPIC, payload }]);
  return { id };
}
