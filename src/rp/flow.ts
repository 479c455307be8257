/**
 * The relying party's side of the signing flow (spec 1.2), run from its backend: service configuration
 * (2.2) -> AS metadata (2.3) -> PAR with PKCE S256 and state over mTLS (2.4, 2.8) -> authorization
 * endpoint, redirect not followed, state and iss checked (5.11) -> token over mTLS (2.9). Then callSignDoc
 * posts to the QTSP (4.5). Used by `qtsp sign` and the integration tests. Nothing secret is passed to onStep.
 *
 * Two ways through the authorization: headless (authorizeSigning: the sandbox bank consents at once, the RP
 * reads the redirect itself) and interactive (startInteractiveSigning hands the authorization URL to a
 * browser; finishInteractiveSigning takes the parameters of the redirect to the RP's callback). Both run the
 * same steps below.
 */
import { httpRequest, jsonBody, type HttpResponse, type HttpAgent as Agent } from '../util/http-client.ts';
import { expectJsonObject, FORM_HEADERS, formBody, httpFailure, rpAgent, RpFlowError } from './http.ts';
import { createPkce, randomValue, type Pkce } from './pkce.ts';

export { RpFlowError } from './http.ts';

export interface RpEndpoints {
  serviceConfigurationUrl: string;
  issuer: string;
  tlsCaFile: string;
  rp: { clientId: string; certFile: string; keyFile: string; redirectUri: string };
}

export interface AuthorizeResult {
  accessToken: string;
  authorizationDetails: unknown[];
  qtsp: { qtsp_id: string; signDoc: string };
}

export interface SigningRequest {
  documentDigests: { hash: string; label: string }[];
  hashAlgorithmOID: string;
  identityAssuranceClaims?: Record<string, null | { essential: true }>;
  onStep?: (msg: string) => void;
  /** PKCE S256 (default); false sends a nonce instead (spec 2.4) */
  usePkce?: boolean;
  /**
   * Stop after PAR and leave the consent to the bank's page in a browser (no sandbox_consent=auto):
   * authorizeSigning then answers what startInteractiveSigning does.
   */
  interactive?: boolean;
}

const STEP_TIMEOUT_MS = 10_000;
/** spec 4.5, 8: the RP waits at least 60 s for signDoc */
const SIGN_DOC_TIMEOUT_MS = 60_000;

export interface AsMetadata {
  issuer: string;
  pushed_authorization_request_endpoint: string;
  authorization_endpoint: string;
  token_endpoint: string;
}

interface FlowContext {
  readonly e: RpEndpoints;
  readonly agent: Agent;
  readonly step: (msg: string) => void;
}

function get(ctx: FlowContext, url: string | URL): Promise<HttpResponse> {
  return httpRequest(url, { agent: ctx.agent, timeoutMs: STEP_TIMEOUT_MS, headers: { accept: 'application/json' } });
}

function postForm(ctx: FlowContext, url: string, params: Record<string, string | undefined>): Promise<HttpResponse> {
  return httpRequest(url, {
    method: 'POST',
    agent: ctx.agent,
    timeoutMs: STEP_TIMEOUT_MS,
    headers: FORM_HEADERS,
    body: formBody(params),
  });
}

function requireString(step: string, body: Record<string, unknown>, name: string): string {
  const value = body[name];
  if (typeof value !== 'string' || value === '') throw new RpFlowError(step, `answer lacks ${name}`);
  return value;
}

/** Spec 2.2: identity.iss and the first QTSP of remote_signature_creation. */
async function serviceConfiguration(
  ctx: FlowContext,
  issuer: string,
): Promise<{ iss: string; qtsp: { qtsp_id: string; signDoc: string } }> {
  const step = 'service configuration';
  const url = new URL(ctx.e.serviceConfigurationUrl);
  url.searchParams.set('iss', issuer);
  const body = expectJsonObject(step, await get(ctx, url), 200);
  const iss = (body['identity'] as { iss?: unknown } | undefined)?.iss;
  if (typeof iss !== 'string' || iss === '') throw new RpFlowError(step, 'answer lacks identity.iss');
  const first = (body['remote_signature_creation'] as unknown[] | undefined)?.[0] as
    | Record<string, unknown>
    | undefined;
  if (!first) throw new RpFlowError(step, 'the bank offers no remote signature creation');
  const qtsp = { qtsp_id: requireString(step, first, 'qtsp_id'), signDoc: requireString(step, first, 'signDoc') };
  ctx.step(`service configuration: issuer ${iss}, QTSP ${qtsp.qtsp_id}`);
  return { iss, qtsp };
}

