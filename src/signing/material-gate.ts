/**
 * Never a signature that validators reject: while a certificate or CRL a signature depends on has ended
 * (ca/calendar.ts: the root, issuing CA, TSA, OCSP responders, root CRL, our TLS client certificate), or the
 * usage period of its key has (the TSU key, EN 319 421 7.6), signDoc answers 503 naming it. Checked before
 * anything else is done and again before signatures are returned, from the dates the calendar watch keeps (one
 * comparison while nothing has ended).
 */
import type { CalendarWatch } from '../ca/calendar-watch.ts';
import { deadlineOf, endedReason } from '../ca/calendar.ts';
import { SignDocError } from '../errors.ts';

export type MaterialCalendar = Pick<CalendarWatch, 'endedForSigning'>;

export function requireCurrentMaterial(calendar: MaterialCalendar): void {
  const ended = calendar.endedForSigning();
  if (ended.length === 0) return;
  const named = ended
    .map((e) => {
      const { at, what } = deadlineOf(e);
      return `${e.object} (${e.title}) ${what} ended ${at.toISOString()}`;
    })
    .join('; ');
  throw new SignDocError(
    'temporarily_unavailable',
    `the service does not sign until its material is renewed: ${named}; validators would reject the signature`,
    { detail: ended.map(endedReason).join('; ') },
  );
}
