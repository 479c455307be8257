/**
 * `qtsp notify --txn TXN --message-file FILE [--iss ISS]`: queue an end-user notification (spec 6.3) for the
 * user behind a transaction we signed under. The entry goes into the outbox of this data directory's store;
 * the running QTSP (or `qtsp worker`) relays and sends it. FILE holds the IDP's message, UTF-8 text.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/load.ts';
import { NotificationRequestError, requestNotification } from '../notification/request.ts';
import { openStore } from '../store/open.ts';

const USAGE = 'usage: qtsp notify --txn TXN --message-file FILE [--iss ISS]\n';

/**
 * The AS chooses txn values (the sandbox's are base64url, and one in 64 starts with '-'), so the word after
 * --txn is the txn whatever it starts with, unless it is a long option (then the txn is missing).
 */
function txnAsValue(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const next = args[i + 1];
    if (args[i] === '--txn' && next !== undefined && !next.startsWith('--')) {
      out.push(`--txn=${next}`);
      i++;
    } else out.push(args[i]!);
  }
  return out;
}

export async function runNotify(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args: txnAsValue(args),
    options: { txn: { type: 'string' }, 'message-file': { type: 'string' }, iss: { type: 'string' } },
  });
  if (!values.txn || !values['message-file']) {
    process.stderr.write(USAGE);
    return 2;
  }
  const message = readFileSync(values['message-file'], 'utf8');
  const store = await openStore(loadConfig());
  try {
    const { id } = await requestNotification(store, {
      txn: values.txn,
      message,
      ...(values.iss ? { iss: values.iss } : {}),
    });
    process.stdout.write(`notification ${id} queued for txn ${values.txn}\n`);
    return 0;
  } catch (err) {
    if (!(err instanceof NotificationRequestError)) throw err;
    process.stderr.write(`qtsp notify: ${err.description}\n`);
    return 1;
  } finally {
    await store.close();
  }
}