/** Spec 2.3: the metadata's issuer must equal the issuer from the service configuration. */
async function asMetadata(ctx: FlowContext, iss: string): Promise<AsMetadata> {
  const step = 'AS metadata';
  const body = expectJsonObject(
    step,
    await get(ctx, `${iss.replace(/\/$/, '')}/.well-known/oauth-authorization-server`),
    200,
  );
  if (body['issuer'] !== iss) throw new RpFlowError(step, `issuer ${String(body['issuer'])} differs from ${iss}`);
  const types = body['authorization_data_types_supported'];
  if (!Array.isArray(types) || !types.includes('sign'))
    throw new RpFlowError(step, 'the AS does not support authorization details type sign');
  ctx.step('AS metadata: issuer confirmed, type sign supported');
  return {
    issuer: iss,
    pushed_authorization_request_endpoint: requireString(step, body, 'pushed_authorization_request_endpoint'),
    authorization_endpoint: requireString(step, body, 'authorization_endpoint'),
    token_endpoint: requireString(step, body, 'token_endpoint'),
  };
}

function signDetails(req: SigningRequest, qtspId: string): unknown[] {
  return [
    {
      type: 'sign',
      locations: [qtspId],
      credentialID: 'qes_eidas',
      documentDigests: req.documentDigests,
      hashAlgorithmOID: req.hashAlgorithmOID,
      ...(req.identityAssuranceClaims ? { identity_assurance_claims: req.identityAssuranceClaims } : {}),
    },
  ];
}

/** Spec 2.4, 2.8: the pushed request; returns request_uri. */
async function pushAuthorizationRequest(
  ctx: FlowContext,
  md: AsMetadata,
  details: unknown[],
  pkce: Pkce | undefined,
  state: string,
  headless: boolean,
): Promise<string> {
  const step = 'PAR';
  const res = await postForm(ctx, md.pushed_authorization_request_endpoint, {
    response_type: 'code',
    client_id: ctx.e.rp.clientId,
    redirect_uri: ctx.e.rp.redirectUri,
    code_challenge: pkce?.challenge,
    code_challenge_method: pkce ? 'S256' : undefined,
    nonce: pkce ? undefined : randomValue(),
    state,
    authorization_details: JSON.stringify(details),
    // sandbox only: the bank consents at once instead of showing its page (README: headless consent)
    sandbox_consent: headless ? 'auto' : undefined,
  });
  const body = expectJsonObject(step, res, 201);
  const requestUri = requireString(step, body, 'request_uri');
  ctx.step(`PAR: request_uri received (expires in ${String(body['expires_in'])} s)`);
  return requestUri;
}

/** The redirect back to us must target our redirect_uri (the query aside). */
function callbackParams(step: string, location: string, redirectUri: string): URLSearchParams {
  const url = new URL(location);
  const expected = new URL(redirectUri);
  if (url.origin !== expected.origin || url.pathname !== expected.pathname)
    throw new RpFlowError(step, 'redirect does not target the registered redirect_uri');
  return url.searchParams;
}

/** Spec 4.3: the authorization request by reference (the metadata's query parameters kept, spec 2.3). */
function authorizationUrl(ctx: FlowContext, md: AsMetadata, requestUri: string): URL {
  const url = new URL(md.authorization_endpoint);
  url.searchParams.append('client_id', ctx.e.rp.clientId);
  url.searchParams.append('request_uri', requestUri);
  return url;
}

/**
 * Spec 5.11, 7.3: the authorization response. state must be the one sent and iss the issuer used so far
 * (mix-up protection), also on an error, which is raised with its error code; else the code.
 */
export function checkCallback(
  params: URLSearchParams,
  expected: { state: string; issuer: string },
  step = 'authorization',
): string {
  if (params.get('state') !== expected.state) throw new RpFlowError(step, 'state differs from the one sent');
  if (params.get('iss') !== expected.issuer)
    throw new RpFlowError(step, 'iss differs from the issuer (mix-up protection)');
  const error = params.get('error');
  if (error) {
    const description = params.get('error_description') ?? undefined;
    throw new RpFlowError(step, `${error}${description ? `: ${description}` : ''}`, undefined, error, description);
  }
  const code = params.get('code');
  if (!code) throw new RpFlowError(step, 'redirect carries no code');
  return code;
}

