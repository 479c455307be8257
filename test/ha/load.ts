/**
 * Relying parties signing in a loop through the load balancer while a failover happens, as the documentation
 * tells them to behave: one consent per document, and after a 503 the same SAD again once Retry-After has
 * passed (shortened here), until a 200 or a refusal. Every call is recorded.
 */
import { callSignDoc, type RpEndpoints } from '../../src/rp/flow.ts';
import { sha256b64 } from '../helpers/delivery.ts';
import { authorize, signDocBody } from '../helpers/signing.ts';

export interface Call {
  readonly rp: number;
  readonly startedAt: number;
  readonly endedAt: number;
  /** HTTP status, or 0 when no answer came (connection refused or cut) */
  readonly status: number;
  /** the AS transaction of the consent (x-transaction-id of an answer; one per consent) */
  readonly consent: number;
  readonly txn?: string;
  readonly retryAfter?: string;
  readonly signatures: number;
  readonly error?: string;
}

export interface Load {
  readonly calls: Call[];
  /** consents whose signatures were never returned (no 200 before the load stopped) */
  readonly unfinished: () => number;
  stop(): Promise<void>;
}

const RETRY_PAUSE_MS = 500;
const GIVE_UP_MS = 120_000;

/** `rps` relying-party loops, each signing one document per consent */
export function startLoad(endpoints: RpEndpoints, signDocUrl: string, rps: number, label: string): Load {
  const calls: Call[] = [];
  let running = true;
  let consents = 0;
  let open = 0;
  const loop = async (rp: number) => {
    while (running) {
      const consent = consents++;
      const hash = sha256b64(`${label} rp${rp} consent ${consent} ${Date.now()}`);
      // the sandbox bank is not under test: a consent it fails to give (a busy machine) is asked for again
      const auth = await authorize(endpoints, [{ hash, label: `document ${consent}` }]).catch(() => undefined);
      if (!auth) {
        await new Promise((r) => setTimeout(r, RETRY_PAUSE_MS));
        continue;
      }
      open++;
      const until = Date.now() + GIVE_UP_MS;
      for (;;) {
        const call = await signOnce(signDocUrl, endpoints, auth.accessToken, hash, rp, consent);
        calls.push(call);
        if (call.status !== 503 && call.status !== 0) break;
        if (Date.now() > until) return;
        await new Promise((r) => setTimeout(r, RETRY_PAUSE_MS));
      }
      open--;
    }
  };
  const loops = Array.from({ length: rps }, (_, rp) => loop(rp));
  return {
    calls,
    unfinished: () => open,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

async function signOnce(
  url: string,
  endpoints: RpEndpoints,
  sad: string,
  hash: string,
  rp: number,
  consent: number,
): Promise<Call> {
  const startedAt = Date.now();
  try {
    const res = await callSignDoc(url, endpoints, signDocBody(sad, [hash]), { timeoutMs: 90_000 });
    const body = res.body as { SignatureObject?: unknown[] };
    const txn = res.headers['x-transaction-id'];
    const retryAfter = res.headers['retry-after'];
    return {
      rp,
      consent,
      startedAt,
      endedAt: Date.now(),
      status: res.status,
      signatures: res.status === 200 && Array.isArray(body.SignatureObject) ? body.SignatureObject.length : 0,
      ...(typeof txn === 'string' ? { txn } : {}),
      ...(typeof retryAfter === 'string' ? { retryAfter } : {}),
    };
  } catch (err) {
    return { rp, consent, startedAt, endedAt: Date.now(), status: 0, signatures: 0, error: (err as Error).message };
  }
}
