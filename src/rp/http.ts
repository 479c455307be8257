/**
 * HTTPS for the relying party's backend: one agent that trusts the ecosystem's TLS CA and presents the
 * RP's self-signed client certificate (spec 5.1), and errors that name the flow step and carry the
 * server's error / error_description.
 */
import { readFileSync } from 'node:fs';
import { jsonBody, tlsAgent, type HttpAgent, type HttpResponse } from '../util/http-client.ts';

export interface RpTlsFiles {
  tlsCaFile: string;
  rp: { certFile: string; keyFile: string };
}

/** Keep-alive agent for one flow; destroy it when done. Certificates are always verified. */
export function rpAgent(e: RpTlsFiles): HttpAgent {
  return tlsAgent({
    ca: readFileSync(e.tlsCaFile),
    cert: readFileSync(e.rp.certFile),
    key: readFileSync(e.rp.keyFile),
  });
}

export class RpFlowError extends Error {
  override name = 'RpFlowError';
  constructor(
    readonly step: string,
    message: string,
    readonly status?: number,
    readonly error?: string,
    readonly errorDescription?: string,
  ) {
    super(`${step}: ${message}`);
  }
}

function errorFields(body: unknown): { error?: string; error_description?: string } {
  if (!body || typeof body !== 'object') return {};
  const b = body as Record<string, unknown>;
  return {
    ...(typeof b['error'] === 'string' ? { error: b['error'] } : {}),
    ...(typeof b['error_description'] === 'string' ? { error_description: b['error_description'] } : {}),
  };
}

/** An unexpected HTTP answer as an error with the server's OAuth error fields. */
export function httpFailure(step: string, res: HttpResponse): RpFlowError {
  const { error, error_description } = errorFields(jsonBody(res));
  const detail = error
    ? `${error}${error_description ? `: ${error_description}` : ''}`
    : 'no OAuth error in the answer';
  return new RpFlowError(step, `HTTP ${res.status} ${detail}`, res.status, error, error_description);
}

/** The JSON object of a response with the expected status, or an RpFlowError. */
export function expectJsonObject(step: string, res: HttpResponse, status: number): Record<string, unknown> {
  if (res.status !== status) throw httpFailure(step, res);
  const body = jsonBody(res);
  if (!body || typeof body !== 'object' || Array.isArray(body))
    throw new RpFlowError(step, `HTTP ${res.status} without a JSON object`, res.status);
  return body as Record<string, unknown>;
}

export function formBody(params: Record<string, string | undefined>): string {
  const form = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined) form.append(key, value);
  return form.toString();
}

export const FORM_HEADERS = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
