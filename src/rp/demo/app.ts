/**
 * The demo relying party in a browser: upload a file and choose format and level (GET /, POST /sign), choose
 * the bank at the platform's account chooser (spec 2.1, 4.1; back at /bank-chosen), log in and consent at
 * the bank (PAR without the headless switch; back at /callback, spec 6.1), then signDoc, the result files and
 * an independent validator's verdict (/result/:id, /download/:id/:kind).
 *
 * Every state (the chooser's and the OAuth one) is a random value kept in the browser's session and good for
 * one redirect; the session is found through an HttpOnly cookie only (spec 2.1 state, 5.11). Documents stay in
 * memory, limited in size and time; neither documents nor tokens are logged.
 */
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { OFFERED } from '../../ades/offer.ts';
import type { ConformanceLevel } from '../../ades/formats.ts';
import { cookieValue } from '../../util/cookies.ts';
import type { Logger } from '../../util/logger.ts';
import {
  finishInteractiveSigning,
  type InteractiveStart,
  RpFlowError,
  type RpEndpoints,
  startInteractiveSigning,
} from '../flow.ts';
import { PdfFormatError } from '../pdf.ts';
import { randomValue } from '../pkce.ts';
import { sendCancelled, sendError, sendHandOver, sendResult, sendStoppedAtBank, sendUploadPage } from './pages.ts';
import { type BoundedMap, type DemoSession, DemoSessions, type DocumentChoice } from './sessions.ts';
import { completeSigning, documentDigests } from './signing.ts';
import { readUploadForm, tooLarge, UploadError } from './upload.ts';
import type { VerifierFiles } from './verify.ts';

export interface DemoRpOptions {
  /** the platform, the default bank, the CA bundle and this RP's client registration (redirect URI: /callback) */
  readonly endpoints: RpEndpoints;
  /** `${platformUrl}/account-chooser/` (spec 4.1) */
  readonly accountChooserUrl: string;
  readonly verifier: VerifierFiles;
  /** largest document accepted; default 10 MB */
  readonly maxUploadBytes?: number;
  /** idle lifetime of a browser session and its documents; default 30 minutes */
  readonly sessionTtlMs?: number;
  /** browser sessions kept at most (default 200); when all are live, a new signing gets a 503 page */
  readonly maxSessions?: number;
  /** sessions one client address keeps at most (default 20); its own oldest gives way */
  readonly maxSessionsPerClient?: number;
  /** documents and result files all sessions together keep at most (default 256 MB); beyond, a 503 page */
  readonly maxKeptBytes?: number;
  readonly logger?: Logger;
}

export const SESSION_COOKIE = '__Host-qtsp-demo-rp';
const DEFAULT_MAX_UPLOAD = 10 * 1024 * 1024;
const DEFAULT_MAX_KEPT = 256 * 1024 * 1024;

interface Demo {
  readonly o: DemoRpOptions;
  readonly sessions: DemoSessions;
  readonly maxUpload: number;
  readonly maxKept: number;
  /** the origins the upload form's post is redirected to (the account chooser) */
  readonly formTargets: readonly string[];
}

/**
 * The browser's session, or a new one with its cookie (HttpOnly, Secure, SameSite=Lax: sent on redirects back);
 * undefined when every place is taken by live sessions of others. Made only when a signing starts.
 */
function session(demo: Demo, req: Request, res: Response): DemoSession | undefined {
  const found = demo.sessions.find(cookieValue(req, SESSION_COOKIE));
  if (found) return found;
  const created = demo.sessions.create(req.socket.remoteAddress ?? '');
  if (created) res.cookie(SESSION_COOKIE, created.id, { httpOnly: true, secure: true, sameSite: 'lax', path: '/' });
  return created;
}

/**
 * Whether the form was posted by a page of another origin (a cross-site page auto-submitting our form): the
 * browser says so in Sec-Fetch-Site, or else in Origin. A client that sends neither is no browser, and no
 * browser's cookie can be ridden with it.
 */
function postedFromElsewhere(req: Request): boolean {
  const site = req.get('sec-fetch-site');
  if (site !== undefined) return site !== 'same-origin';
  const origin = req.get('origin');
  return origin !== undefined && origin !== `https://${req.get('host') ?? ''}`;
}

