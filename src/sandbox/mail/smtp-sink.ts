/**
 * The sandbox's SMTP sink: the mail server of the banks' notification addresses (spec 6.3). It accepts any
 * recipient, offers STARTTLS with the sandbox TLS certificate (TLS 1.2+, spec 8), keeps every message as
 * received (raw bytes, for `openssl smime -verify`) and writes it to <dir>/<n>.eml for people running
 * `qtsp dev`. `controls.smtp` makes it refuse mail, temporarily or for good.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import type { ServerIdentity } from '../tls.ts';
import { urlHost } from '../../util/listen.ts';

/** SMTP sink (spec 6.3): accept; refuse every recipient with 451 (try later) or 550 (permanent) */
export interface SmtpControls {
  mode: 'normal' | 'reject-temporary' | 'reject-permanent';
}

export interface ReceivedMail {
  readonly from: string;
  readonly to: readonly string[];
  /** the message exactly as received (DATA, dot-unstuffed) */
  readonly raw: Buffer;
  readonly receivedAt: Date;
}

export interface SmtpSink {
  readonly host: string;
  readonly port: number;
  /** smtp://host:port (plain connection, upgraded with STARTTLS) */
  readonly url: string;
  messages(): readonly ReceivedMail[];
  clear(): void;
  close(): Promise<void>;
}

const MAX_MESSAGE_BYTES = 1024 * 1024;

/** An SMTP reply error: smtp-server sends responseCode and message to the client. */
function smtpError(code: number, message: string): Error {
  return Object.assign(new Error(message), { responseCode: code });
}

function readAll(stream: SMTPServerDataStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

export async function startSmtpSink(options: {
  host: string;
  port?: number;
  identity: ServerIdentity;
  dir: string;
  controls: SmtpControls;
}): Promise<SmtpSink> {
  const received: ReceivedMail[] = [];
  let saved = 0;
  mkdirSync(options.dir, { recursive: true });
  const server = new SMTPServer({
    key: readFileSync(options.identity.keyFile),
    cert: readFileSync(options.identity.certFile),
    minVersion: 'TLSv1.2',
    authOptional: true,
    disabledCommands: ['AUTH'],
    size: MAX_MESSAGE_BYTES,
    logger: false,
    onRcptTo(_address, _session, callback) {
      const mode = options.controls.mode;
      if (mode === 'reject-permanent')
        return callback(smtpError(550, 'mailbox unavailable (controls.smtp reject-permanent)'));
      if (mode === 'reject-temporary')
        return callback(smtpError(451, 'try again later (controls.smtp reject-temporary)'));
      callback();
    },
    onData(stream, session: SMTPServerSession, callback) {
      readAll(stream).then((raw) => {
        if (stream.sizeExceeded) return callback(smtpError(552, 'message too large'));
        const mail: ReceivedMail = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw,
          receivedAt: new Date(),
        };
        received.push(mail);
        writeFileSync(join(options.dir, `${String(++saved).padStart(5, '0')}.eml`), raw);
        callback();
      }, callback);
    },
  });
  server.on('error', () => undefined); // a client that drops the connection is not the sink's problem
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(options.port ?? 0, options.host, () => resolve());
  });
  const { port } = server.server.address() as AddressInfo;
  return {
    host: options.host,
    port,
    url: `smtp://${urlHost(options.host)}:${port}`,
    messages: () => [...received],
    clear: () => {
      received.length = 0;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