/** Headless: the authorization endpoint answers the redirect at once; it is read here, not followed. */
async function authorize(ctx: FlowContext, md: AsMetadata, requestUri: string, state: string): Promise<string> {
  const step = 'authorization';
  const res = await get(ctx, authorizationUrl(ctx, md, requestUri));
  const location = res.headers.location;
  if (res.status !== 302 || typeof location !== 'string') throw httpFailure(step, res);
  const code = checkCallback(callbackParams(step, location, ctx.e.rp.redirectUri), { state, issuer: md.issuer });
  ctx.step('authorization: code received, state and iss checked');
  return code;
}

/** Spec 2.9: code for access token, over mTLS. */
async function redeem(
  ctx: FlowContext,
  md: AsMetadata,
  code: string,
  pkce: Pkce | undefined,
): Promise<{ accessToken: string; authorizationDetails: unknown[] }> {
  const step = 'token';
  const body = expectJsonObject(
    step,
    await postForm(ctx, md.token_endpoint, {
      grant_type: 'authorization_code',
      code,
      client_id: ctx.e.rp.clientId,
      redirect_uri: ctx.e.rp.redirectUri,
      code_verifier: pkce?.verifier,
    }),
    200,
  );
  const accessToken = requireString(step, body, 'access_token');
  if (String(body['token_type']).toLowerCase() !== 'bearer') throw new RpFlowError(step, 'token_type is not bearer');
  const details = body['authorization_details'];
  ctx.step(`token: access token received (expires in ${String(body['expires_in'])} s)`);
  return { accessToken, authorizationDetails: Array.isArray(details) ? details : [] };
}

/** What the RP keeps between sending the browser to the bank and the bank's redirect back (never sent out). */
export interface PendingAuthorization {
  readonly state: string;
  readonly pkce?: Pkce;
  readonly metadata: AsMetadata;
  readonly qtsp: { qtsp_id: string; signDoc: string };
}

export interface InteractiveStart {
  /** where the browser goes: the bank's login and consent page */
  readonly authorizationUrl: string;
  readonly pending: PendingAuthorization;
}

/** Service configuration, AS metadata and PAR for `issuer`: what the authorization step starts from. */
async function pushRequest(
  ctx: FlowContext,
  issuer: string,
  req: SigningRequest,
  headless: boolean,
): Promise<{ pending: PendingAuthorization; requestUri: string }> {
  const config = await serviceConfiguration(ctx, issuer);
  const md = await asMetadata(ctx, config.iss);
  const pkce = req.usePkce === false ? undefined : createPkce();
  const state = randomValue();
  const details = signDetails(req, config.qtsp.qtsp_id);
  const requestUri = await pushAuthorizationRequest(ctx, md, details, pkce, state, headless);
  return { pending: { state, ...(pkce ? { pkce } : {}), metadata: md, qtsp: config.qtsp }, requestUri };
}

async function withContext<T>(
  e: RpEndpoints,
  req: { onStep?: ((msg: string) => void) | undefined },
  agent: Agent | undefined,
  run: (ctx: FlowContext) => Promise<T>,
): Promise<T> {
  const ctx: FlowContext = { e, agent: agent ?? rpAgent(e), step: req.onStep ?? (() => undefined) };
  try {
    return await run(ctx);
  } finally {
    if (!agent) ctx.agent.destroy();
  }
}

/**
 * Interactive signing, first half: PAR at the bank of `issuer` (the account chooser's issuer_url, spec 2.1)
 * without the headless switch, so the bank shows its login and consent page at the authorization URL.
 */
export function startInteractiveSigning(
  e: RpEndpoints,
  issuer: string,
  req: SigningRequest,
  opts: { agent?: Agent } = {},
): Promise<InteractiveStart> {
  return withContext(e, req, opts.agent, async (ctx) => {
    const { pending, requestUri } = await pushRequest(ctx, issuer, req, false);
    return { authorizationUrl: authorizationUrl(ctx, pending.metadata, requestUri).toString(), pending };
  });
}

