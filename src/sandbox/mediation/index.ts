/**
 * The sandbox's delivery targets of the QTSP's events (spec 6): the mediation service (6.2), HTTPS with
 * client certificates on its own port, and the SMTP sink behind the banks' notification addresses (6.3).
 */
import { join } from 'node:path';
import { startSmtpSink, type SmtpSink } from '../mail/smtp-sink.ts';
import type { PlatformDirectory } from '../platform/directory.ts';
import { TlsServer, type ServerIdentity } from '../tls.ts';
import type { SandboxControls } from '../types.ts';
import { mediationApp, RECORDS_PATH } from './app.ts';
import { RecordStore, type StoredRecord } from './records.ts';

export const DEFAULT_MEDIATION_PORT = 8443;
export const DEFAULT_SMTP_PORT = 2525;

export interface EventParties {
  readonly mediationUrl: string;
  readonly mediation: { records(): readonly StoredRecord[]; readonly requests: number; clear(): void };
  readonly smtp: SmtpSink;
  close(): Promise<void>;
}

export interface EventPartiesOptions {
  readonly host: string;
  /** the host as it goes into URLs (IPv6 in brackets) */
  readonly publicHost: string;
  readonly mediationPort?: number;
  readonly smtpPort?: number;
  /** server certificate of both (issued by the sandbox TLS CA) */
  readonly identity: ServerIdentity;
  readonly directory: PlatformDirectory;
  readonly controls: SandboxControls;
  /** <dataDir>/sandbox: received mail goes to <dir>/mail/ */
  readonly dir: string;
}

export async function startEventParties(o: EventPartiesOptions): Promise<EventParties> {
  const records = new RecordStore();
  const stats = { requests: 0 };
  const server = new TlsServer(
    o.identity,
    mediationApp({ records, controls: o.controls.mediation, directory: o.directory, stats }),
    true,
  );
  const port = await server.listen(o.host, o.mediationPort ?? DEFAULT_MEDIATION_PORT);
  let smtp: SmtpSink;
  try {
    smtp = await startSmtpSink({
      host: o.host,
      port: o.smtpPort ?? DEFAULT_SMTP_PORT,
      identity: o.identity,
      dir: join(o.dir, 'mail'),
      controls: o.controls.smtp,
    });
  } catch (err) {
    await server.close();
    throw err;
  }
  return {
    mediationUrl: `https://${o.publicHost}:${port}${RECORDS_PATH}`,
    mediation: {
      records: () => records.all(),
      get requests() {
        return stats.requests;
      },
      clear: () => records.clear(),
    },
    smtp,
    close: async () => {
      await Promise.all([server.close(), smtp.close()]);
    },
  };
}