const BUSY = 'The demo is busy: too many documents are waiting for their banks. Please try again in a few minutes.';

const maxMb = (demo: Demo) => String(Math.round((demo.maxUpload / (1024 * 1024)) * 10) / 10);

/** The chooser URL for this session (spec 2.1): state bound to the document, return_bic, prompt when asked. */
function chooserUrl(demo: Demo, s: DemoSession, choice: DocumentChoice, prompt?: 'select_account'): string {
  const state = randomValue();
  s.chooser.set(state, choice);
  const url = new URL(demo.o.accountChooserUrl);
  url.searchParams.set('client_id', demo.o.endpoints.rp.clientId);
  url.searchParams.set('state', state);
  url.searchParams.set('return_bic', 'true');
  if (prompt) url.searchParams.set('prompt', prompt);
  return url.toString();
}

/** The form's choice checked against what the QTSP offers (src/ades/offer.ts), or the message for the person. */
async function readChoice(demo: Demo, req: Request): Promise<DocumentChoice | string> {
  const form = await readUploadForm(req, demo.maxUpload);
  const document = form.get('document');
  const format = String(form.get('format') ?? '');
  const level = String(form.get('level') ?? '');
  if (!(document instanceof File) || document.name === '') return 'Choose a file to sign.';
  if (document.size > demo.maxUpload) throw tooLarge(demo.maxUpload);
  if (format !== 'C' && format !== 'X' && format !== 'P') return 'Choose CAdES, XAdES or PAdES.';
  if (!OFFERED[format].includes(level as ConformanceLevel))
    return `This format is offered at ${OFFERED[format].map((l) => l.replace('AdES-', '')).join(', ')}.`;
  const bytes = Buffer.from(await document.arrayBuffer());
  if (document.size === 0) return 'The file is empty.';
  if (format === 'P' && !bytes.subarray(0, 1024).includes('%PDF-'))
    return 'PAdES signs PDF files: this file is not a PDF. Choose CAdES or XAdES for other files.';
  return { fileName: document.name, bytes, format, level };
}

function queryOf(req: Request): URLSearchParams {
  return new URL(req.originalUrl, 'https://demo.invalid').searchParams;
}

/**
 * A redirect back to us (spec 2.1 state, 6.1): the cookie's session and the entry of one of its stores that the
 * query's state names, taken out so that it serves one redirect only; undefined when either is unknown.
 */
function takeByState<T>(
  demo: Demo,
  req: Request,
  store: (s: DemoSession) => BoundedMap<T>,
): { q: URLSearchParams; s: DemoSession; entry: T } | undefined {
  const q = queryOf(req);
  const s = demo.sessions.find(cookieValue(req, SESSION_COOKIE));
  const state = q.get('state');
  const entry = s && state ? store(s).take(state) : undefined;
  return s && entry ? { q, s, entry } : undefined;
}

/** The form's choice, or undefined once the form page with the error (or the busy page) has been sent. */
async function acceptedChoice(demo: Demo, req: Request, res: Response): Promise<DocumentChoice | undefined> {
  const page = { maxMb: maxMb(demo), formTargets: demo.formTargets };
  let choice: DocumentChoice | string;
  try {
    choice = await readChoice(demo, req);
  } catch (err) {
    if (!(err instanceof UploadError)) throw err;
    sendUploadPage(res, { ...page, status: err.status, error: err.message });
    return undefined;
  }
  if (typeof choice === 'string') {
    sendUploadPage(res, { ...page, status: 400, error: choice });
    return undefined;
  }
  if (demo.sessions.keptBytes() + choice.bytes.length > demo.maxKept) {
    sendError(res, 503, 'The demo is busy', BUSY);
    return undefined;
  }
  return choice;
}

async function postSign(demo: Demo, req: Request, res: Response): Promise<void> {
  if (postedFromElsewhere(req)) {
    req.resume();
    return sendError(res, 403, 'Not signed', 'This form was sent from another site. Nothing was signed.');
  }
  const choice = await acceptedChoice(demo, req, res);
  if (!choice) return;
  const s = session(demo, req, res);
  if (!s) return sendError(res, 503, 'The demo is busy', BUSY);
  demo.o.logger?.info(
    { event: 'demo_rp.upload', format: choice.format, level: choice.level, bytes: choice.bytes.length },
    'demo RP: document uploaded, on to the account chooser',
  );
  res.redirect(303, chooserUrl(demo, s, choice));
}