/**
 * Interactive signing, second half: the parameters of the redirect to our callback checked (spec 5.11; an
 * error redirect raises RpFlowError with its `error`), the code redeemed. Use each pending authorization once.
 */
export function finishInteractiveSigning(
  e: RpEndpoints,
  pending: PendingAuthorization,
  params: URLSearchParams,
  opts: { agent?: Agent; onStep?: (msg: string) => void } = {},
): Promise<AuthorizeResult> {
  return withContext(e, opts, opts.agent, async (ctx) => {
    const code = checkCallback(params, { state: pending.state, issuer: pending.metadata.issuer });
    ctx.step('authorization: code received, state and iss checked');
    const token = await redeem(ctx, pending.metadata, code, pending.pkce);
    return { ...token, qtsp: pending.qtsp };
  });
}

/**
 * The whole flow at the bank of `e.issuer`, headless: PAR asks the sandbox bank to consent at once. With
 * `interactive: true` it stops after PAR instead (startInteractiveSigning). `opts.agent`: a keep-alive RP
 * agent the caller owns and reuses (the benchmark's load generator); else one per call.
 */
export function authorizeSigning(
  e: RpEndpoints,
  req: SigningRequest & { interactive: true },
  opts?: { agent?: Agent },
): Promise<InteractiveStart>;
export function authorizeSigning(
  e: RpEndpoints,
  req: SigningRequest & { interactive?: false },
  opts?: { agent?: Agent },
): Promise<AuthorizeResult>;
export async function authorizeSigning(
  e: RpEndpoints,
  req: SigningRequest,
  opts: { agent?: Agent } = {},
): Promise<AuthorizeResult | InteractiveStart> {
  if (req.interactive) return startInteractiveSigning(e, e.issuer, req, opts);
  return withContext(e, req, opts.agent, async (ctx) => {
    const { pending, requestUri } = await pushRequest(ctx, e.issuer, req, true);
    const code = await authorize(ctx, pending.metadata, requestUri, pending.state);
    const token = await redeem(ctx, pending.metadata, code, pending.pkce);
    return { ...token, qtsp: pending.qtsp };
  });
}

/** spec 2.12: the fixed profile of a signDoc request */
export const SIGN_DOC_PROFILE = 'http://uri.etsi.org/19432/v1.1.1#/creationprofile#';

export interface SignDocChoice {
  readonly hashes: readonly string[];
  readonly hashAlgorithmOID: string;
  /** C (CAdES), X (XAdES) or P (PAdES) */
  readonly format: string;
  /** AdES-B-B ... AdES-B-LTA */
  readonly level: string;
  readonly signAlgo?: string;
  readonly signAlgoParams?: string;
}

/** The signDoc request body (spec 2.12) for the hashes the user consented to, with the authorization's SAD. */
export function signDocRequest(auth: Pick<AuthorizeResult, 'accessToken'>, c: SignDocChoice): Record<string, unknown> {
  return {
    SAD: auth.accessToken,
    credentialID: 'qes_eidas',
    documentDigests: { hashes: [...c.hashes], hashAlgorithmOID: c.hashAlgorithmOID },
    profile: SIGN_DOC_PROFILE,
    signature_format: c.format,
    conformance_level: c.level,
    ...(c.signAlgo ? { signAlgo: c.signAlgo } : {}),
    ...(c.signAlgoParams ? { signAlgoParams: c.signAlgoParams } : {}),
  };
}

/** POST signDoc (spec 4.5) as JSON over mTLS with the RP certificate; the body is parsed JSON when it is JSON. */
export async function callSignDoc(
  signDocUrl: string,
  e: RpEndpoints,
  body: Record<string, unknown>,
  opts: { timeoutMs?: number } = {},
): Promise<{ status: number; body: unknown; headers: Record<string, unknown> }> {
  const agent = rpAgent(e);
  try {
    const res = await httpRequest(signDocUrl, {
      method: 'POST',
      agent,
      timeoutMs: opts.timeoutMs ?? SIGN_DOC_TIMEOUT_MS,
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      maxResponseBytes: 32 * 1024 * 1024,
    });
    const parsed = jsonBody(res);
    return {
      status: res.status,
      body: parsed === undefined ? res.body.toString('utf8') : parsed,
      headers: { ...res.headers },
    };
  } finally {
    agent.destroy();
  }
}
