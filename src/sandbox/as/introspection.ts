/**
 * POST /introspect (spec 2.11, 5.8, 7.5): the QTSP authenticates with client_id and its registered
 * certificate (401 otherwise). Then the token: our signature, not expired, a known jti, an RP that is
 * served, type sign allowed, location = this QTSP (spec 3). Any failure: a signed JWT whose payload is only
 * {active: false}. The answer is application/jwt, typ token-introspection+jwt. The introspection switches
 * of SandboxControls take effect here.
 */
import type { Request, Response } from 'express';
import { decodeProtectedHeader, jwtVerify, type JWTPayload } from 'jose';
import { OAuthError, sendError } from '../errors.ts';
import { ACR_ONLINE_BANKING_SCA, DOCUMENTS_CONSENTED_CLAIM } from '../platform/constants.ts';
import type { SpRecord } from '../platform/sp-record.ts';
import { TEST_USERS, userClaim, type TestUser } from '../users.ts';
import { authenticateQtsp } from './client-auth.ts';
import type { AsContext } from './context.ts';
import { Form } from './form.ts';
import { signJwt } from './jwt.ts';
import type { Transaction } from './model.ts';

const INACTIVE = { active: false } as const;
const TYP = 'token-introspection+jwt';

/** Signature (a published key), iss, exp; undefined when anything is wrong. */
async function verifyAccessToken(ctx: AsContext, token: string): Promise<JWTPayload | undefined> {
  try {
    const key = ctx.keys.publishedKey(decodeProtectedHeader(token).kid);
    if (!key) return undefined;
    const { payload } = await jwtVerify(token, key.publicKey, {
      algorithms: ['RS256'],
      issuer: ctx.urls.issuer,
      requiredClaims: ['exp', 'iat', 'jti', 'cnf'],
    });
    return payload;
  } catch {
    return undefined;
  }
}

/** The transaction, if it may be disclosed to this QTSP (spec 3: access token at introspection). */
function servableTransaction(ctx: AsContext, qtsp: SpRecord, jti: string): Transaction | undefined {
  const transaction = ctx.store.transactions.get(jti);
  if (!transaction) return undefined;
  const client = ctx.clients.get(transaction.clientId)?.registration;
  if (!client || client.state === 'inactive' || !client.allowedTypes.includes('sign')) return undefined;
  return transaction.sign.qtspId === qtsp.client_id ? transaction : undefined;
}

function verifiedClaims(user: TestUser, transaction: Transaction): Record<string, unknown> {
  const claims = Object.fromEntries(transaction.claimNames.map((name) => [name, userClaim(user, name)]));
  return {
    verification: {
      trust_framework: 'de_aml',
      evidence: [
        {
          type: 'electronic_record',
          check_details: [{ check_method: 'data' }],
          time: new Date(transaction.verifiedAt * 1000).toISOString(),
          record: { type: 'bank_account', source: { name: 'Sandbox Bank', country_code: 'DEU' } },
        },
      ],
    },
    claims,
  };
}

function activePayload(
  ctx: AsContext,
  qtsp: SpRecord,
  token: JWTPayload,
  transaction: Transaction,
): Record<string, unknown> | undefined {
  const user = TEST_USERS.get(transaction.sub);
  const client = ctx.clients.get(transaction.clientId)?.registration;
  if (!user || !client) return undefined;
  return {
    active: true,
    iss: ctx.urls.issuer,
    aud: qtsp.client_id,
    iat: Math.floor(Date.now() / 1000),
    exp: token.exp,
    sub: user.sub,
    client_id: client.clientId,
    client_state: client.state,
    cnf: token['cnf'],
    acr: ACR_ONLINE_BANKING_SCA,
    verified_claims: verifiedClaims(user, transaction),
    txn: transaction.txn,
    authorization_details: transaction.sign.details,
    [DOCUMENTS_CONSENTED_CLAIM]: { policy_uri: qtsp.policy_uri, tos_uri: qtsp.tos_uri },
  };
}

async function introspect(ctx: AsContext, qtsp: SpRecord, token: string | undefined): Promise<Record<string, unknown>> {
  const payload = token === undefined ? undefined : await verifyAccessToken(ctx, token);
  const transaction = typeof payload?.jti === 'string' ? servableTransaction(ctx, qtsp, payload.jti) : undefined;
  return (payload && transaction && activePayload(ctx, qtsp, payload, transaction)) || { ...INACTIVE };
}

/** Renders the payload as the controls say: normal, or one of the failure modes. */
async function respond(ctx: AsContext, res: Response, payload: Record<string, unknown>): Promise<void> {
  const c = ctx.controls.introspection;
  if (c.hold) await c.hold();
  switch (c.mode) {
    case 'stall':
      return; // never answers; close() destroys the socket
    case 'reset':
      res.req.socket.destroy(); // the AS goes away mid-call
      return;
    case 'http500':
      sendError(res, new OAuthError(500, 'server_error', 'introspection failed (sandbox switch http500)'));
      return;
    case 'garbage':
      res.status(200).type('application/jwt').send('this-is-not-a-jwt');
      return;
    default: {
      const body = c.mutate ? c.mutate(payload) : payload;
      const jwt = await signJwt(ctx.keys, body, {
        typ: TYP,
        key: c.signingKey,
        alg: c.mode === 'unsigned' ? 'none' : 'RS256',
      });
      res.status(200).set('Cache-Control', 'no-store').type('application/jwt').send(jwt);
    }
  }
}

export function introspectionHandler(ctx: AsContext) {
  return async (req: Request, res: Response): Promise<void> => {
    const form = Form.of(req);
    const qtsp = authenticateQtsp(ctx, form, req);
    await respond(ctx, res, await introspect(ctx, qtsp, form.get('token')));
  };
}
