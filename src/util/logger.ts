/**
 * Structured JSON logs (pino). Tokens, keys and personal data are never passed to the logger; the redact
 * list is a second line of defence for fields that must never appear.
 */
import { type LoggerOptions, pino } from 'pino';

/** what every logger of the service shares, whatever its level and destination */
export const LOG_OPTIONS = {
  base: { service: 'qtsp' },
  redact: {
    paths: [
      'SAD',
      '*.SAD',
      'token',
      '*.token',
      'access_token',
      '*.access_token',
      'privateKey',
      '*.privateKey',
      'verified_claims',
      '*.verified_claims',
      'sub',
      '*.sub',
    ],
    censor: '[redacted]',
  },
} satisfies LoggerOptions;

export const logger = pino({
  ...LOG_OPTIONS,
  level: process.env.QTSP_LOG_LEVEL ?? (process.env.NODE_ENV === 'test' ? 'silent' : 'info'),
});

export type Logger = typeof logger;
