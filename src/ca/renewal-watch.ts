/**
 * A ceremony that renewed material marks it last (renewal.ts): a running instance then serves the renewed TSA,
 * OCSP responders and root CRL and reads the calendar again, without a restart. Polled (fs.watchFile). Every
 * calendar.checkIntervalSeconds (and at start) the issuing CA's responder certificate is renewed by the service
 * when due (responder-renewal.ts), written to this data directory and reloaded, and so is our S/MIME mail
 * certificate (notification/mail-certificate.ts). One reload at a time.
 * A rotated TLS client certificate (client.certFile) is presented from the next connection on.
 * Here beside the calendar: what lives in higher layers (trust services, readiness, journal, mail) is passed in.
 */
import { unwatchFile, watchFile, type Stats } from 'node:fs';
import type { Config } from '../config/schema.ts';
import { watchClientCertificate, type OutgoingAgents } from '../trust/agents.ts';
import type { Logger } from '../util/logger.ts';
import type { KeyedCertificate } from './authority.ts';
import type { CalendarWatch } from './calendar-watch.ts';
import { renewalMarkerFile, writeRenewedCertificate } from './renewal.ts';
import { renewedResponder, type CertificateRecords } from './responder-renewal.ts';

/** The served material as the watch needs it (trust-services.ts): read at each use, reload() replaces it. */
export interface ReloadablePki {
  readonly issuing: KeyedCertificate;
  readonly ocspResponderDer: Buffer;
  reload(): Promise<void>;
}

export interface RenewalWatchParts {
  readonly pki: ReloadablePki;
  readonly calendar: CalendarWatch;
  readonly agents: OutgoingAgents;
  /** where a renewed responder certificate is recorded (the composition root journals it where the journal is on) */
  readonly records: CertificateRecords;
  /** runs the readiness checks again (readiness.ts) */
  readonly refreshReadiness: () => Promise<void>;
  /** renews our S/MIME mail certificate when due (notification/mail-certificate.ts) */
  readonly renewMail: () => Promise<void>;
  readonly logger: Logger;
}

/** Starts watching and renewing; stop() ends the timer and both file watches. */
export function watchRenewals(config: Config, parts: RenewalWatchParts): { stop(): void } {
  const inTurn = oneAtATime();
  const file = renewalMarkerFile(config.dataDir);
  const reload = reloadMaterial(file, parts);
  const marker = watchMarker(file, config.calendar.reloadCheckSeconds, () => inTurn(reload));
  const client = watchClientCertificate(config, parts.agents, (outcome) => {
    if (!clientCertificateSwitched(outcome, parts.logger)) return;
    parts.calendar.reload();
    inTurn(parts.refreshReadiness);
  });
  const renewals = [
    ...(config.calendar.responderRenewDays > 0 ? [responderRenewal(config, parts, reload)] : []),
    ...(config.calendar.mailRenewDays > 0 ? [parts.renewMail] : []),
  ];
  const renewDue = () => {
    for (const renewal of renewals) inTurn(renewal);
  };
  const timer = setInterval(renewDue, config.calendar.checkIntervalSeconds * 1000);
  timer.unref();
  renewDue();
  return {
    stop: () => {
      clearInterval(timer);
      marker.stop();
      client.stop();
    },
  };
}

/** Runs each step after the one before has settled: one reload or renewal at a time. */
function oneAtATime(): (step: () => Promise<void>) => void {
  let last = Promise.resolve();
  return (step) => {
    last = last.then(step);
  };
}

/** Serves the renewed material, reads the calendar again and refreshes readiness; a failure is logged. */
function reloadMaterial(marker: string, parts: RenewalWatchParts): () => Promise<void> {
  const { logger } = parts;
  return async () => {
    try {
      await parts.pki.reload();
      parts.calendar.reload();
      await parts.refreshReadiness();
      logger.info({ event: 'pki.reloaded', marker }, 'renewed PKI material in use');
    } catch (err) {
      logger.error({ event: 'pki.reload_failed', error: (err as Error).message }, 'renewed PKI material not loaded');
    }
  };
}

/** Calls `changed` when a ceremony rewrites the renewal marker `file` (polled every `intervalSeconds`). */
function watchMarker(file: string, intervalSeconds: number, changed: () => void): { stop(): void } {
  const listener = (now: Stats, before: Stats) => {
    if (now.mtimeMs === before.mtimeMs && now.ino === before.ino) return;
    changed();
  };
  watchFile(file, { interval: intervalSeconds * 1000, persistent: false }, listener);
  return { stop: () => unwatchFile(file, listener) };
}

/** Logs the outcome of a client certificate rotation (trust/agents.ts); true when the new one is in use. */
function clientCertificateSwitched(outcome: { switched: true } | { error: Error }, logger: Logger): boolean {
  if ('error' in outcome) {
    logger.error(
      { event: 'tls.client_certificate_reload_failed', error: outcome.error.message },
      'TLS client certificate not switched',
    );
    return false;
  }
  logger.info({ event: 'tls.client_certificate_reloaded' }, 'new TLS client certificate in use toward the banks');
  return true;
}

/** The issuing CA's responder certificate renewed when due, written to the data directory and reloaded. */
function responderRenewal(config: Config, parts: RenewalWatchParts, reload: () => Promise<void>): () => Promise<void> {
  const { logger } = parts;
  return async () => {
    try {
      const { pki } = parts;
      const renewed = await renewedResponder(
        pki.ocspResponderDer,
        pki.issuing,
        parts.records,
        config.calendar.responderRenewDays,
        new Date(),
      );
      if (!renewed || renewed.equals(pki.ocspResponderDer)) return;
      writeRenewedCertificate(config.dataDir, 'ocsp-responder', renewed);
      logger.info({ event: 'pki.responder_renewed' }, "renewed the issuing CA's OCSP responder certificate");
      await reload();
    } catch (err) {
      logger.error({ event: 'pki.responder_renewal_failed', error: (err as Error).message }, 'responder not renewed');
    }
  };
}
