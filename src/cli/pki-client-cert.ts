/**
 * `qtsp pki client-cert --rotate|--retire|--register` (ca/client-certificate.ts): our TLS client certificate
 * toward the banks, replaced in our SP record at the platform's directory. The directory is found as `qtsp sign`
 * finds the platform: --sp-directory, else trust.spDirectoryUrl when set (QTSP_TRUST_SP_DIRECTORY_URL), else
 * the running sandbox's endpoints.json in the data directory (--data-dir or QTSP_DATA_DIR, else ./data).
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  registerClientCertificate,
  retireOldClientCertificates,
  rotateClientCertificate,
  type ClientCertificateFiles,
  type RotationResult,
} from '../ca/client-certificate.ts';
import { envName } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { certificateFacts } from '../journal/ca-events.ts';
import type { JournalCaEvent } from './pki-rollover.ts';

export interface ClientCertFlags {
  readonly rotate: boolean;
  readonly retire: boolean;
  readonly register: boolean;
  readonly 'sp-directory'?: string | undefined;
  readonly 'credential-file'?: string | undefined;
}

/** What a running sandbox in the data directory says of the platform (endpoints.json), if one runs there. */
interface SandboxPlatform {
  readonly spDirectoryUrl?: string;
  readonly spRegistrationCredentialFile?: string;
}

function sandboxPlatform(dataDir: string): SandboxPlatform | undefined {
  const file = join(dataDir, 'sandbox', 'endpoints.json');
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as SandboxPlatform) : undefined;
}

/** The SP directory: the flag, the configured one, the sandbox's; else the message that none was found. */
function spDirectory(config: Config, flags: ClientCertFlags, sandbox: SandboxPlatform | undefined): string | Error {
  const configured = process.env[envName(['trust', 'spDirectoryUrl'])] ? config.trust.spDirectoryUrl : undefined;
  const url = flags['sp-directory'] ?? configured ?? sandbox?.spDirectoryUrl;
  if (url) return url;
  return new Error(
    `no SP directory: no running sandbox in ${config.dataDir} (sandbox/endpoints.json); pass --data-dir DIR ` +
      '(or QTSP_DATA_DIR) of the running `npm start`, or set trust.spDirectoryUrl (QTSP_TRUST_SP_DIRECTORY_URL) ' +
      'or --sp-directory URL to your platform',
  );
}

/** The registration credential our operator holds: --credential-file, else the sandbox's. */
function registrationCredential(flags: ClientCertFlags, sandbox: SandboxPlatform | undefined): string | Error {
  const file = flags['credential-file'] ?? sandbox?.spRegistrationCredentialFile;
  if (!file)
    return new Error(
      '--register needs --credential-file FILE: the registration credential the platform gave you at onboarding',
    );
  const credential = existsSync(file) ? readFileSync(file, 'utf8').trim() : '';
  return credential ? credential : new Error(`no registration credential in ${file}`);
}

/** The installed certificate journaled (docs/evidence.md), and what the operator does next. */
async function installed(config: Config, r: RotationResult, journal: JournalCaEvent, next: string): Promise<string> {
  const file = config.client.certFile;
  await journal(config, 'pki.client_certificate_rotated', {
    previousX5tS256: r.previous,
    ...certificateFacts('qtsp-client', new X509Certificate(readFileSync(file)).raw),
  });
  return (
    `registered ${r.current} (valid until ${r.notAfter.toISOString()}) and installed it as ${file}; ` +
    `instances switch within ${config.calendar.reloadCheckSeconds} s (log event ` +
    `tls.client_certificate_reloaded)${next}\n`
  );
}

/**
 * `--rotate`: a new TLS client certificate, registered in our SP record beside the current one and installed
 * as client.certFile (the instances switch within calendar.reloadCheckSeconds); `--retire`, once they have: the
 * record keeps the current certificate alone; `--register`, once the current one has expired: a new one
 * registered alone with the platform's registration credential, and installed.
 */
export async function clientCert(config: Config, flags: ClientCertFlags, journal: JournalCaEvent): Promise<number> {
  if ([flags.rotate, flags.retire, flags.register].filter(Boolean).length !== 1) {
    process.stderr.write('qtsp pki client-cert: give one of --rotate, --retire, --register\n');
    return 2;
  }
  try {
    const sandbox = sandboxPlatform(config.dataDir);
    const url = spDirectory(config, flags, sandbox);
    if (url instanceof Error) throw url;
    const files: ClientCertificateFiles = {
      qtspId: config.qtspId,
      certFile: config.client.certFile,
      keyFile: config.client.keyFile,
      caFile: config.trust.caFile,
      spDirectoryUrl: url,
      timeoutMs: config.trust.httpTimeoutMs,
    };
    if (flags.retire) {
      process.stdout.write(`our SP record registers ${await retireOldClientCertificates(files)} alone\n`);
      return 0;
    }
    if (flags.rotate) {
      const r = await rotateClientCertificate(files);
      const next = `, then run qtsp pki client-cert --retire (${r.previous} stays registered until then)`;
      process.stdout.write(await installed(config, r, journal, next));
      return 0;
    }
    const credential = registrationCredential(flags, sandbox);
    if (credential instanceof Error) throw credential;
    const r = await registerClientCertificate(files, credential);
    process.stdout.write(await installed(config, r, journal, `; ${r.previous} is no longer registered`));
    return 0;
  } catch (err) {
    process.stderr.write(`qtsp pki client-cert: ${(err as Error).message}\n`);
    return 1;
  }
}
