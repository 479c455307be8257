/**
 * Structured JSON logs (pino). Tokens, keys and personal data are never passed to the logger; the redact
 * list is a second line of defence for fields that must never appear.
 */
import { pino } from 'pino';

export const logger = pino({
  level: process.env.QTSP_LOG_LEVEL ?? (process.env.NODE_ENV === 'test' ? 'silent' : 'info'),
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
});

export type Logger = typeof logger;
