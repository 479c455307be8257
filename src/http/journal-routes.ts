/**
 * The journal's chain, published on the plain-HTTP publication listener so that others can keep it outside
 * our database (journal/anchor.ts, docs/evidence.md):
 *   GET /journal/batches?from=N&limit=M   the sealed batches from number N (default 1), at most M (default and
 *                                         at most 100): {batches, next}, next the link of the following page
 *                                         or null after the newest batch
 *   GET /journal/batches/{n}              one batch's record, the bytes of its file in the anchor repository
 *   GET /journal/batches.git/...          that repository, read-only over git's smart HTTP (clone, fetch)
 * The records carry roots and tokens only, no entry or personal data.
 */
import express, { type Request, type Response } from 'express';
import { anchorRecord, anchorText } from '../journal/anchor.ts';
import type { AnchorRepoPaths } from '../journal/anchor-repo.ts';
import type { Store } from '../store/types.ts';
import { gitHttpBackend } from './git-http-backend.ts';

export const JOURNAL_BATCHES_PATH = '/journal/batches';
const MAX_PAGE = 100;

const badRequest = (res: Response, description: string) =>
  res.status(400).json({ error: 'invalid_request', error_description: description });

/** a positive safe integer written in decimal, else undefined */
function positive(text: unknown): number | undefined {
  if (typeof text !== 'string' || !/^[1-9][0-9]{0,15}$/.test(text)) return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : undefined;
}

async function listing(store: Store, req: Request, res: Response): Promise<void> {
  const from = req.query['from'] === undefined ? 1 : positive(req.query['from']);
  const limit = req.query['limit'] === undefined ? MAX_PAGE : positive(req.query['limit']);
  if (from === undefined || limit === undefined || limit > MAX_PAGE) {
    badRequest(res, `from and limit are positive integers, limit at most ${MAX_PAGE}`);
    return;
  }
  const batches = await store.journal.batches(from, limit);
  const last = batches.at(-1);
  const next =
    batches.length === limit && last ? `${JOURNAL_BATCHES_PATH}?from=${last.batchNo + 1}&limit=${limit}` : null;
  res.set('cache-control', 'no-store').json({ batches: batches.map(anchorRecord), next });
}

async function oneBatch(store: Store, req: Request, res: Response): Promise<void> {
  const n = positive(req.params['n']);
  const [batch] = n === undefined ? [] : await store.journal.batches(n, 1);
  if (!batch || batch.batchNo !== n) {
    res.status(404).json({ error: 'not_found', error_description: 'no batch of this number is sealed' });
    return;
  }
  // a sealed batch never changes: its record may be kept by any cache
  res.set({ 'content-type': 'application/json', 'cache-control': 'public, max-age=86400' });
  res.send(anchorText(anchorRecord(batch)));
}

export function journalRouter(store: Store, repo: AnchorRepoPaths): express.Router {
  const router = express.Router();
  const backend = gitHttpBackend(repo.root);
  router.get(JOURNAL_BATCHES_PATH, (req, res) => listing(store, req, res));
  router.get(`${JOURNAL_BATCHES_PATH}/:n`, (req, res) => oneBatch(store, req, res));
  router.use('/journal', (req, res, next) => (req.path.startsWith(`/${repo.repoName}/`) ? backend(req, res) : next()));
  return router;
}