/**
 * Spec 4.2: the platform's service configuration refuses an issuer it does not know (400 not a URL, 404 no
 * such IDP) or an inactive one (423). That is a wrong selection, not a failed signing: what to tell the person.
 */
function refusedIssuer(err: unknown, issuer: string): { title: string; message: string } | undefined {
  if (!(err instanceof RpFlowError) || err.step !== 'service configuration') return undefined;
  if (err.status === 400 || err.status === 404)
    return { title: 'Unknown bank', message: `The platform knows no bank at ${issuer}. Nothing was signed.` };
  if (err.status === 423)
    return { title: 'Bank not active', message: `The bank at ${issuer} is not active. Nothing was signed.` };
  return undefined;
}

/** Spec 2.1, 6.1: the account chooser's redirect: issuer_url (and selected_bic) or error, with our state. */
async function bankChosen(demo: Demo, req: Request, res: Response): Promise<void> {
  const taken = takeByState(demo, req, (s) => s.chooser);
  if (!taken)
    return sendError(
      res,
      400,
      'Unknown bank selection',
      'This bank selection does not belong to a signing started in this browser, or it was used already.',
    );
  const { q, s, entry: choice } = taken;
  const error = q.get('error');
  if (error === 'canceled') return sendCancelled(res, 'at the bank selection');
  if (error)
    return sendError(
      res,
      400,
      'No bank selected',
      `The account chooser answered ${error}.`,
      q.get('error_description') ?? undefined,
    );
  const issuer = q.get('issuer_url');
  if (!issuer) return sendError(res, 400, 'No bank selected', 'The account chooser named no bank (issuer_url).');
  const d = await documentDigests(choice);
  let start: InteractiveStart;
  try {
    start = await startInteractiveSigning(demo.o.endpoints, issuer, {
      documentDigests: d.digests,
      hashAlgorithmOID: d.hashAlgorithmOID,
    });
  } catch (err) {
    const refused = refusedIssuer(err, issuer);
    if (refused) return sendError(res, 400, refused.title, refused.message, (err as Error).message);
    throw err;
  }
  s.pending.set(start.pending.state, { choice, authorization: start.pending, ...(d.pades ? { pades: d.pades } : {}) });
  const bic = q.get('selected_bic');
  sendHandOver(res, {
    title: 'On to your bank',
    text: `Your bank${bic ? ` (BIC ${bic})` : ''} asks you to log in and to consent to the signature.`,
    url: start.authorizationUrl,
    link: 'Continue to your bank',
  });
}

/** Spec 7.3: what each authorization error means to the person. */
function sendBankError(demo: Demo, s: DemoSession, res: Response, choice: DocumentChoice, err: RpFlowError): void {
  switch (err.error) {
    case 'access_denied':
      sendStoppedAtBank(res, err.errorDescription);
      return;
    case 'account_selection_requested':
      // no error message: straight back to the chooser, which must ask again (prompt=select_account)
      sendHandOver(res, {
        title: 'Choose your bank',
        text: 'Taking you to the bank selection.',
        url: chooserUrl(demo, s, choice, 'select_account'),
        link: 'Choose your bank',
      });
      return;
    case 'unable_to_meet_service_requirements':
      sendError(
        res,
        400,
        'Your bank cannot vouch for this signature',
        'Your bank does not hold the identity data this signature needs. Nothing was shared with us or the QTSP.',
        err.errorDescription,
      );
      return;
    default:
      sendError(res, 400, 'The bank refused', `Your bank answered ${err.error}.`, err.errorDescription);
  }
}

/** Spec 5.11, 6.1: the bank's redirect. Unknown or used state: nothing happens, signDoc least of all. */
async function callback(demo: Demo, req: Request, res: Response): Promise<void> {
  const taken = takeByState(demo, req, (s) => s.pending);
  if (!taken)
    return sendError(
      res,
      400,
      'Unknown or used answer from the bank',
      'This answer does not belong to a signing started in this browser, or it was used already. Nothing was signed.',
    );
  const { q, s, entry: pending } = taken;
  if (q.get('iss') !== pending.authorization.metadata.issuer)
    return sendError(
      res,
      400,
      'Answer from another bank',
      'This answer names another bank than the one the signing was started with. Nothing was signed.',
    );
  let auth: Awaited<ReturnType<typeof finishInteractiveSigning>>;
  try {
    auth = await finishInteractiveSigning(demo.o.endpoints, pending.authorization, q);
  } catch (err) {
    if (err instanceof RpFlowError && err.error) return sendBankError(demo, s, res, pending.choice, err);
    throw err;
  }
  const result = await completeSigning(demo.o.endpoints, pending, auth, demo.o.verifier);
  const id = randomValue();
  s.results.set(id, result);
  demo.o.logger?.info(
    {
      event: 'demo_rp.signed',
      format: result.format,
      level: result.level,
      txn: result.txn,
      verified: result.verdict.passed,
    },
    'demo RP: signed and verified',
  );
  res.redirect(303, `/result/${encodeURIComponent(id)}`);
}

function resultOf(demo: Demo, req: Request) {
  const s = demo.sessions.find(cookieValue(req, SESSION_COOKIE));
  return s?.results.get(String(req.params['id']));
}

function download(demo: Demo, req: Request, res: Response): void {
  const downloads = resultOf(demo, req)?.downloads;
  const kind = String(req.params['kind']);
  // own entries only: a name such as constructor or __proto__ is no download
  const file = downloads && Object.hasOwn(downloads, kind) ? downloads[kind] : undefined;
  if (!file) {
    sendError(res, 404, 'Not found', 'No such file in this browser session (it may have expired).');
    return;
  }
  res
    .status(200)
    .attachment(file.name)
    .set({ 'Content-Type': file.contentType, 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' })
    .send(file.bytes);
}

/** Failures of a step: the person gets a page that says which step failed, the log gets no document or token. */
function failure(demo: Demo) {
  return (err: unknown, _req: Request, res: Response, _next: NextFunction): void => {
    const step = err instanceof RpFlowError ? err.step : 'demo';
    demo.o.logger?.warn({ event: 'demo_rp.failed', step, err: (err as Error)?.message }, 'demo RP: signing failed');
    if (res.headersSent) return;
    if (err instanceof RpFlowError)
      sendError(res, 502, 'The signing failed', `The step "${err.step}" failed.`, err.message);
    else if (err instanceof PdfFormatError) sendError(res, 400, 'This PDF cannot be signed', err.message);
    else sendError(res, 500, 'The signing failed', 'Something went wrong in the demo relying party.');
  };
}

const wrap =
  (demo: Demo, fn: (demo: Demo, req: Request, res: Response) => unknown) =>
  async (req: Request, res: Response): Promise<void> => {
    await fn(demo, req, res);
  };

export function demoRpApp(o: DemoRpOptions): Express {
  const demo: Demo = {
    o,
    sessions: new DemoSessions({
      ttlMs: o.sessionTtlMs ?? 30 * 60_000,
      maxSessions: o.maxSessions ?? 200,
      maxPerClient: o.maxSessionsPerClient ?? 20,
    }),
    maxUpload: o.maxUploadBytes ?? DEFAULT_MAX_UPLOAD,
    maxKept: o.maxKeptBytes ?? DEFAULT_MAX_KEPT,
    formTargets: [new URL(o.accountChooserUrl).origin],
  };
  const app = express();
  app.disable('x-powered-by');
  // no session for a visit: one is made when a signing starts, so visits cannot crowd out others' sessions
  app.get('/', (_req, res) => {
    sendUploadPage(res, { maxMb: maxMb(demo), formTargets: demo.formTargets });
  });
  app.post('/sign', wrap(demo, postSign));
  app.get('/bank-chosen', wrap(demo, bankChosen));
  app.get('/callback', wrap(demo, callback));
  app.get('/result/:id', (req, res) => {
    const result = resultOf(demo, req);
    if (!result)
      return sendError(res, 404, 'Not found', 'No such result in this browser session (it may have expired).');
    sendResult(res, String(req.params['id']), result);
  });
  app.get('/download/:id/:kind', wrap(demo, download));
  app.use((_req: Request, res: Response) => sendError(res, 404, 'Not found', 'There is no such page.'));
  app.use(failure(demo));
  return app;
}
